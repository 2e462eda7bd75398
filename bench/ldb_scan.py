"""RocksDB's own ``ldb scan`` of a Flink RocksDB checkpoint: the RocksDB path's native yardstick.

A Flink incremental checkpoint is not a RocksDB directory: each keyed handle lists its files by
their RocksDB names (``000014.sst``, ``MANIFEST-000005``, ``CURRENT``, ``OPTIONS-000017``) and
where Flink stored them (``IncrementalRemoteKeyedStateHandle``; a restore downloads them under
those names). :func:`ldb_scan` builds that directory per handle from symbolic links (inline files
written out), lists its column families (``ldb list_column_families``) and scans each (``ldb
scan``: raw bytes, the cheapest output; its lines counted, a binary value may hold a newline),
one process after the other, as statectl's one-process export reads the checkpoint.
``--ignore_unknown_options``: Flink's RocksDB (frocksdb 8) writes options this ``ldb``
(Debian's ``rocksdb-tools``) does not know; the merge operator of list states,
``stringappendtest``, is built in. ldb opens the copy read-only (it writes no file there); the
checkpoint is never touched.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

__all__ = ["ldb_scan", "ldb_available"]


def ldb_available() -> bool:
    return shutil.which("ldb") is not None


def _databases(snapshot: Path, into: Path) -> list[Path]:
    """One RocksDB directory per incremental handle of the checkpoint's ``_metadata``."""
    sys.path.insert(0, str(REPO))
    from formats.flink.read.metadata import FlinkIncrementalHandle, parse_metadata

    metadata = parse_metadata((snapshot / "_metadata").read_bytes())
    found = []
    for operator in metadata.operators:
        for subtask in operator.subtasks:
            for handle in subtask.managed_keyed:
                if not isinstance(handle, FlinkIncrementalHandle):
                    continue
                folder = into / f"db-{len(found)}"
                folder.mkdir()
                for local, stream in handle.files:
                    if stream.kind == "inline":
                        (folder / local).write_bytes(stream.data or b"")
                    elif stream.kind == "relative":
                        (folder / local).symlink_to(snapshot / stream.path)
                    else:
                        (folder / local).symlink_to(Path(stream.path.removeprefix("file:")))
                found.append(folder)
    return found


def _families(db: Path) -> list[str]:
    done = subprocess.run(["ldb", f"--db={db}", "--ignore_unknown_options",
                           "list_column_families"], capture_output=True, text=True, check=True)
    listed = re.search(r"\{(.*)\}", done.stdout)
    if listed is None:
        raise RuntimeError(f"ldb list_column_families of {db}: {done.stdout}{done.stderr}")
    return [name.strip() for name in listed.group(1).split(",") if name.strip()]


def ldb_scan(snapshot: Path) -> tuple[float, int]:
    """``(seconds, lines)``: ``ldb scan`` of every column family of every handle, timed
    from the first scan to the last (directories and family lists made before)."""
    with tempfile.TemporaryDirectory(prefix="statectl-bench-ldb-") as tmp:
        scans = [(db, family) for db in _databases(snapshot, Path(tmp))
                 for family in _families(db)]
        lines = 0
        started = time.perf_counter()
        for db, family in scans:
            done = subprocess.run(["ldb", f"--db={db}", "--ignore_unknown_options",
                                   f"--column_family={family}", "scan"],
                                  capture_output=True, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"ldb scan of {family} in {db}: {done.stderr[-1000:]!r}")
            lines += done.stdout.count(b"\n")
        return time.perf_counter() - started, lines
