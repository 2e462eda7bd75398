"""Bad input records never give silent wrong results (issue 32, "Inputs").

Before: one invalid UTF-8 byte in a CSV row turned the key column into bytes (every key
``b'user-1'``, in another key group, ``--key user-1`` no longer finding it), an empty CSV key
became a key, and a JSON Lines record without the key failed with "Assigned key must not be
null!" naming nothing. Now each is refused before anything is written, naming the file, the
row (and line) and the column; valid inputs (a real U+FFFD included) build as before.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

REPO = Path(__file__).resolve().parent.parent


def _build(tmp_path: Path, data: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    state = tmp_path / "state"
    return subprocess.run([sys.executable, "-m", "cli.main", "build", str(data), "--key", "user",
                           "--agg", "count", "--checkpoint-dir", str(state), *extra],
                          cwd=REPO, capture_output=True, text=True, check=False)


def _refused(done: subprocess.CompletedProcess[str], tmp_path: Path, *says: str) -> None:
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("Error: "), done.stderr
    for text in says:
        assert text in done.stderr, done.stderr
    assert not list((tmp_path / "state").glob("chk-*")), "a checkpoint was written"


@pytest.mark.parametrize("column", ["user", "page"])
def test_a_csv_byte_that_is_not_utf8_is_refused_naming_line_and_column(tmp_path: Path,
                                                                        column: str) -> None:
    rows = [b"user,page", b"user-1,a", b"user-2,b", b"user-3,c"]
    bad = 3 if column == "user" else 2
    user, page = rows[bad].split(b",")
    rows[bad] = (b"\xff" + user + b"," + page) if column == "user" else (user + b",\xfe" + page)
    data = tmp_path / "events.csv"
    data.write_bytes(b"\n".join(rows) + b"\n")
    _refused(_build(tmp_path, data), tmp_path, str(data), f"line {bad + 1}",
             f"column {column!r}", "not valid UTF-8")
    # with the key's type given, the same (it used to name a wrong row)
    _refused(_build(tmp_path, data, "--key-type", "string"), tmp_path, f"line {bad + 1}")


def test_an_empty_csv_key_is_refused_naming_the_row(tmp_path: Path) -> None:
    data = tmp_path / "events.csv"
    data.write_text("user,amount\nuser-1,5\n,7\nuser-2,1\n")
    _refused(_build(tmp_path, data), tmp_path, str(data), "row 2 (line 3)", "'user'")


def test_a_json_record_without_the_key_is_refused_naming_the_row(tmp_path: Path) -> None:
    data = tmp_path / "events.jsonl"
    data.write_text('{"user": "a", "amount": 1}\n{"amount": 2}\n')
    _refused(_build(tmp_path, data), tmp_path, str(data), "row 2 (line 2)", "'user'")


def test_a_json_column_of_two_types_is_refused_naming_row_and_column(tmp_path: Path) -> None:
    data = tmp_path / "events.jsonl"
    data.write_text('{"user": "a", "amount": 1}\n{"user": "b", "amount": 2}\n'
                    '{"user": 7, "amount": 3}\n')
    _refused(_build(tmp_path, data), tmp_path, str(data), "row 3 (line 3)", "column 'user'",
             "a number where the rows before have a string")


@pytest.mark.parametrize(("users", "row", "holds"), [
    (["1", "2", "x", "3"], "row 3 (line 4)", "holds no number ('x')"),
    (["a", "b", "c", "12"], "row 4 (line 5)", "holds a number ('12')")])
def test_a_csv_key_of_numbers_and_text_is_refused_unless_typed(
        tmp_path: Path, users: list[str], row: str, holds: str) -> None:
    """One record would turn every key's type (and key group): int64 keys become strings."""
    data = tmp_path / "events.csv"
    data.write_text("user,amount\n" + "".join(f"{u},1\n" for u in users))
    _refused(_build(tmp_path, data), tmp_path, str(data), row, "'user'", holds, "--key-type")
    typed = _build(tmp_path, data, "--key-type", "string")
    assert typed.returncode == 0, typed.stderr


@pytest.mark.parametrize("users", [["1", "2", "3"], ["user-1", "2b", "x"], ["1.5", "-2", "3e3"]])
def test_a_csv_key_of_one_kind_builds(tmp_path: Path, users: list[str]) -> None:
    data = tmp_path / "events.csv"
    data.write_text("user,amount\n" + "".join(f"{u},1\n" for u in users))
    done = _build(tmp_path, data)
    assert done.returncode == 0, done.stderr


def test_json_bytes_that_are_not_utf8_are_refused(tmp_path: Path) -> None:
    data = tmp_path / "events.jsonl"
    data.write_bytes(b'{"user": "a", "amount": 1}\n{"user": "\xffb", "amount": 2}\n')
    _refused(_build(tmp_path, data), tmp_path, str(data), "line 2", "not valid UTF-8")


def test_a_real_replacement_character_is_a_valid_key(tmp_path: Path) -> None:
    data = tmp_path / "events.jsonl"
    data.write_text('{"user": "a\\ufffdb", "amount": 1}\n', encoding="utf-8")
    done = _build(tmp_path, data)
    assert done.returncode == 0, done.stderr
    csv = tmp_path / "events.csv"
    csv.write_text("user,amount\na\ufffdb,1\n", encoding="utf-8")
    assert _build(tmp_path / "csv", csv).returncode == 0


@pytest.mark.parametrize(("users", "row"), [(["a", "b", "", "c"], 3), (["a", "b", "c", None], 4),
                                            ([None, "a", "b", "c"], 1)])
def test_a_parquet_key_that_is_null_or_empty_is_refused(tmp_path: Path, users: list[str | None],
                                                        row: int) -> None:
    data = tmp_path / "events.parquet"
    pq.write_table(pa.table({"user": users, "amount": [1, 2, 3, 4]}), data, row_group_size=2)
    _refused(_build(tmp_path, data), tmp_path, str(data), f"row {row}:", "'user'")


def test_valid_inputs_build_as_before(tmp_path: Path) -> None:
    data = tmp_path / "events.parquet"
    pq.write_table(pa.table({"user": ["a", "b", "a"], "amount": [1, 2, 3]}), data,
                   row_group_size=2)
    done = _build(tmp_path, data)
    assert done.returncode == 0 and "processed 3 of 3 records" in done.stdout, done.stderr


def test_a_build_into_another_builds_directory_is_refused_saying_what_differs(
        tmp_path: Path) -> None:
    data = tmp_path / "events.parquet"
    pq.write_table(pa.table({"user": ["a", "b", "a"], "page": ["x", "y", "z"],
                             "amount": [1, 2, 3]}), data)
    state = tmp_path / "state"

    def build(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "cli.main", "build", str(data), *args,
                               "--checkpoint-dir", str(state)], cwd=REPO, capture_output=True,
                              text=True, check=False)

    assert build("--key", "user", "--agg", "count").returncode == 0
    again = build("--key", "user", "--agg", "count")  # the same job started again: welcome
    assert again.returncode == 0 and "checkpoint 2" in again.stdout, again.stderr
    other = build("--key", "page", "--agg", "sum:amount")
    assert other.returncode == 3 and other.stderr.count("\n") == 1, other.stderr
    assert "key 'user' there, 'page' here" in other.stderr
    assert "aggregations 'count' there, 'sum:amount' here" in other.stderr
    assert sorted(p.name for p in state.glob("chk-*")) == ["chk-0000001", "chk-0000002"]
    # another directory, or the other build's own settings with --resume, go on
    assert build("--key", "user", "--agg", "count", "--resume").returncode == 0
    elsewhere = subprocess.run([sys.executable, "-m", "cli.main", "build", str(data), "--key",
                                "page", "--agg", "sum:amount", "--checkpoint-dir",
                                str(tmp_path / "new")], cwd=REPO, capture_output=True,
                               text=True, check=False)
    assert elsewhere.returncode == 0, elsewhere.stderr


def test_a_directory_of_other_checkpoints_is_refused(tmp_path: Path) -> None:
    """A statectl checkpoint directory that no build wrote (a rescale's output)."""
    from cli_support import KEYED

    state = tmp_path / "state"
    state.mkdir()
    import shutil
    shutil.copytree(KEYED, state / "chk-0000001")
    data = tmp_path / "events.parquet"
    pq.write_table(pa.table({"user": ["a"], "amount": [1]}), data)
    done = _build(tmp_path, data)
    assert done.returncode == 3 and "did not write" in done.stderr, done.stderr
