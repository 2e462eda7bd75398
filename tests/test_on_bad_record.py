"""``build --on-bad-record refuse|skip|fail`` (issue 32, "Inputs").

* ``skip`` leaves bad records out of everything: the state equals a build of the same input
  without them (the key column keeps its type, keys their key groups), for CSV, JSON Lines and
  Parquet, folded or not, at any parallelism; the summary counts them per reason and names the
  first; every checkpoint stores the counts beside its positions, so a build resumed from any
  checkpoint (or killed with SIGKILL and resumed) ends with the same counts and state.
* ``fail`` processes the records before the first bad one, checkpoints them and stops (exit 3,
  one line naming file, row, column and that checkpoint); once the record is fixed,
  ``--resume`` ends where a build of the fixed input ends.
* ``refuse`` stays the default; Spark refuses ``fail`` (``skip``: tests/test_build_spark_skip.py);
  ``snapshot take --input`` takes the option too.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_support import run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formats.inputs import FileSource, InputError
from formats.inputs.bad_records import (
    EMPTY_KEY,
    INVALID_UTF8,
    MISSING_KEY,
    MIXED_TYPE,
    LinesLeftOut,
)
from formats.open import open_checkpoint
from formats.ops.build import build_state
from formats.statectl.storage import DirectoryCheckpointStorage
from statecore.job import SKIPPED_RECORDS_STATE, SOURCE_POSITIONS_STATE, SkippedRecord

REPO = Path(__file__).resolve().parent.parent
AGGREGATIONS = ["count", "sum:amount"]


# -- reading checkpoints -------------------------------------------------------------------------


def keyed_state(location: str) -> tuple[str, dict[str, list[Any]]]:
    """The key type and every keyed entry (with its key group) per state."""
    checkpoint = open_checkpoint(location)
    op = checkpoint.metadata.operators[0]
    return op.key_type, {s.name: sorted(checkpoint.keyed_entries(op.uid, s.name), key=repr)
                         for s in op.states if s.scope == "keyed"}


def operator_state(location: str, name: str) -> list[Any]:
    checkpoint = open_checkpoint(location)
    op = checkpoint.metadata.operators[0]
    return [tuple(element) for s in op.subtasks
            for entry in checkpoint.operator_entries(op.uid, s.index) if entry.name == name
            for element in entry.elements]


def stored_skipped(location: str) -> dict[str, Counter[str]]:
    """split -> reason -> count, as the checkpoint stores them."""
    out: dict[str, Counter[str]] = {}
    for split, reason, count in operator_state(location, SKIPPED_RECORDS_STATE):
        out.setdefault(split, Counter())[reason] += count
    return out


def checkpoints(directory: Path) -> list[str]:
    return [c.location for c in DirectoryCheckpointStorage(str(directory)).completed()]


# -- inputs with bad records ---------------------------------------------------------------------

#: bad record kinds per format, and the reason each is skipped for (by key kind)
KINDS = {"csv": ["utf8", "empty", "mixed"],
         "jsonl": ["utf8", "absent", "null", "empty", "mixed", "amount"],
         "parquet": ["null", "empty"]}


def reason(fmt: str, kind: str, int_keys: bool) -> str:
    if kind == "utf8":
        return INVALID_UTF8
    if kind in ("absent", "null"):
        return MISSING_KEY
    if kind == "empty":  # in JSON, "" among numbers is a string: of another type
        return MIXED_TYPE if int_keys and fmt == "jsonl" else EMPTY_KEY
    return MIXED_TYPE


def key_text(key: int, int_keys: bool) -> str:
    return str(key) if int_keys else f"u{key}"


def write(path: Path, fmt: str, int_keys: bool, rows: list[tuple[Any, ...]]) -> str:
    """``rows``: ``("good", key, amount)`` or ``("bad", kind, amount)``."""
    if fmt == "parquet":
        users: list[Any] = []
        for tag, what, _ in rows:
            if tag == "good":
                users.append(what if int_keys else key_text(what, False))
            else:
                users.append(None if what == "null" else "")
        pq.write_table(pa.table({"user": pa.array(users, pa.int64() if int_keys else pa.string()),
                                 "amount": [amount for *_, amount in rows]}), path,
                       row_group_size=7)
        return str(path)
    lines = [b"user,amount"] if fmt == "csv" else []
    for tag, what, amount in rows:
        if fmt == "csv":
            key = {"utf8": b"\xffu1", "empty": b"", "mixed": b"x1" if int_keys else b"12"}.get(
                what, key_text(what, int_keys).encode()) if tag == "bad" else (
                key_text(what, int_keys).encode())
            lines.append(key + b",%d" % amount)
            continue
        if tag == "good":
            record: dict[str, Any] = {"user": int(what) if int_keys else key_text(what, False),
                                      "amount": amount}
        elif what == "utf8":
            lines.append(b'{"user": "\xffu1", "amount": %d}' % amount)
            continue
        else:
            record = {"absent": {"amount": amount}, "null": {"user": None, "amount": amount},
                      "empty": {"user": "", "amount": amount},
                      "mixed": {"user": "x" if int_keys else 7, "amount": amount},
                      "amount": {"user": key_text(1, int_keys) if not int_keys else 1,
                                 "amount": "x"}}[what]
        lines.append(json.dumps(record).encode())
    path.write_bytes(b"\n".join(lines) + b"\n")
    return str(path)


@st.composite
def dirty_inputs(draw: st.DrawFn) -> dict[str, Any]:
    fmt = draw(st.sampled_from(sorted(KINDS)))
    int_keys = draw(st.booleans())
    kinds = [k for k in KINDS[fmt] if not (fmt == "parquet" and int_keys and k == "empty")]
    files = []
    for _ in range(draw(st.integers(1, 2))):
        good = draw(st.lists(st.tuples(st.integers(0, 9), st.integers(-50, 50)), min_size=1,
                             max_size=40))
        # before good record i (never before the first: the first key decides a CSV key
        # column's kind and a JSON column's type)
        bad = draw(st.lists(st.tuples(st.integers(1, len(good)), st.sampled_from(kinds),
                                      st.integers(-50, 50)), max_size=10))
        rows: list[tuple[Any, ...]] = []
        for i, (key, amount) in enumerate(good + [(None, None)]):
            rows += [("bad", kind, value) for at, kind, value in bad if at == i]
            if key is not None:
                rows.append(("good", key, amount))
        files.append(rows)
    return {"fmt": fmt, "int_keys": int_keys, "files": files,
            "parallelism": draw(st.integers(1, 2)), "fold": draw(st.booleans()),
            "checkpoint_every": draw(st.integers(1, 30))}


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=dirty_inputs(), data=st.data())
def test_skipped_records_leave_the_state_of_the_input_without_them(
        tmp_path_factory: pytest.TempPathFactory, case: dict[str, Any], data: st.DataObject
        ) -> None:
    root = tmp_path_factory.mktemp("skip")
    fmt, int_keys = case["fmt"], case["int_keys"]
    dirty, clean, expected = [], [], []
    for i, rows in enumerate(case["files"]):
        path = write(root / f"dirty-{i}.{fmt}", fmt, int_keys, rows)
        dirty.append(path)
        clean.append(write(root / f"clean-{i}.{fmt}", fmt, int_keys,
                           [r for r in rows if r[0] == "good"]))
        expected += [(path, row + 1, reason(fmt, r[1], int_keys))
                     for row, r in enumerate(rows) if r[0] == "bad"]
    settings_ = {"key": "user", "aggregations": AGGREGATIONS,
                 "parallelism": case["parallelism"], "fold": case["fold"]}
    summary = build_state(dirty, checkpoint_dir=str(root / "dirty"), on_bad_record="skip",
                          checkpoint_every=case["checkpoint_every"], keep=1000, **settings_)
    reference = build_state(clean, checkpoint_dir=str(root / "clean"), **settings_)

    # the key column's type, every key's key group and every value: as without the bad rows
    assert keyed_state(summary.final_location) == keyed_state(reference.final_location)
    counts = dict(sorted(Counter(r for *_, r in expected).items()))
    assert summary.skipped == counts
    assert [(e.file, e.row, e.reason) for e in summary.skipped_examples] == expected[:5]
    assert all(e.column == "user" or (e.column == "amount" and e.reason == MIXED_TYPE)
               for e in summary.skipped_examples)
    assert summary.records == reference.records
    assert summary.total_records == reference.records + len(expected)
    assert summary.on_bad_record == "skip"

    # every checkpoint counts the bad records before its positions, per input and reason
    locations = checkpoints(root / "dirty")
    for location in locations:
        positions = dict(operator_state(location, SOURCE_POSITIONS_STATE))
        before = {path: Counter(r for p, row, r in expected if p == path and row <= position)
                  for path, position in positions.items()}
        assert stored_skipped(location) == {p: c for p, c in before.items() if c}

    # a build resumed from any checkpoint on the way neither counts one again nor loses one
    resume_from = data.draw(st.sampled_from(locations))
    resumed = build_state(dirty, checkpoint_dir=str(root / "dirty"), on_bad_record="skip",
                          resume=open_checkpoint(resume_from).metadata.checkpoint_id,
                          **settings_)
    assert resumed.skipped == counts
    assert keyed_state(resumed.final_location) == keyed_state(reference.final_location)
    assert stored_skipped(resumed.final_location) == stored_skipped(summary.final_location)


# -- skip: files whose records are not one per line ----------------------------------------------


@pytest.mark.parametrize(("dirty", "clean", "where"), [
    # blank lines (no record), CRLF, a bad record among them
    (b"\nuser,amount\r\na,1\r\n\r\n\xffb,2\r\n\nc,3\r\n", b"user,amount\na,1\nc,3\n",
     [(2, 5, INVALID_UTF8)]),
    # quoted values with line breaks before and after bad records
    (b'user,amount,note\na,1,"x\ny"\n\xffb,2,z\nc,3,"p""\n\nq"\n,4,k\nd,5,"m\n"\n',
     b'user,amount,note\na,1,"x\ny"\nc,3,"p""\n\nq"\nd,5,"m\n"\n',
     [(2, 4, INVALID_UTF8), (4, 8, EMPTY_KEY)]),
    # the bad record's other values would change another column's type (amount: double)
    (b"user,amount\na,1\n\xffb,2.5\nc,3\n", b"user,amount\na,1\nc,3\n", [(2, 3, INVALID_UTF8)]),
])
def test_csv_records_over_several_lines_are_left_out_whole(
        tmp_path: Path, dirty: bytes, clean: bytes, where: list[tuple[int, int, str]]) -> None:
    (tmp_path / "dirty.csv").write_bytes(dirty)
    (tmp_path / "clean.csv").write_bytes(clean)
    summary = build_state([str(tmp_path / "dirty.csv")], key="user", aggregations=["count"],
                          checkpoint_dir=str(tmp_path / "a"), on_bad_record="skip")
    reference = build_state([str(tmp_path / "clean.csv")], key="user", aggregations=["count"],
                            checkpoint_dir=str(tmp_path / "b"))
    assert keyed_state(summary.final_location) == keyed_state(reference.final_location)
    assert [(e.row, e.line, e.reason) for e in summary.skipped_examples] == where
    assert all(e.column == "user" for e in summary.skipped_examples)


def test_many_bad_records_over_many_blocks(tmp_path: Path) -> None:
    """Bad records spread over a file of several read blocks (and lines left out of them)."""
    rng = random.Random(7)
    dirty, clean, bad = [b"user,amount,note"], [b"user,amount,note"], 0
    for i in range(120_000):
        if rng.random() < 0.002:
            dirty.append(rng.choice([b"\xffu,1,x", b",2,y", b"text,3,z", b',4,"a\nb"']))
            bad += 1
        line = b"%d,%d,n%d" % (rng.randrange(3000), rng.randrange(100), i)
        dirty.append(line)
        clean.append(line)
    (tmp_path / "dirty.csv").write_bytes(b"\n".join(dirty) + b"\n")
    (tmp_path / "clean.csv").write_bytes(b"\n".join(clean) + b"\n")
    summary = build_state([str(tmp_path / "dirty.csv")], key="user", aggregations=AGGREGATIONS,
                          checkpoint_dir=str(tmp_path / "a"), on_bad_record="skip",
                          checkpoint_every=25_000)
    reference = build_state([str(tmp_path / "clean.csv")], key="user",
                            aggregations=AGGREGATIONS, checkpoint_dir=str(tmp_path / "b"))
    assert summary.folded and sum(summary.skipped.values()) == bad > 100
    assert keyed_state(summary.final_location) == keyed_state(reference.final_location)
    assert keyed_state(summary.final_location)[0] == "int64"


def test_a_source_reads_skipped_records_in_their_place(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"user": "a", "amount": 1}\n{"amount": 2}\n\n{"user": "b", "amount": 3}\n'
                     b'{"user": "", "amount": 4}\n')
    source = FileSource([str(path)], "user", on_bad_record="skip")
    assert source.count() == 4
    assert list(source.read(str(path), 0)) == [
        (1, {"user": "a", "amount": 1}), (2, SkippedRecord(MISSING_KEY)),
        (3, {"user": "b", "amount": 3}), (4, SkippedRecord(EMPTY_KEY))]
    assert list(source.read(str(path), 2)) == [(3, {"user": "b", "amount": 3}),
                                               (4, SkippedRecord(EMPTY_KEY))]
    table, end, bad = source.run(str(path), 1, 2)
    assert table.to_pylist() == [{"user": "b", "amount": 3}] and end == 3
    assert [(b.row, b.line, b.reason) for b in bad] == [(2, 2, MISSING_KEY)]
    first = source.first_bad({str(path): 2})
    assert first is not None and first[0] == 1 and first[1].row == 4


@given(lines=st.lists(st.binary(max_size=8).map(lambda b: b.replace(b"\n", b"")), max_size=30),
       data=st.data(), chunk=st.integers(1, 7))
def test_lines_left_out_are_exactly_the_lines_given(lines: list[bytes], data: st.DataObject,
                                                    chunk: int) -> None:
    import io
    from unittest import mock

    end = data.draw(st.booleans())
    text = b"\n".join(lines) + (b"\n" if end and lines else b"")
    out = sorted(data.draw(st.sets(st.integers(0, max(0, len(lines) - 1)))))
    with mock.patch("formats.inputs.bad_records._CHUNK", chunk):
        got = LinesLeftOut(io.BytesIO(text), out).read()
    kept = [line for i, line in enumerate(lines) if i not in out]
    assert got.split(b"\n")[:len(kept)] == kept
    assert got.count(b"\n") in (len(kept), len(kept) - 1)


# -- fail ----------------------------------------------------------------------------------------


def cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=cwd,
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_fail_checkpoints_the_records_before_the_first_bad_one_and_resume_goes_on(
        tmp_path: Path, fmt: str) -> None:
    good = [("good", k % 3, k) for k in range(12)]
    kind = "null" if fmt == "parquet" else "empty"
    dirty = good[:7] + [("bad", kind, 99)] + good[7:10] + [("bad", kind, 98)] + good[10:]
    path = write(tmp_path / f"events.{fmt}", fmt, False, dirty)
    state = tmp_path / "state"
    args = ["build", path, "--key", "user", "--agg", "count", "--agg", "sum:amount",
            "--checkpoint-dir", str(state), "--checkpoint-every", "3", "--on-bad-record",
            "fail"]
    done = cli(*args)
    assert done.returncode == 3, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("Error: "), done.stderr
    line = "" if fmt == "parquet" else f" (line {8 if fmt == 'jsonl' else 9})"
    for says in (f"{path}: row 8{line}, column 'user'", "(--on-bad-record fail)",
                 "checkpoint 3 holds the records before it", "--resume"):
        assert says in done.stderr, done.stderr
    # checkpoints 1 and 2 on the way (6 records), 3: the 7 records before the bad one
    latest = checkpoints(state)[-1]
    assert open_checkpoint(latest).metadata.checkpoint_id == 3
    assert dict(operator_state(latest, SOURCE_POSITIONS_STATE)) == {path: 7}
    first7 = build_state([write(tmp_path / f"first7.{fmt}", fmt, False, good[:7])], key="user",
                         aggregations=AGGREGATIONS, checkpoint_dir=str(tmp_path / "first7"))
    assert keyed_state(latest) == keyed_state(first7.final_location)

    # the same again stops at the same record; fixed (the rows before it unchanged), it goes on
    again = cli(*args, "--resume")
    assert again.returncode == 3 and "checkpoint 3 holds" in again.stderr, again.stderr
    fixed = good[:7] + [("good", 1, 99)] + good[7:10] + [("good", 2, 98)] + good[10:]
    write(tmp_path / f"events.{fmt}", fmt, False, fixed)
    resumed = cli(*args, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from checkpoint 3" in resumed.stdout
    whole = build_state([write(tmp_path / f"fixed.{fmt}", fmt, False, fixed)], key="user",
                        aggregations=AGGREGATIONS, checkpoint_dir=str(tmp_path / "fixed"))
    assert keyed_state(checkpoints(state)[-1]) == keyed_state(whole.final_location)


def test_fail_at_the_first_record_writes_nothing(tmp_path: Path) -> None:
    data = tmp_path / "events.csv"
    data.write_text("user,amount\n,1\na,2\n")
    done = cli("build", str(data), "--key", "user", "--agg", "count", "--checkpoint-dir",
               str(tmp_path / "state"), "--on-bad-record", "fail")
    assert done.returncode == 3 and done.stderr.count("\n") == 1, done.stderr
    assert "row 1 (line 2), column 'user': the key column 'user' is empty" in done.stderr
    assert "nothing was written" in done.stderr
    assert not list((tmp_path / "state").glob("chk-*"))


def test_fail_without_bad_records_builds_as_refuse_does(tmp_path: Path) -> None:
    data = tmp_path / "events.csv"
    data.write_text("user,amount\na,1\nb,2\na,3\n")
    states = []
    for mode in ("fail", "refuse", "skip"):
        summary = build_state([str(data)], key="user", aggregations=AGGREGATIONS,
                              checkpoint_dir=str(tmp_path / mode), on_bad_record=mode)
        assert summary.skipped == {} and summary.skipped_examples == ()
        states.append(keyed_state(summary.final_location))
        assert SKIPPED_RECORDS_STATE not in {
            s.name for s in open_checkpoint(summary.final_location).metadata.operators[0]
            .states}
    assert states[0] == states[1] == states[2]


# -- refuse, the default; options; Spark; snapshot take ------------------------------------------


def test_refuse_is_the_default(tmp_path: Path) -> None:
    data = tmp_path / "events.csv"
    data.write_bytes(b"user,amount\nuser-1,5\n\xffuser-2,7\n")
    errors = []
    for extra in ([], ["--on-bad-record", "refuse"]):
        done = cli("build", str(data), "--key", "user", "--agg", "count", "--checkpoint-dir",
                   str(tmp_path / "state"), *extra)
        assert done.returncode == 3 and "line 3, column 'user'" in done.stderr, done.stderr
        errors.append(done.stderr)
    assert errors[0] == errors[1]
    assert not list((tmp_path / "state").glob("chk-*"))
    assert build_state.__kwdefaults__["on_bad_record"] == "refuse"
    with pytest.raises(InputError, match="line 3"):
        FileSource([str(data)], "user")


def test_an_unknown_mode_is_a_usage_error(tmp_path: Path) -> None:
    data = tmp_path / "events.csv"
    data.write_text("user\na\n")
    code, _, err = run("build", str(data), "--key", "user", "--agg", "count",
                       "--checkpoint-dir", str(tmp_path / "s"), "--on-bad-record", "ignore")
    assert code == 2 and "'refuse', 'skip', 'fail'" in err


@pytest.mark.parametrize("mode", ["fail"])
def test_spark_refuses_fail(tmp_path: Path, mode: str) -> None:
    data = tmp_path / "events.csv"
    data.write_text("user\na\n")
    code, _, err = run("build", str(data), "--key", "user", "--agg", "count",
                       "--checkpoint-dir", str(tmp_path / "s"), "--engine", "spark",
                       "--on-bad-record", mode)
    assert code == 3 and err.count("\n") == 1, err
    assert f"--on-bad-record {mode}" in err and "--engine local" in err
    assert not (tmp_path / "s").exists() or not list((tmp_path / "s").glob("chk-*"))


def test_snapshot_take_input_skips_when_told(tmp_path: Path) -> None:
    first, more = tmp_path / "first.csv", tmp_path / "more.csv"
    first.write_text("user,amount\na,1\nb,2\n")
    more.write_bytes(b"user,amount\na,3\n,4\n\xffc,5\nb,6\n")
    state = tmp_path / "state"
    code, _, err = run("build", str(first), "--key", "user", "--agg", "count",
                       "--checkpoint-dir", str(state))
    assert code == 0, err
    code, _, err = run("snapshot", "take", str(state), "--input", str(first), "--input",
                       str(more))
    assert code == 3 and "line 4, column 'user': not valid UTF-8" in err, err
    code, _, err = run("snapshot", "take", str(state), "--input", str(first), "--input",
                       str(more), "--on-bad-record", "skip")
    assert code == 0, err
    savepoint = [c for c in DirectoryCheckpointStorage(str(state)).completed()
                 if c.kind.value == "savepoint"][-1]
    assert stored_skipped(savepoint.location) == {
        str(more): Counter({EMPTY_KEY: 1, INVALID_UTF8: 1})}
    _, entries = keyed_state(savepoint.location)
    assert sorted((key, value) for _, key, _, value in entries["count"]) == [("a", 2), ("b", 2)]


# -- killed and resumed --------------------------------------------------------------------------


def test_killed_skipping_builds_resume_to_the_uninterrupted_counts(tmp_path: Path) -> None:
    """SIGKILLs at random moments, then --resume: the counts of a build never interrupted."""
    rng = random.Random(32)
    lines, bad = [b"user,amount"], Counter[str]()
    for i in range(6000):
        if i % 97 == 5:
            kind = rng.choice([(b"\xffu,1", INVALID_UTF8), (b",2", EMPTY_KEY)])
            lines.append(kind[0])
            bad[kind[1]] += 1
        lines.append(b"u%d,%d" % (rng.randrange(300), rng.randrange(100)))
    data = tmp_path / "events.csv"
    data.write_bytes(b"\n".join(lines) + b"\n")
    aggregations = ["count", "list:amount"]  # not foldable: record by record, slow enough
    reference = build_state([str(data)], key="user", aggregations=aggregations,
                            checkpoint_dir=str(tmp_path / "reference"), on_bad_record="skip")
    assert reference.skipped == dict(sorted(bad.items()))
    args = ["build", str(data), "--key", "user", "--checkpoint-dir", str(tmp_path / "state"),
            "--checkpoint-every", "200", "--on-bad-record", "skip", "--keep", "2"]
    for spec in aggregations:
        args += ["--agg", spec]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    kills = 0
    for _ in range(3):
        resume = ["--resume"] if checkpoints(tmp_path / "state") else []
        process = subprocess.Popen([sys.executable, "-m", "cli.main", *args, *resume],
                                   cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(1.0, 2.5))
        kills += process.poll() is None
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
    assert kills, "every build ended before it was killed"
    resume = ["--resume"] if checkpoints(tmp_path / "state") else []
    done = cli(*args, *resume)
    assert done.returncode == 0, done.stderr
    final = checkpoints(tmp_path / "state")[-1]
    assert stored_skipped(final) == {str(data): bad}
    assert keyed_state(final) == keyed_state(reference.final_location)


# -- what the output says ------------------------------------------------------------------------


def test_the_output_counts_and_names_what_was_left_out(tmp_path: Path) -> None:
    data = tmp_path / "events.csv"
    data.write_bytes(b"user,amount\na,1\n,2\nb,3\n\xffc,4\nd,5\n")
    state = tmp_path / "state"
    code, out, err = run("--output", "json", "build", str(data), "--key", "user", "--agg",
                         "count", "--checkpoint-dir", str(state), "--on-bad-record", "skip")
    assert code == 0, err
    document = json.loads(out)
    assert document["on_bad_record"] == "skip" and document["records"] == 3
    assert document["skipped"] == {EMPTY_KEY: 1, INVALID_UTF8: 1}
    assert [(e["row"], e["line"], e["column"], e["reason"]) for e in
            document["skipped_examples"]] == [(2, 3, "user", EMPTY_KEY),
                                              (4, 5, "user", INVALID_UTF8)]
    assert {e["input"] for e in document["skipped_examples"]} == {str(data)}
    code, out, err = run("build", str(data), "--key", "user", "--agg", "count",
                         "--checkpoint-dir", str(tmp_path / "text"), "--on-bad-record", "skip")
    assert code == 0, err
    assert (f"left out 2 bad records (--on-bad-record skip): {EMPTY_KEY} 1, {INVALID_UTF8} 1"
            in out), out
    assert f"{data}: row 4 (line 5), column 'user': not valid UTF-8" in out, out
    code, out, err = run("--output", "json", "build", str(tmp_path / "clean.csv"), "--key",
                         "user", "--agg", "count", "--checkpoint-dir", str(tmp_path / "c"))
    assert code != 0  # no such file: the refusal, not an empty count
    (tmp_path / "clean.csv").write_text("user,amount\na,1\n")
    code, out, err = run("--output", "json", "build", str(tmp_path / "clean.csv"), "--key",
                         "user", "--agg", "count", "--checkpoint-dir", str(tmp_path / "c"))
    assert code == 0, err
    document = json.loads(out)
    assert (document["on_bad_record"], document["skipped"], document["skipped_examples"]) == (
        "refuse", {}, [])
    assert "left out" not in run("build", str(tmp_path / "clean.csv"), "--key", "user",
                                 "--agg", "count", "--checkpoint-dir",
                                 str(tmp_path / "c2"))[1]
