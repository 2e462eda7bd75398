"""Records a reader cannot parse, text where numbers are summed, inputs without records.

Issue 41 (items 4 and 6): ``--on-bad-record skip`` covers a CSV row with more or fewer fields
than its header and a JSON Lines line that is not a JSON object (reason ``malformed``), and
text in a CSV column an aggregation sums (``mixed-type``); refused by default naming the row,
the line (1-based, as editors count, blank lines included) and the column. A CSV header alone
or an empty file holds no records: said so, not "column 'user' has type null"; beside other
inputs, it adds nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_support import run

from formats.inputs.bad_records import MIXED_TYPE
from formats.ops.build import build_state

MALFORMED = "malformed"  # formats.inputs.bad_records.MALFORMED (new in issue 41)


def state(location: str, name: str) -> dict[Any, Any]:
    from formats.open import open_checkpoint
    checkpoint = open_checkpoint(location)
    op = checkpoint.metadata.operators[0]
    return {key: value for _, key, _, value in checkpoint.keyed_entries(op.uid, name)}


def refused(tmp_path: Path, data: Path, *agg: str) -> str:
    args = [a for spec in agg or ("count",) for a in ("--agg", spec)]
    code, out, err = run("build", str(data), "--key", "user", *args, "--checkpoint-dir",
                         str(tmp_path / "refused"))
    assert code == 3 and out == "" and err.count("\n") == 1, (code, err)
    assert "Traceback" not in err
    return err


def skipped(tmp_path: Path, data: Path, *agg: str, fold: bool = True) -> Any:
    return build_state([str(data)], key="user", aggregations=list(agg or ("count",)),
                       checkpoint_dir=str(tmp_path / f"skip-{fold}"), on_bad_record="skip",
                       fold=fold)


# -- CSV rows of another number of fields --------------------------------------------------------


@pytest.mark.parametrize("fold", [True, False])
def test_a_csv_row_with_an_extra_or_a_missing_field_is_skipped(tmp_path: Path,
                                                               fold: bool) -> None:
    data = tmp_path / "events.csv"
    data.write_text('user,amount\na,1\nb,2,3\n"c\nd",4\ne\na,5\n')
    summary = skipped(tmp_path, data, "sum:amount", fold=fold)
    assert summary.skipped == {MALFORMED: 2} and summary.records == 3
    assert [(b.row, b.line, b.reason, b.detail) for b in summary.skipped_examples] == [
        (2, 3, MALFORMED, "3 fields where the header has 2"),
        (4, 6, MALFORMED, "1 field where the header has 2")]
    assert state(summary.final_location, "sum_amount") == {"a": 6, "c\nd": 4}


def test_a_csv_row_with_an_extra_field_is_refused_naming_its_line(tmp_path: Path) -> None:
    data = tmp_path / "events.csv"
    data.write_text("user,amount\na,1\n\nb,2,3\n")
    err = refused(tmp_path, data)
    assert f"{data}: row 2 (line 4): 3 fields where the header has 2" in err, err
    assert "--on-bad-record skip" in err


# -- text in a summed column ---------------------------------------------------------------------


@pytest.mark.parametrize("fold", [True, False])
def test_text_in_a_summed_csv_column_is_skipped(tmp_path: Path, fold: bool) -> None:
    data = tmp_path / "events.csv"
    data.write_text("user,amount\na,1\nb,xx\na,3\nb,NA\nb,4\n")
    summary = skipped(tmp_path, data, "sum:amount", "count", fold=fold)
    assert summary.skipped == {MIXED_TYPE: 1}  # NA is a null (pyarrow's), not text
    (bad,) = summary.skipped_examples
    assert (bad.row, bad.line, bad.column, bad.reason) == (2, 3, "amount", MIXED_TYPE)
    assert state(summary.final_location, "sum_amount") == {"a": 4, "b": 4}
    assert state(summary.final_location, "count") == {"a": 2, "b": 2}


def test_text_in_a_summed_csv_column_is_refused_naming_row_column_and_value(
        tmp_path: Path) -> None:
    data = tmp_path / "events.csv"
    data.write_text("user,amount\na,1\nb,xx\n")
    err = refused(tmp_path, data, "sum:amount")
    assert f"{data}: row 2 (line 3), column 'amount': 'xx' is not a number" in err, err
    # a column of text from its first value on is no column of numbers with a bad record
    data.write_text("user,amount\na,xx\nb,1\n")
    err = refused(tmp_path, data, "sum:amount")
    assert "column 'amount' is string, not numeric" in err, err


# -- JSON Lines that are no JSON object ----------------------------------------------------------


def test_broken_json_lines_are_refused_at_their_line(tmp_path: Path) -> None:
    data = tmp_path / "events.jsonl"
    data.write_text('{"user": "a", "amount": 1}\n\n{"user": "b", "amount": 2}\n'
                    '{"user": "c",\n{"user": "d", "amount": 3}\n')
    err = refused(tmp_path, data)
    assert f"{data}: row 3 (line 4): not JSON" in err, err
    data.write_text('{"user": "a", "amount": 1}\n\n\n{"user": "b" "amount": 2}\n')
    err = refused(tmp_path, data)
    assert f"{data}: row 2 (line 4): not JSON: Expecting ',' delimiter" in err, err


def test_a_column_of_two_types_is_refused_at_its_line(tmp_path: Path) -> None:
    data = tmp_path / "events.jsonl"
    data.write_text('{"user": "a", "amount": 1}\n\n{"user": "b", "amount": "x"}\n')
    err = refused(tmp_path, data)
    assert (f"{data}: row 2 (line 3), column 'amount': a string where the rows before have a "
            f"number" in err), err


@pytest.mark.parametrize("fold", [True, False])
def test_broken_json_lines_are_skipped(tmp_path: Path, fold: bool) -> None:
    data = tmp_path / "events.jsonl"
    data.write_text('{"user": "a", "amount": 1}\n\n{"user": "c",\n[1, 2]\n'
                    '{"user": "a", "amount": 2}\n{"user": NaN}\n{"user": "b", "amount": 3}\n')
    summary = skipped(tmp_path, data, "sum:amount", fold=fold)
    assert summary.skipped == {MALFORMED: 3}
    assert [(b.row, b.line) for b in summary.skipped_examples] == [(2, 3), (3, 4), (5, 6)]
    assert state(summary.final_location, "sum_amount") == {"a": 3, "b": 3}


# -- inputs without records ----------------------------------------------------------------------


@pytest.mark.parametrize(("name", "text"), [("header.csv", "user,amount\n"),
                                            ("empty.csv", ""), ("empty.jsonl", ""),
                                            ("blank.jsonl", "\n\n")])
def test_an_input_without_records_says_so(tmp_path: Path, name: str, text: str) -> None:
    data = tmp_path / name
    data.write_text(text)
    err = refused(tmp_path, data)
    assert f"{data}: no records to build from" in err and "type null" not in err, err


def test_an_input_without_records_beside_others_adds_nothing(tmp_path: Path) -> None:
    header = tmp_path / "header.csv"
    header.write_text("user,amount\n")
    data = tmp_path / "events.csv"
    data.write_text("user,amount\na,1\nb,2\n")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    code, out, err = run("--output", "json", "build", str(header), str(data), str(empty),
                         "--key", "user",
                         "--agg", "sum:amount", "--checkpoint-dir", str(tmp_path / "state"),
                         "--parallelism", "2")
    assert code == 0, err
    document = json.loads(out)
    assert document["records"] == document["total_records"] == 2
    assert state(document["location"], "sum_amount") == {"a": 1, "b": 2}
    # every record of an input bad: it adds nothing either
    bad = tmp_path / "bad.csv"
    bad.write_text("user,amount\n,1\n")
    summary = build_state([str(bad), str(data)], key="user", aggregations=["count"],
                          checkpoint_dir=str(tmp_path / "skip"), on_bad_record="skip")
    assert summary.records == 2 and summary.total_records == 3
