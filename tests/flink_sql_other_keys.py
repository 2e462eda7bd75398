"""A second set of Flink SQL snapshots, with other keys than the public SQL fixture's.

Tests may assume only what a fixture set's ``expected.json`` says (DESIGN "Ground truth"): other
sets, with other keys, parallelisms and max parallelisms, are used elsewhere. To prove that a
test holds to that, it also runs on this set: the public SQL fixture job
(``$STATECTL_FLINK_FIXTURES/jobs/job_sql.py``, unchanged, run from a copy) over another input
(``fixture_input.py``'s ``FIX_*`` variables: :data:`INPUT`) at max parallelism
:data:`MAX_PARALLELISM`, snapshotted as a canonical savepoint at parallelism 2.

Its ``expected.json`` is written here in the fixture schema (``flink-fixtures/README.md``) from
Flink's own reading of the savepoint (``tests/flink_jobs/StateReader.java``, via
:func:`flink_sql_coverage.read_with_flink`), never from statectl: the job, max parallelism,
input, the snapshot, and the ``sql-aggregates`` operators (``string_key`` / ``int_key``: each
one's OperatorID, key type and keyed states' entries, as :func:`_expected` says). Not there:
``operator_name`` (Flink's reader does not print names), and the restored and other snapshots.

Cached under ``~/.cache/statectl-flink/sql-other-keys-<hash>`` (``$STATECTL_FLINK_CACHE``), the
hash over the job's sources and the input; about 25 s to generate.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from flink_restore import (
    FLINK_VERSION,
    FlinkUnavailable,
    cache_root,
    fixture_jobs_dir,
    flink_venv,
    pyflink_lib,
)
from flink_sql_coverage import read_with_flink

__all__ = ["INPUT", "MAX_PARALLELISM", "other_keys_sql_set"]

#: fixture_input.py's parameters: keys ``user-0`` .. ``user-22``, values 5*j+1 .. 5*j+j+1
INPUT = {"key_prefix": "user-", "keys": 23, "count_mod": 0, "value_stride": 5}
MAX_PARALLELISM = 64
SOURCES = ("job_sql.py", "fixture_input.py")


def _digest() -> str:
    hasher = hashlib.sha256(json.dumps([INPUT, MAX_PARALLELISM, FLINK_VERSION]).encode())
    for name in SOURCES:
        hasher.update((fixture_jobs_dir() / name).read_bytes() + b"\0")
    return hasher.hexdigest()[:16]


def other_keys_sql_set() -> Path:
    """The set's folder (holding ``expected.json``), generated once and cached."""
    root = cache_root() / f"sql-other-keys-{_digest()}"
    if (root / "set" / "expected.json").is_file():
        return root / "set"
    cache_root().mkdir(parents=True, exist_ok=True)
    with open(cache_root() / f".{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / "set" / "expected.json").is_file():
            _generate(root)
    return root / "set"


def _generate(root: Path) -> None:
    for stale in cache_root().glob("sql-other-keys-*"):
        if stale.is_dir() and stale != root:
            shutil.rmtree(stale, ignore_errors=True)
    shutil.rmtree(root, ignore_errors=True)
    jobs = root / "jobs"
    jobs.mkdir(parents=True)
    for name in SOURCES:  # run from a copy: the fixture folder is never written (no __pycache__)
        shutil.copyfile(fixture_jobs_dir() / name, jobs / name)
    pyflink_lib()  # a clear FlinkUnavailable when the Flink venv is missing
    venv = flink_venv()
    env = {**os.environ, "PATH": f"{venv / 'bin'}:{os.environ.get('PATH', '')}",
           "FIX_KEY_PREFIX": INPUT["key_prefix"], "FIX_NKEYS": str(INPUT["keys"]),
           "FIX_COUNT_MOD": str(INPUT["count_mod"]),
           "FIX_VALUE_STRIDE": str(INPUT["value_stride"])}
    run = subprocess.run(
        [str(venv / "bin" / "python"), str(jobs / "job_sql.py"), "--base", str(root / "set"),
         "--parallelism", "2", "--max-par", str(MAX_PARALLELISM), "--tag", "p2",
         "--run-secs", "6", "--savepoint"],
        capture_output=True, text=True, env=env, timeout=300, check=False)
    (root / "stdout.txt").write_text(run.stdout[-100_000:] + run.stderr[-100_000:])
    found = sorted((root / "set" / "savepoints" / "p2" / "canonical").glob("savepoint-*"))
    if run.returncode != 0 or len(found) != 1 or not (found[0] / "_metadata").is_file():
        raise FlinkUnavailable(f"the SQL fixture job over other keys took no savepoint (exit "
                               f"{run.returncode}; {root / 'stdout.txt'}):\n"
                               f"{run.stdout[-1500:]}{run.stderr[-1500:]}")
    savepoint = found[0]
    with tempfile.TemporaryDirectory() as work:
        lines = read_with_flink(FLINK_VERSION, {"canonical": savepoint}, Path(work))["canonical"]
    document = _expected(savepoint.relative_to(root / "set"), lines)
    (root / "set" / "expected.json").write_text(json.dumps(document, indent=1) + "\n")


def _expected(savepoint: Path, lines: list[dict[str, Any]]) -> dict[str, Any]:
    """The fixture schema's ``expected.json`` for the savepoint, from Flink's reading of it:
    each aggregate's keyed VALUE states as ``entries_contain_ints`` (``[[key], [ints]]``, the
    flag's bytes left out) and MAP states as ``map_keys`` (``[[key], [map keys]]``)."""
    states: dict[str, dict[str, dict[str, Any]]] = {}
    for line in lines:
        if "entries" in line or line["state"].startswith("_") or line["value"] is None:
            continue
        state = states.setdefault(line["op"], {}).setdefault(line["state"], {"rows": []})
        if isinstance(line["value"], list) and all(isinstance(e, dict)
                                                   for e in line["value"]):  # a MAP
            state["kind"] = "MAP"
            state["rows"].append([line["key"], sorted(e["key"] for e in line["value"])])
        else:
            state["kind"] = "VALUE"
            state["rows"].append([line["key"], [v for v in line["value"] if type(v) is int]])
    aggregates = {op: found for op, found in states.items() if "accState" in found}
    operators: dict[str, Any] = {"by_operator_name_prefix": "GroupAggregate",
                                 "count": len(aggregates), "operator_ids": sorted(aggregates)}
    for op, found in aggregates.items():
        # the string-keyed aggregate (query 1) and the int-keyed one (query 2), told by the keys
        string = all(isinstance(key[0], str) for key, _ in found["accState"]["rows"])
        operators["string_key" if string else "int_key"] = {
            "operator_id": op, "key_type": "RowData(VARCHAR)" if string else "RowData(INT)",
            "keyed_states": {
                name: {"kind": state["kind"],
                       ("map_keys" if state["kind"] == "MAP" else "entries_contain_ints"):
                           sorted(state["rows"], key=json.dumps)}
                for name, state in sorted(found.items())}}
    if {"string_key", "int_key"} - operators.keys():
        raise RuntimeError(f"Flink's reading of {savepoint} holds no accState of both aggregates:"
                           f" {sorted(aggregates)}")
    return {"schema": 1, "flink_version": FLINK_VERSION, "job": "sql",
            "max_parallelism": MAX_PARALLELISM, "input": INPUT,
            "snapshots": [{"path": str(savepoint), "kind": "savepoint", "format": "canonical",
                           "parallelism": 2}],
            "operators": {"sql-aggregates": operators}}
