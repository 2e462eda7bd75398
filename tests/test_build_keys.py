"""``build --key-type`` turns keys into values of that type as they are read (issue 41, item 4).

* ``string``: a CSV column of numbers keeps each field's text as written (``007``), a JSON
  Lines number its JSON text as written (``1.0``, ``1e3``, ``-0``), a Parquet integer its
  decimal digits; the key groups are those of the Java ``String`` keys, so a job keyed by
  numeric-looking String ids is reproduced.
* ``int64`` (and the other number types): a key that does not convert (``x``, ``1.5``, an
  int32 out of range) is a bad record of reason ``key-type``: refused by default naming file,
  row, line, column and value; skipped and counted with ``--on-bad-record skip``; the build
  stops at it with ``fail``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_support import run

from formats.inputs import FileSource, InputError
from formats.open import open_checkpoint
from formats.ops.build import build_state
from statecore.hashing import java_string_hash
from statecore.key_groups import assign_to_key_group

KEY_TYPE = "key-type"  # formats.inputs.bad_records.KEY_TYPE (new in issue 41)


def entries(location: str, state: str = "count") -> dict[Any, tuple[int, Any]]:
    """key -> (key group, value) of one keyed state of a build's checkpoint."""
    checkpoint = open_checkpoint(location)
    op = checkpoint.metadata.operators[0]
    return {key: (group, value)
            for group, key, _, value in checkpoint.keyed_entries(op.uid, state)}


def key_type_of(location: str) -> str | None:
    return open_checkpoint(location).metadata.operators[0].key_type


def build(tmp_path: Path, name: str, *paths: Path, key_type: str | None = None,
          on_bad_record: str = "refuse", aggregations: tuple[str, ...] = ("count",)) -> Any:
    return build_state([str(p) for p in paths], key="user", key_type=key_type,
                       aggregations=list(aggregations), checkpoint_dir=str(tmp_path / name),
                       on_bad_record=on_bad_record)


def string_groups(*keys: str) -> dict[str, int]:
    return {k: assign_to_key_group(java_string_hash(k), 128) for k in keys}


# -- --key-type string ---------------------------------------------------------------------------


def test_csv_numbers_keyed_as_strings_keep_their_text(tmp_path: Path) -> None:
    data = tmp_path / "events.csv"
    data.write_text("user,amount\n594,1\n007,2\n594,3\n12,4\n")
    summary = build(tmp_path, "state", data, key_type="string")
    assert summary.records == 4 and key_type_of(summary.final_location) == "string"
    found = entries(summary.final_location)
    groups = string_groups("594", "007", "12")
    assert found == {"594": (groups["594"], 2), "007": (groups["007"], 1),
                     "12": (groups["12"], 1)}


def test_json_numbers_keyed_as_strings_are_their_json_text(tmp_path: Path) -> None:
    data = tmp_path / "events.jsonl"
    data.write_text('{"user": 594, "amount": 1}\n{"user":1.0,"amount":2}\n'
                    '{"amount": 3, "user" : 1e3}\n{"user": -0, "amount": 4}\n'
                    '{"user": "abc", "amount": 5}\n{"user": 594, "amount": 6}\n'
                    '{"note": "\\"user\\": 5", "user": 1E3, "amount": 7}\n')
    summary = build(tmp_path, "state", data, key_type="string", aggregations=("sum:amount",))
    found = entries(summary.final_location, "sum_amount")
    groups = string_groups("594", "1.0", "1e3", "-0", "abc", "1E3")
    assert found == {"594": (groups["594"], 7), "1.0": (groups["1.0"], 2),
                     "1e3": (groups["1e3"], 3), "-0": (groups["-0"], 4),
                     "abc": (groups["abc"], 5), "1E3": (groups["1E3"], 7)}


def test_numeric_ids_as_strings_equal_the_same_ids_written_as_text(tmp_path: Path) -> None:
    """The state of a job keyed by String ids, whichever way the input writes them."""
    ids = [594, 12, 594, 31337, 12, 7]
    as_csv = tmp_path / "events.csv"
    as_csv.write_text("user,amount\n" + "".join(f"{u},{i}\n" for i, u in enumerate(ids)))
    as_numbers = tmp_path / "numbers.jsonl"
    as_numbers.write_text("".join(json.dumps({"user": u, "amount": i}) + "\n"
                                  for i, u in enumerate(ids)))
    as_text = tmp_path / "text.jsonl"
    as_text.write_text("".join(json.dumps({"user": str(u), "amount": i}) + "\n"
                               for i, u in enumerate(ids)))
    parquet = tmp_path / "events.parquet"
    pq.write_table(pa.table({"user": pa.array(ids, pa.int64()), "amount": range(len(ids))}),
                   parquet)
    reference = entries(build(tmp_path, "text", as_text).final_location)
    assert set(reference) == {"594", "12", "31337", "7"}
    for name, path in (("csv", as_csv), ("numbers", as_numbers), ("parquet", parquet)):
        assert entries(build(tmp_path, name, path, key_type="string").final_location) == (
            reference), name


def test_key_type_string_through_the_cli_as_the_mixed_key_refusal_advises(
        tmp_path: Path) -> None:
    data = tmp_path / "events.csv"
    data.write_text("user,amount\n594,1\nabc,2\n")
    code, _, err = run("build", str(data), "--key", "user", "--agg", "count",
                       "--checkpoint-dir", str(tmp_path / "refused"))
    assert code == 3 and "give --key-type (string keys them all as text)" in err, err
    code, out, err = run("--output", "json", "build", str(data), "--key", "user",
                         "--key-type", "string", "--agg", "count", "--checkpoint-dir",
                         str(tmp_path / "state"))
    assert code == 0, err
    assert set(entries(json.loads(out)["location"])) == {"594", "abc"}


# -- --key-type int64 and other numbers ----------------------------------------------------------


def test_a_key_of_no_int64_is_refused_naming_row_line_column_and_value(tmp_path: Path) -> None:
    data = tmp_path / "events.csv"
    data.write_text("user,amount\n1,5\n2,6\n\nx,7\n1,8\n")
    code, out, err = run("build", str(data), "--key", "user", "--key-type", "int64", "--agg",
                         "count", "--checkpoint-dir", str(tmp_path / "state"))
    assert code == 3 and out == "" and err.count("\n") == 1, err
    assert (f"{data}: row 3 (line 5), column 'user': the key 'x' does not convert to int64"
            in err), err
    assert not (tmp_path / "state").exists() or not list((tmp_path / "state").glob("chk-*"))


@pytest.mark.parametrize("fold", [True, False])
def test_a_key_of_no_int64_is_skipped_and_counted(tmp_path: Path, fold: bool) -> None:
    data = tmp_path / "events.csv"
    data.write_text("user,amount\n1,5\n2,6\nx,7\n1,8\n1.5,9\n")
    summary = build_state([str(data)], key="user", key_type="int64", aggregations=["count"],
                          checkpoint_dir=str(tmp_path / "state"), on_bad_record="skip",
                          fold=fold)
    assert summary.skipped == {KEY_TYPE: 2} and summary.records == 3
    assert [(b.row, b.line, b.column, b.reason) for b in summary.skipped_examples] == [
        (3, 4, "user", KEY_TYPE), (5, 6, "user", KEY_TYPE)]
    assert "'x' does not convert to int64" in summary.skipped_examples[0].detail
    found = entries(summary.final_location)
    assert {k: v for k, (_, v) in found.items()} == {1: 2, 2: 1}
    assert all(type(k) is int for k in found)
    assert key_type_of(summary.final_location) == "int64"


def test_a_key_of_no_int64_stops_a_failing_build_there(tmp_path: Path) -> None:
    data = tmp_path / "events.csv"
    data.write_text("user,amount\n1,5\n2,6\nx,7\n1,8\n")
    with pytest.raises(InputError, match=r"row 3 \(line 4\), column 'user': the key 'x'"):
        build(tmp_path, "state", data, key_type="int64", on_bad_record="fail")
    final = open_checkpoint(str(tmp_path / "state" / "chk-0000001"))
    op = final.metadata.operators[0]
    assert sorted(k for _, k, _, _ in final.keyed_entries(op.uid, "count")) == [1, 2]


def test_int32_keys_out_of_range_and_parquet_keys_are_bad_records(tmp_path: Path) -> None:
    data = tmp_path / "events.csv"
    data.write_text("user,amount\n1,5\n3000000000,6\n-2147483648,7\n")
    with pytest.raises(InputError, match=r"row 2 \(line 3\), column 'user': the key "
                                         r"3000000000 does not convert to int32"):
        FileSource([str(data)], "user", key_type="int32")
    source = FileSource([str(data)], "user", key_type="int32", on_bad_record="skip")
    assert source.column_types["user"] == "int32"
    assert source.rows(str(data), 0, 10).column("user").to_pylist() == [1, -2147483648]
    parquet = tmp_path / "events.parquet"
    pq.write_table(pa.table({"user": pa.array([1, 2, 1 << 40, 3], pa.int64())}), parquet,
                   row_group_size=2)
    with pytest.raises(InputError, match=r"row 3, column 'user': the key 1099511627776 does "
                                         r"not convert to int32"):
        FileSource([str(parquet)], "user", key_type="int32")
    summary = build(tmp_path, "parquet", parquet, key_type="int32", on_bad_record="skip")
    assert summary.skipped == {KEY_TYPE: 1}
    assert sorted(entries(summary.final_location)) == [1, 2, 3]


def test_json_text_keys_convert_to_int64(tmp_path: Path) -> None:
    data = tmp_path / "events.jsonl"
    data.write_text('{"user": "12"}\n{"user": "x"}\n{"user": "012"}\n')
    summary = build(tmp_path, "state", data, key_type="int64", on_bad_record="skip")
    assert summary.skipped == {KEY_TYPE: 1}
    assert {k: v for k, (_, v) in entries(summary.final_location).items()} == {12: 2}
