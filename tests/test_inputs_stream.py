"""Build inputs are streamed (``formats/inputs/``) and folded without Acero
(``formats/ops/fold.py``).

* ``FileSource.rows`` / ``read`` at any sequence of positions give exactly the whole file's
  rows (``read_input``), for CSV, JSON Lines and Parquet, while holding only the last run;
* column types are what the whole-file readers infer, also when a later block changes them;
* malformed files and inputs changed under a checkpoint fail with ``InputError``;
* folding's reductions equal Arrow's ``group_by`` (count, sum, min, max, with nulls), runs
  adapt their length, and a folded build never imports pandas (35 MB of resident memory).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formats.inputs import FileSource, InputError, read_input
from formats.model.key_hash import numpy_integers, numpy_validity
from formats.ops import fold as fold_module
from formats.ops.fold import AggregationFolder
from statecore.aggregations import parse_aggregation

ROOT = Path(__file__).resolve().parent.parent


def write(path: Path, table: pa.Table) -> str:
    if path.suffix == ".parquet":
        pq.write_table(table, path, row_group_size=max(1, table.num_rows // 3 or 1))
    elif path.suffix == ".csv":
        pacsv.write_csv(table, path)
    else:
        path.write_text("".join(json.dumps(row) + "\n" for row in table.to_pylist()))
    return str(path)


rows_strategy = st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d"]),
                                   st.integers(-(1 << 40), 1 << 40)), min_size=1, max_size=300)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=rows_strategy, suffix=st.sampled_from([".csv", ".jsonl", ".parquet"]),
       takes=st.lists(st.tuples(st.integers(0, 320), st.integers(1, 120)), max_size=12))
def test_rows_at_any_positions_are_the_whole_files_rows(
        tmp_path_factory: pytest.TempPathFactory, rows: list[tuple[str, int]], suffix: str,
        takes: list[tuple[int, int]]) -> None:
    directory = tmp_path_factory.mktemp("stream")
    table = pa.table({"k": [k for k, _ in rows], "v": [v for _, v in rows]})
    path = write(directory / f"in{suffix}", table)
    whole = read_input(path)
    source = FileSource([path])
    assert source.count() == whole.num_rows
    assert source.column_types == {"k": "string", "v": "int64"}
    for position, count in takes:
        if position > whole.num_rows:
            with pytest.raises(InputError, match="was the input changed"):
                source.rows(path, position, count)
            continue
        got = source.rows(path, position, count)
        assert got.to_pylist() == whole.slice(position, count).to_pylist()
        start = min(position, whole.num_rows)
        assert [r for _, r in source.read(path, start)] == whole.slice(start).to_pylist()
        assert [p for p, _ in source.read(path, start)] == list(
            range(start + 1, whole.num_rows + 1))
    source.close()


def test_a_run_holds_only_its_own_batches(tmp_path: Path) -> None:
    """Reading a file run after run never holds more than a run and one block of it."""
    n = 300_000
    path = write(tmp_path / "big.csv",
                 pa.table({"k": [f"user-{i:08d}" for i in range(n)], "v": list(range(n))}))
    source = FileSource([path])
    cursor = source._cursors[path]
    position, longest_batch, seen = 0, 0, 0
    while True:
        run = source.rows(path, position, 10_000)
        if not run.num_rows:
            break
        assert run.column("v")[0].as_py() == position
        held = [b.num_rows for b in cursor._batches]
        longest_batch = max(longest_batch, *held)
        assert sum(held) <= 10_000 + 2 * longest_batch
        position += run.num_rows
        seen += run.num_rows
    assert seen == n
    assert longest_batch < n // 4  # the file really is streamed in blocks


def test_types_changing_after_the_first_block_are_inferred_over_the_whole_file(
        tmp_path: Path) -> None:
    # a streaming reader infers from its first block (1 MB); the whole-file reader over all
    n = 200_000
    lines = ["k,v"] + [f"key{i % 7},{i}" for i in range(n)] + ["key1,2.5"]
    path = tmp_path / "promoted.csv"
    path.write_text("\n".join(lines) + "\n")
    assert path.stat().st_size > 2 << 20
    source = FileSource([str(path)])
    assert source.column_types == {"k": "string", "v": "float64"}
    assert read_input(str(path)).schema.field("v").type == pa.float64()
    records = [r for _, r in source.read(str(path), n - 1)]
    assert records == [{"k": f"key{(n - 1) % 7}", "v": float(n - 1)}, {"k": "key1", "v": 2.5}]


def test_a_malformed_row_deep_in_a_file_is_an_input_error(tmp_path: Path) -> None:
    lines = ["k,v"] + [f"key{i},{i}" for i in range(150_000)] + ["key,1,extra"]
    path = tmp_path / "bad.csv"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match="bad.csv"):
        FileSource([str(path)])


def test_an_input_that_shrank_after_it_was_opened_ends_early_not_wrongly(
        tmp_path: Path) -> None:
    path = write(tmp_path / "in.csv", pa.table({"k": ["a", "b", "c"], "v": [1, 2, 3]}))
    source = FileSource([path])
    write(tmp_path / "in.csv", pa.table({"k": ["a"], "v": [1]}))
    assert source.rows(path, 0, 10).to_pylist() == [{"k": "a", "v": 1}]
    assert source.rows(path, 2, 10).num_rows == 0


@settings(max_examples=50, deadline=None)
@given(values=st.lists(st.one_of(st.none(), st.integers(-(1 << 62), 1 << 62)), max_size=40),
       offset=st.integers(0, 5))
def test_numpy_views_equal_to_numpy(values: list[int | None], offset: int) -> None:
    array = pa.array(values, pa.int64()).slice(min(offset, len(values)))
    assert numpy_validity(array).tolist() == array.is_valid().to_pylist()
    dense = array.drop_null()
    assert numpy_integers(dense).tolist() == dense.to_pylist()
    for narrow in (pa.int8(), pa.int16(), pa.int32()):
        small = pa.array([v % 100 for v in dense.to_pylist()], narrow).slice(
            min(offset, len(dense)))
        assert numpy_integers(small).tolist() == small.to_pylist()


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 6), st.one_of(st.none(), st.integers(-50, 50))),
                     min_size=1, max_size=60),
       op=st.sampled_from(["count", "sum", "min", "max"]),
       arrow_type=st.sampled_from([pa.int8(), pa.int32(), pa.int64()]))
def test_folded_reductions_equal_arrows_group_by(rows: list[tuple[int, int | None]], op: str,
                                                 arrow_type: pa.DataType) -> None:
    run = pa.table({"k": pa.array([f"k{k}" for k, _ in rows]),
                    "v": pa.array([v for _, v in rows], arrow_type)})
    encoded = run.column("k").combine_chunks().dictionary_encode()
    index = numpy_integers(encoded.indices)
    values, present = fold_module._reduce((op, None if op == "count" else "v"), run, index,
                                          len(encoded.dictionary))
    got = {k: (None if present is not None and not present[i] else int(values[i]))
           for i, k in enumerate(encoded.dictionary.to_pylist())}
    spec = ([], "count_all") if op == "count" else ("v", op)
    grouped = run.group_by("k", use_threads=False).aggregate([spec])
    name = "count_all" if op == "count" else f"v_{op}"
    expected = dict(zip(grouped.column("k").to_pylist(), grouped.column(name).to_pylist(),
                        strict=True))
    assert got == expected
    # the distinct keys come in order of first appearance, as records one by one meet them
    assert encoded.dictionary.to_pylist() == list(dict.fromkeys(f"k{k}" for k, _ in rows))


def folder_over(tmp_path: Path, keys: list[str]) -> tuple[AggregationFolder, str]:
    path = write(tmp_path / "runs.parquet", pa.table({"k": keys, "v": list(range(len(keys)))}))
    source = FileSource([path])
    aggregations = [parse_aggregation("sum:v", source.column_types, None)]
    return AggregationFolder(source, "k", "string", 128, aggregations), path


def test_runs_grow_where_keys_repeat_and_shrink_where_they_do_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fold_module, "MIN_RUN_RECORDS", 8)
    repeated = [f"k{i % 2}" for i in range(400)]
    folder, path = folder_over(tmp_path, repeated + [f"u{i}" for i in range(2000)])
    runs, position = [], 0
    while True:
        run = folder.fold(path, position, 1000)
        assert run is not None
        if run.end == position:
            break
        runs.append((position, run.end - position))
        list(zip(run.keys, run.key_groups, run.folded, strict=True))
        position = run.end
    assert position == 2400
    lengths = [length for _, length in runs]
    assert lengths[:4] == [8, 16, 32, 64]  # 2 distinct keys per run: doubling
    distinct_only = [length for start, length in runs if start >= 400]
    # every key distinct: each run halves the next (the last one may end the file early)
    assert len(distinct_only) >= 3
    assert all(b == max(8, a // 2) for a, b in zip(distinct_only[:-2], distinct_only[1:-1],
                                                    strict=True))
    assert max(lengths) <= 1000


def test_a_folded_build_does_not_import_pandas(tmp_path: Path) -> None:
    """pyarrow imports pandas for ``group_by`` and ``to_numpy``: 35 MB a build never needs."""
    path = write(tmp_path / "in.csv", pa.table({"k": [f"k{i % 50}" for i in range(5000)],
                                                "v": list(range(5000))}))
    script = (
        "import sys, json\n"
        "from formats.ops.build import build_state\n"
        f"s = build_state([{path!r}], key='k', aggregations=['count', 'sum:v', 'max:v'],\n"
        f"                checkpoint_dir={str(tmp_path / 'out')!r})\n"
        "print(json.dumps({'folded': s.folded, 'pandas': 'pandas' in sys.modules}))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=ROOT, check=True)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"folded": True, "pandas": False}


def test_every_file_needs_the_same_columns(tmp_path: Path) -> None:
    a = write(tmp_path / "a.csv", pa.table({"k": ["x"], "v": [1]}))
    b = write(tmp_path / "b.jsonl", pa.table({"k": ["y"], "v": ["text"]}))
    with pytest.raises(InputError, match="same columns"):
        FileSource([a, b])


@pytest.mark.parametrize("name", ["missing.csv", "missing.jsonl", "missing.parquet"])
def test_a_missing_input_is_an_input_error(tmp_path: Path, name: str) -> None:
    with pytest.raises(InputError, match=name):
        FileSource([str(tmp_path / name)])


def test_an_unknown_extension_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_text("k,v\na,1\n")
    with pytest.raises(InputError, match="unknown input format"):
        FileSource([str(path)])
    with pytest.raises(InputError, match="unknown input format"):
        read_input(str(path))
