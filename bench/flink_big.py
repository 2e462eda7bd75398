"""Big real Flink 2.3 snapshots for the benchmarks: generated once, cached, verified.

``make bench`` runs this first (it installs Flink like ``make test``: ``.venv-flink``). The
fixture job ``java`` (JavaStateJob of ``$STATECTL_FLINK_FIXTURES/jobs``: String, Long and Integer
keys; ValueState, ListState, MapState, timers; operator and broadcast state) reads
``fixture_input.py``'s input for ``FIX_NKEYS=1000000 FIX_COUNT_MOD=10`` (key ``k{j}`` holds
``j % 10 + 1`` values: 5.5M records) at parallelism 2, max parallelism 128, and once it has
processed the last record this writes:

* ``heap-checkpoint``: a checkpoint of the hashmap backend (full, heap format);
* ``canonical-savepoint``: a canonical savepoint of the same run (same logical state);
* ``rocksdb-incremental-checkpoint``: a second run on RocksDB with incremental checkpoints
  (``FIX_BACKEND=rocksdb FIX_INCREMENTAL=true``): ``chk-N`` plus the SST files in ``shared/``
  beside it, which ``_metadata`` names by absolute path (so the cache folder must not move).

Then every snapshot is restored by Flink (``tests/flink_restore.py``) with one more record per
key and every one of the 1M keys' state is checked (``check_verify.py``); the log of the
canonical savepoint's restore gives the "JVM anchor": Flink's own restore time, from the
JobManager's ``Restoring job`` line to the last task RUNNING, and the time reading the state
handles alone (:func:`flink_restore.restore_timing`). The verification records reach the jobs only
after every task has restored (``hold_input``), so the restore does not share the CPU with them.

Everything goes to ``~/.cache/statectl-bench/flink-big-<hash>`` (``$STATECTL_BENCH_CACHE``), the
hash covering this file, RestoreDriver.java, JavaStateJob.java, fixture_input.py, the parameters
and the Flink version (:func:`cache_dir`); a folder is complete when its ``manifest.json`` exists
(paths relative to it, sizes, timings, verification). Usage: ``.venv/bin/python
bench/flink_big.py [--anchor] [--keys N]``; prints the manifest's summary and the folder.
``--anchor`` measures Flink's restore of the canonical savepoint again (the figure in the
manifest is from the generation run). Other benchmarks call :func:`snapshots`.
"""

from __future__ import annotations

import argparse
import datetime
import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from flink_restore import (  # noqa: E402
    DRIVER_SOURCES,
    FLINK_VERSION,
    FixtureInput,
    FlinkRestorer,
    RestoreCase,
    RestoreResult,
    _model_env,
    build,
    fixture_jobs_dir,
)

NAME = "flink-big"
PARAMETERS = {"keys": 1_000_000, "count_mod": 10, "parallelism": 2, "max_parallelism": 128}
GENERATE_TIMEOUT = 3600.0
RESTORE_TIMEOUT = 1800.0


def cache_dir(parameters: dict[str, int]) -> Path:
    """The cache folder: a hash of what decides the snapshots' content (this generator, the
    driver's generate mode, the job and its input model, the parameters, Flink's version), not
    of the rest of the harness, whose changes need no new 10-minute generation."""
    jobs = fixture_jobs_dir()
    hasher = hashlib.sha256()
    for source in (Path(__file__), DRIVER_SOURCES / "RestoreDriver.java",
                   jobs / "java" / "JavaStateJob.java", jobs / "fixture_input.py"):
        hasher.update(source.read_bytes() + b"\0")
    hasher.update(json.dumps(parameters, sort_keys=True).encode() + FLINK_VERSION.encode())
    root = Path(os.environ.get("STATECTL_BENCH_CACHE",
                               Path.home() / ".cache" / "statectl-bench"))
    return root / f"{NAME}-{hasher.hexdigest()[:16]}"


def tree_size(*paths: Path) -> tuple[int, int]:
    """(bytes, files) under ``paths``."""
    size = files = 0
    for path in paths:
        for file in (p for p in path.rglob("*") if p.is_file()):
            size += file.stat().st_size
            files += 1
    return size, files


def seconds(reply: dict[str, str], a: str, b: str) -> float:
    return (int(reply[b]) - int(reply[a])) / 1000


def snapshot_entry(folder: Path, path: Path, *, kind: str, fmt: str, backend: str,
                   parallelism: int, extra: tuple[Path, ...] = ()) -> dict[str, Any]:
    size, files = tree_size(path, *extra)
    return {"path": str(path.relative_to(folder)), "kind": kind, "format": fmt,
            "backend": backend, "parallelism": parallelism, "bytes": size, "files": files,
            **({"shared": [str(p.relative_to(folder)) for p in extra]} if extra else {})}


def write_input(folder: Path, base: Path, fixture_input: FixtureInput) -> int:
    """``base/input/part-0.txt`` by fixture_input.py; returns the number of records."""
    jobs = build().jobs
    done = subprocess.run([sys.executable, str(jobs / "fixture_input.py"), str(base)],
                          env=_model_env(fixture_input), capture_output=True, text=True,
                          check=True)
    with open(base / "input" / "part-0.txt", "rb") as handle:
        handle.seek(-64, os.SEEK_END)
        last = handle.read().splitlines()[-1].decode()
    if not last.startswith(f"{fixture_input.key_prefix}{fixture_input.keys - 1},"):
        raise SystemExit(f"the input's last record must be key keys-1 (it is {last!r}): pick "
                         f"keys and count_mod so that (keys - 1) % count_mod == count_mod - 1")
    return int(done.stdout.strip())


def verify(restorer: FlinkRestorer, folder: Path, entry: dict[str, Any],
           fixture_input: FixtureInput, backend: str, parallelism: int) -> RestoreResult:
    case = RestoreCase(snapshot=folder / entry["path"], job="java", parallelism=parallelism,
                       max_parallelism=PARAMETERS["max_parallelism"], backend=backend,
                       input=fixture_input, name=entry["path"], timeout=RESTORE_TIMEOUT,
                       hold_input=True)
    result = restorer.restore(case)
    if not result.ok:
        raise SystemExit(f"verification failed:\n{result.report()}")
    return result


def rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def result_summary(result: RestoreResult) -> dict[str, Any]:
    timing = result.flink_timing
    return {"ok": result.ok, "backend": result.case.backend,
            "parallelism": result.case.parallelism, "seconds": round(result.seconds, 2),
            "flink_restore_seconds": rounded(timing and timing.restore_seconds),
            "flink_state_seconds": rounded(timing and timing.state_seconds),
            "cpu_seconds_until_restored": rounded(result.timings.get("cpu_restored_seconds")),
            "state_handles": timing and timing.state_handles,
            "verified_keys": result.case.input.keys}


def generate(folder: Path, parameters: dict[str, int]) -> dict[str, Any]:
    fixture_input = FixtureInput(keys=parameters["keys"], count_mod=parameters["count_mod"])
    p, mp = parameters["parallelism"], parameters["max_parallelism"]
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    started = time.monotonic()
    heap, rocks = folder / "heap", folder / "rocksdb"
    records = write_input(folder, heap, fixture_input)
    (rocks / "input").mkdir(parents=True)
    os.link(heap / "input" / "part-0.txt", rocks / "input" / "part-0.txt")
    shutil.copytree(heap / "rules", rocks / "rules")
    input_seconds = time.monotonic() - started
    work = folder / "work"
    runs: dict[str, Any] = {}
    with FlinkRestorer(workdir=work) as restorer:
        reply = restorer.generate(heap, parallelism=p, max_parallelism=mp,
                                  fixture_input=fixture_input, savepoint=True, checkpoint=True,
                                  timeout=GENERATE_TIMEOUT)
        runs["heap"] = {"processing_seconds": seconds(reply, "submitted", "processed"),
                        "savepoint_seconds": seconds(reply, "processed", "savepoint_done"),
                        "checkpoint_seconds": seconds(reply, "savepoint_done", "checkpoint_done"),
                        "total_seconds": seconds(reply, "start", "end")}
        reply = restorer.generate(rocks, parallelism=p, max_parallelism=mp,
                                  fixture_input=fixture_input, backend="rocksdb",
                                  incremental=True, checkpoint=True, timeout=GENERATE_TIMEOUT)
        runs["rocksdb"] = {"processing_seconds": seconds(reply, "submitted", "processed"),
                           "checkpoint_seconds": seconds(reply, "processed", "checkpoint_done"),
                           "total_seconds": seconds(reply, "start", "end")}
        generation_seconds = time.monotonic() - started
        snapshots = {
            "heap-checkpoint": snapshot_entry(
                folder, retained_checkpoint(heap), kind="checkpoint",
                fmt="native", backend="hashmap", parallelism=p),
            "canonical-savepoint": snapshot_entry(
                folder, only(heap.glob("savepoints/canonical/savepoint-*")), kind="savepoint",
                fmt="canonical", backend="hashmap", parallelism=p),
        }
        rocks_chk = retained_checkpoint(rocks)
        snapshots["rocksdb-incremental-checkpoint"] = snapshot_entry(
            folder, rocks_chk, kind="checkpoint", fmt="native", backend="rocksdb",
            parallelism=p, extra=(rocks_chk.parent / "shared",))
        started_verify = time.monotonic()
        verification = {}
        for name, backend in (("canonical-savepoint", "hashmap"), ("heap-checkpoint", "hashmap"),
                              ("rocksdb-incremental-checkpoint", "rocksdb")):
            verification[name] = result_summary(
                verify(restorer, folder, snapshots[name], fixture_input, backend, p))
        verify_seconds = time.monotonic() - started_verify
    shutil.rmtree(work, ignore_errors=True)
    for base in (heap, rocks):              # regenerable by fixture_input.py; 60 MB
        shutil.rmtree(base / "input")
    anchor = verification["canonical-savepoint"]
    manifest = {
        "schema": 1, "flink_version": FLINK_VERSION, "job": "java",
        "max_parallelism": mp,
        "input": {"key_prefix": fixture_input.key_prefix, "keys": fixture_input.keys,
                  "count_mod": fixture_input.count_mod,
                  "value_stride": fixture_input.value_stride, "records": records},
        "snapshots": snapshots,
        "generation": {"seconds": round(generation_seconds, 1),
                       "input_seconds": round(input_seconds, 1), "runs": runs},
        "verification": verification, "verification_seconds": round(verify_seconds, 1),
        "jvm_anchor": {"snapshot": "canonical-savepoint", "backend": "hashmap",
                       "flink_restore_seconds": anchor["flink_restore_seconds"],
                       "flink_state_seconds": anchor["flink_state_seconds"],
                       "cpu_seconds_until_restored": anchor["cpu_seconds_until_restored"],
                       "keys": fixture_input.keys,
                       "bytes": snapshots["canonical-savepoint"]["bytes"]},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")},
    }
    tmp = folder / "manifest.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=2) + "\n")
    tmp.rename(folder / "manifest.json")   # the folder is complete from here on
    return manifest


def only(paths: Any) -> Path:
    found = sorted(paths)
    if len(found) != 1:
        raise SystemExit(f"expected one snapshot, found {found}")
    return Path(found[0])


def retained_checkpoint(base: Path) -> Path:
    """The completed checkpoint a generation run left (num-retained 1). A checkpoint still in
    flight when the job was cancelled leaves an empty ``chk-N``: removed."""
    complete = [m.parent for m in base.glob("checkpoints/*/chk-*/_metadata")]
    for chk in base.glob("checkpoints/*/chk-*"):
        if chk not in complete:
            shutil.rmtree(chk)
    return only(complete)


def snapshots(parameters: dict[str, int] | None = None) -> tuple[Path, dict[str, Any]]:
    """(folder, manifest) of the big snapshots, generated first if needed (others wait on a
    lock). The function the benchmarks call."""
    parameters = parameters or PARAMETERS
    folder = cache_dir(parameters)
    if not (folder / "manifest.json").is_file():
        folder.parent.mkdir(parents=True, exist_ok=True)
        with open(folder.parent / f".{folder.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (folder / "manifest.json").is_file():
                print(f"generating {folder} (once: about 4 minutes on 2 cores, then as long "
                      f"again to restore every snapshot in Flink and check all keys)", flush=True)
                generate(folder, parameters)
    return folder, json.loads((folder / "manifest.json").read_text())


def measure_anchor(folder: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    fixture_input = FixtureInput(**{k: manifest["input"][k] for k in
                                    ("key_prefix", "keys", "count_mod", "value_stride")})
    entry = manifest["snapshots"]["canonical-savepoint"]
    with FlinkRestorer() as restorer:
        return result_summary(verify(restorer, folder, entry, fixture_input, "hashmap",
                                     entry["parallelism"]))


def summary(folder: Path, manifest: dict[str, Any]) -> str:
    lines = [f"Flink {manifest['flink_version']} snapshots in {folder}",
             f"  {manifest['input']['keys']:,} keys, {manifest['input']['records']:,} records, "
             f"generated in {manifest['generation']['seconds']} s, verified (every key, by "
             f"Flink) in {manifest['verification_seconds']} s"]
    for name, snap in manifest["snapshots"].items():
        lines.append(f"  {name:32} {snap['bytes'] / 1e6:8.1f} MB {snap['files']:5} files  "
                     f"{snap['path']}")
    for name, v in manifest["verification"].items():
        lines.append(f"  restore {name:24} on {v['backend']:8} Flink {v['flink_restore_seconds']}"
                     f" s (state {v['flink_state_seconds']} s), verified run {v['seconds']} s")
    a = manifest["jvm_anchor"]
    lines.append(f"  JVM anchor: Flink restores the canonical savepoint ({a['bytes'] / 1e6:.0f} MB,"
                 f" {a['keys']:,} keys) in {a['flink_restore_seconds']} s "
                 f"(state handles read in {a['flink_state_seconds']} s; "
                 f"{a.get('cpu_seconds_until_restored')} CPU s)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--anchor", action="store_true",
                        help="measure Flink's restore of the canonical savepoint again")
    parser.add_argument("--keys", type=int, default=PARAMETERS["keys"],
                        help="number of keys (a smaller set for a trial; cached separately)")
    args = parser.parse_args(argv)
    parameters = dict(PARAMETERS, keys=args.keys)
    folder, manifest = snapshots(parameters)
    print(summary(folder, manifest))
    if args.anchor:
        print("  JVM anchor again:", json.dumps(measure_anchor(folder, manifest)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
