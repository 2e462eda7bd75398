"""`export` writes what `diff` compares: read back with plain pyarrow, every format holds the
same logical state as the checkpoint (keyed entries with TTL timestamps, split elements as a
multiset, union state once per distinct range, broadcast state as one map).

The expected content comes from the checkpoint reader (``keyed_entries``, ``rows_table``), not
from the exporter; samples, rescaled checkpoints (metadata-only, compact, max-parallelism
change) and hypothesis-generated checkpoints are exported in all three formats.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from oracle import REPO_ROOT
from test_diff_pairs import keyed_checkpoint, operator_checkpoint
from test_export import mixed_tuples

from formats.model.arrow_types import from_arrow, is_scalar
from formats.model.checkpoint import Checkpoint
from formats.model.columns import operator_schema, split_ttl, ttl_spec, value_spec
from formats.open import open_checkpoint
from formats.ops.diff import canonical, plain  # plain undoes canonical
from formats.ops.export import export_checkpoint, jsonable
from formats.ops.rescale import plan_checkpoint, rescale_checkpoint
from statecore.checkpoint import StateMetadata, operator_state_segments
from statecore.errors import StatectlError
from statecore.serializers import VOID_NAMESPACE

SAMPLES = REPO_ROOT / "sample_checkpoints" / "v1"
COLUMNS = ["operator", "state", "subtask", "key_group", "key", "namespace", "value",
           "ttl_timestamp"]

Content = dict[tuple[str, str], Any]


def _ns(namespace: Any) -> Any:
    return None if namespace is VOID_NAMESPACE else namespace


def logical(checkpoint: Checkpoint) -> Content:
    """What `diff` compares, from the reader: per (operator, state)."""
    out: Content = {}
    for op in checkpoint.metadata.operators:
        for state in op.states:
            if state.scope == "keyed":
                out[op.uid, state.name] = {
                    (canonical(k), canonical(_ns(ns))): canonical(split_ttl(state, v))
                    for _, k, ns, v in checkpoint.keyed_entries(op.uid, state.name)}
                continue
            read = from_arrow(state.value_type)
            segments = operator_state_segments(op, state.name, distinct=state.kind != "split")
            rows = [row for _, h in segments for row in checkpoint.rows_table(
                h.file, operator_schema(state), h.first_element, h.element_count).to_pylist()]
            if state.kind == "broadcast":
                assert state.user_key_type is not None
                key = from_arrow(state.user_key_type)
                out[op.uid, state.name] = {canonical(key(r["key"])): canonical(read(r["value"]))
                                           for r in rows}
            else:
                out[op.uid, state.name] = Counter(canonical(read(r["value"])) for r in rows)
    return out


def _decoders(checkpoint: Checkpoint, uid: str, state: StateMetadata) -> dict[str, Any]:
    op = checkpoint.operator(uid)
    def plain(v):
        return (v)
    key_spec = op.key_type if state.scope == "keyed" else state.user_key_type
    return {"key": from_arrow(key_spec) if key_spec else plain,
            "namespace": plain if state.namespace_type == "void" else from_arrow(
                state.namespace_type),
            "value": from_arrow(value_spec(state) if state.scope == "keyed"
                                else state.value_type),
            "ttl_timestamp": from_arrow(ttl_spec(state)) if state.ttl else plain}


def exported(checkpoint: Checkpoint, out: Path, fmt: str) -> Content:
    """The exported tables read back, in the same logical form (values as in `logical`)."""
    manifest = json.loads((out / "_export.json").read_text())
    content: Content = {}
    for table in manifest["tables"]:
        uid, name = table["operator"]["uid"], table["state"]
        state = next(s for s in checkpoint.operator(uid).states if s.name == name)
        path = out / table["location"]
        if fmt == "parquet":
            arrow = pq.read_table(path)
            assert arrow.column_names == COLUMNS
            decode = _decoders(checkpoint, uid, state)
            rows = [{c: (None if r[c] is None or c not in decode else decode[c](r[c]))
                     for c in ("key", "namespace", "value", "ttl_timestamp")} | {
                "operator": r["operator"], "state": r["state"]} for r in arrow.to_pylist()]
        else:
            lines = [line for line in path.read_text().split("\n") if line]
            if fmt == "jsonl":
                rows = [json.loads(line) for line in lines]
                specs = [checkpoint.operator(uid).key_type, state.value_type,
                         state.user_key_type, state.namespace_type]
                if rows and not mixed_tuples(specs):  # plain pyarrow reads it (see there)
                    assert pajson.read_json(path).num_rows == len(rows)
            else:  # CSV infers types: read text columns as text (a key "0" stays "0")
                op = checkpoint.operator(uid)
                specs = {"key": op.key_type if state.scope == "keyed" else state.user_key_type,
                         "namespace": state.namespace_type}
                text = {c: pa.string() for c, spec in specs.items()
                        if spec in ("string", "char")}
                if state.value_type in ("string", "char") and state.kind not in ("list", "map"):
                    text["value"] = pa.string()
                # a float column whose values are all integral ("-0", "3") is inferred as
                # int64, which loses -0.0: read declared floats as floats
                floats = {c: pa.float64() for c, spec in specs.items()
                          if spec in ("float32", "float64")}
                if state.value_type in ("float32", "float64") and state.kind not in (
                        "list", "map"):
                    floats["value"] = pa.float64()
                text |= floats
                # pyarrow reads "nan" as null by default: only an empty cell is null here
                arrow = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(
                    column_types={"operator": pa.string(), "state": pa.string(), **text},
                    null_values=[""], strings_can_be_null=True))
                assert arrow.column_names == COLUMNS
                rows = arrow.to_pylist()
        assert len(rows) == table["rows"]
        assert all(r["operator"] == uid and r["state"] == name for r in rows)
        content[uid, name] = rows
    return content


def compare(checkpoint: Checkpoint, out: Path, fmt: str) -> None:
    expected = logical(checkpoint)
    got = exported(checkpoint, out, fmt)
    assert set(got) == set(expected)
    for (uid, name), rows in got.items():
        state = next(s for s in checkpoint.operator(uid).states if s.name == name)
        want = expected[uid, name]
        if fmt == "parquet":
            if state.scope == "keyed":
                back = {(canonical(r["key"]), canonical(r["namespace"])): canonical(
                    (r["value"], r["ttl_timestamp"])) for r in rows}
                assert back == want, name
            elif state.kind == "broadcast":
                assert {canonical(r["key"]): canonical(r["value"]) for r in rows} == want
            else:
                assert Counter(canonical(r["value"]) for r in rows) == want, name
            continue
        # text formats: compare against the expected content rendered by the JSON rules
        if state.scope == "keyed":
            want_rows = sorted(json.dumps(_number_free([jsonable(plain(x), strict=False) for x in (
                k, ns, v[1][0], v[1][1])]), sort_keys=True) for (k, ns), v in want.items())
            op = checkpoint.operator(uid)
            nested = {c: fmt == "csv" and spec is not None and not is_scalar(spec)
                      for c, spec in (("key", op.key_type), ("namespace", None if
                                      state.namespace_type == "void" else state.namespace_type),
                                      ("value", value_spec(state)),
                                      ("ttl_timestamp", ttl_spec(state) if state.ttl else None))}
            got_rows = sorted(json.dumps(_number_free([
                json.loads(r[c]) if nested[c] and r[c] is not None else r[c]
                for c in ("key", "namespace", "value", "ttl_timestamp")]), sort_keys=True)
                for r in rows)
            assert got_rows == want_rows, name
        else:
            assert len(rows) == (sum(want.values()) if isinstance(want, Counter)
                                 else len(want)), name


def _number_free(value: Any) -> Any:
    """Numbers as floats, non-finite ones by their JSON names (CSV writes 0.0 as 0, nan)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        if math.isnan(value):
            return "NaN"
        return ("Infinity" if value > 0 else "-Infinity") if math.isinf(value) else float(value)
    if isinstance(value, list):
        return [_number_free(v) for v in value]
    if isinstance(value, dict):
        return {k: _number_free(v) for k, v in value.items()}
    return value


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "csv"])
@pytest.mark.parametrize("sample", ["keyed-all-kinds-p2", "operator-split-union-broadcast-p3",
                                    "empty"])
def test_samples_export_their_logical_content(tmp_path: Path, sample: str, fmt: str) -> None:
    checkpoint = open_checkpoint(str(SAMPLES / sample))
    export_checkpoint(checkpoint, str(tmp_path / "out"), fmt)
    compare(checkpoint, tmp_path / "out", fmt)


@pytest.mark.parametrize("mode", ["metadata", "compact", "rehash"])
def test_a_rescaled_checkpoint_exports_the_same_content(tmp_path: Path, mode: str) -> None:
    source = open_checkpoint(str(SAMPLES / "keyed-all-kinds-p2"))
    plan = plan_checkpoint(source, 3, 256 if mode == "rehash" else None)
    rescale_checkpoint(source, str(tmp_path / "r"), plan, compact=mode == "compact")
    rescaled = open_checkpoint(str(tmp_path / "r"))
    export_checkpoint(source, str(tmp_path / "a"))
    export_checkpoint(rescaled, str(tmp_path / "b"))
    compare(rescaled, tmp_path / "b", "parquet")
    assert exported(source, tmp_path / "a", "parquet") .keys() == exported(
        rescaled, tmp_path / "b", "parquet").keys()
    assert logical(source) == logical(rescaled)
    subtasks = {r["subtask"] for r in pq.read_table(
        tmp_path / "b" / "purchases" / "total_cents.parquet").to_pylist()}
    assert subtasks == {0, 1, 2}


def test_operator_state_rows_follow_restore_semantics(tmp_path: Path) -> None:
    checkpoint = operator_checkpoint(tmp_path / "c", [[1, 2], [3], []], union=[[7], [8], [9]],
                                     rules=[{"a": "x", "b": "y"}] * 3)
    export_checkpoint(checkpoint, str(tmp_path / "o"))
    tables = {p.stem: pq.read_table(p).to_pylist() for p in (tmp_path / "o" / "src").iterdir()}
    assert sorted((r["subtask"], r["value"]) for r in tables["offsets"]) == [
        (0, 1), (0, 2), (1, 3)]
    assert sorted(r["value"] for r in tables["watermarks"]) == [7, 8, 9]  # once, not 3 times
    assert sorted((r["key"], r["value"]) for r in tables["rules"]) == [("a", "x"), ("b", "y")]
    assert all(r["key_group"] is None for rows in tables.values() for r in rows)


_values = st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=64),
                    st.integers(-10**6, 10**6).map(float))


@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(amounts=st.dictionaries(st.text(min_size=1, max_size=8), _values, max_size=30),
       windows=st.dictionaries(st.tuples(st.sampled_from(["a", "b", "ü"]),
                                         st.integers(0, 10) .map(lambda w: w * 60_000)),
                               st.integers(-2**63, 2**63 - 1), max_size=20),
       parallelism=st.integers(1, 4))
@example(amounts={"0": math.nan, "1": math.inf, "2": -math.inf}, windows={}, parallelism=1)
@example(amounts={"0": -0.0}, windows={}, parallelism=1)  # CSV "-0": a float, not int 0
def test_generated_checkpoints_round_trip(tmp_path: Path, amounts: dict[str, float],
                                          windows: dict[tuple[str, int], int],
                                          parallelism: int) -> None:
    root = tmp_path / f"g{len(list(tmp_path.iterdir()))}"
    checkpoint = keyed_checkpoint(root / "chk", {
        "amount": {(k, None): v for k, v in amounts.items()},
        "per_window": dict(windows.items()),
        "fresh": {(k, None): i for i, k in enumerate(amounts)}}, parallelism)
    for fmt in ("parquet", "jsonl", "csv"):
        export_checkpoint(checkpoint, str(root / fmt), fmt)
        compare(checkpoint, root / fmt, fmt)


def test_refusals_leave_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkpoint = open_checkpoint(str(SAMPLES / "keyed-all-kinds-p2"))
    (tmp_path / "exists").mkdir()
    for kwargs in ({"out": str(tmp_path / "exists")},
                   {"out": str(tmp_path / "x"), "fmt": "xml"},
                   {"out": str(tmp_path / "x"), "states": ["nope"]}):
        with pytest.raises(StatectlError):
            export_checkpoint(checkpoint, **kwargs)  # type: ignore[arg-type]
    import formats.ops.export as export_module

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise OSError("disk full")
    monkeypatch.setattr(export_module, "jsonable", broken)
    with pytest.raises(StatectlError, match="disk full"):
        export_checkpoint(checkpoint, str(tmp_path / "y"), "jsonl")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exists"]  # no staging left


def test_progress_reaches_the_total(tmp_path: Path) -> None:
    calls: list[tuple[int, int]] = []
    export_checkpoint(open_checkpoint(str(SAMPLES / "keyed-all-kinds-p2")),
                      str(tmp_path / "p"), progress=lambda d, t: calls.append((d, t)))
    assert calls and calls[-1][0] == calls[-1][1] == 12  # 6 states x 2 subtasks
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
