"""Flink's jars of another release than the Flink venv's (2.3), for ground truth of 1.x forms.

``pyflink_lib("1.20.5")`` installs ``apache-flink-libraries==1.20.5`` (the jars only, no
dependencies) into ``~/.cache/statectl-flink/flink-1.20.5`` (``$STATECTL_FLINK_CACHE``) on first
use, under a lock file, so concurrent tests install it once; later calls return at once. Raises
:class:`flink_restore.FlinkUnavailable` when pip cannot install it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from flink_restore import FlinkUnavailable, cache_root

__all__ = ["FLINK_1X", "load_metadata", "load_mutations", "pyflink_lib", "serializer_vectors"]

#: The newest Flink 1.x release (the Kryo 2.24 era), whose forms statectl reads.
FLINK_1X = "1.20.5"


def pyflink_lib(version: str = FLINK_1X) -> Path:
    """The ``pyflink/lib`` folder (Flink's jars) of ``apache-flink-libraries==version``."""
    root = cache_root() / f"flink-{version}"
    lib = root / "pyflink" / "lib"
    if (root / "ok").is_file():
        return lib
    cache_root().mkdir(parents=True, exist_ok=True)
    with open(cache_root() / f".flink-{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (root / "ok").is_file():
            return lib
        staging = Path(tempfile.mkdtemp(prefix=f"flink-{version}-", dir=cache_root()))
        try:
            done = subprocess.run(
                [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                 "--disable-pip-version-check", "--target", str(staging),
                 f"apache-flink-libraries=={version}"],
                capture_output=True, text=True, check=False, timeout=1800)
            if done.returncode != 0 or not list((staging / "pyflink" / "lib").glob("*.jar")):
                raise FlinkUnavailable(f"pip could not install apache-flink-libraries=={version}:"
                                       f"\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
            (staging / "ok").write_text(version)
            shutil.rmtree(root, ignore_errors=True)
            staging.rename(root)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return lib


def serializer_vectors(version: str = FLINK_1X) -> list[tuple[str, bytes, bytes]]:
    """``(name, versioned snapshot, value)`` of every case ``SerializerVectors.java`` prints.

    Compiled against and run on Flink ``version``'s jars (compiled once per source, cached);
    its ``VECTOR`` and ``LEGACY`` lines, and on Flink 1.x those of ``java-1x/ScalaVectors.java``
    (the Scala API's serializers).
    """
    import hashlib

    from flink_restore import DRIVER_SOURCES, JVM_OPTIONS

    lib = pyflink_lib(version)
    sources = [DRIVER_SOURCES / "SerializerVectors.java"]
    mains = ["SerializerVectors"]
    if version.startswith("1."):  # the Scala API's serializers (Flink 2.x has none)
        sources.append(DRIVER_SOURCES / "java-1x" / "ScalaVectors.java")
        mains.append("ScalaVectors")
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:16]
    classes = cache_root() / f"vectors-{version}-{digest}"
    if not (classes / "SerializerVectors.class").is_file():
        with open(cache_root() / f".flink-{version}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (classes / "SerializerVectors.class").is_file():
                staging = Path(tempfile.mkdtemp(prefix="vectors-", dir=cache_root()))
                try:
                    done = subprocess.run(["javac", "-nowarn", "-d", str(staging), "-cp",
                                           f"{lib}/*", *map(str, sources)],
                                          capture_output=True, text=True, check=False)
                    if done.returncode != 0:
                        raise FlinkUnavailable(f"javac failed:\n{done.stdout}{done.stderr}")
                    shutil.rmtree(classes, ignore_errors=True)
                    staging.rename(classes)
                finally:
                    shutil.rmtree(staging, ignore_errors=True)
    vectors = []
    for main in mains:
        done = subprocess.run(["java", *JVM_OPTIONS, "-cp", f"{lib}/*:{classes}", main],
                              capture_output=True, text=True, check=False, timeout=300)
        if done.returncode != 0:
            raise FlinkUnavailable(f"{main} failed on Flink {version}:\n{done.stderr[-3000:]}")
        vectors += [(name, bytes.fromhex(snapshot), bytes.fromhex(value))
                    for name, snapshot, value in (line.split("\t")[1:] for line in
                                                  done.stdout.splitlines()
                                                  if line.startswith(("VECTOR\t", "LEGACY\t")))]
    return vectors


def load_mutations(version: str, path: Path, masks: tuple[int, ...]) -> list[tuple[bool, str]]:
    """:func:`load_metadata` of ``path`` cut at every offset, then with every byte XORed with
    each of ``masks`` (in that order), mutated and loaded in memory by one JVM."""
    return _metadata_check(version, ["--mutations", str(path),
                                     ",".join(f"{m:x}" for m in masks)],
                           len(path.read_bytes()) * (1 + len(masks)))


def load_metadata(version: str, paths: list[Path]) -> list[tuple[bool, str]]:
    """Flink ``version``'s own ``Checkpoints.loadCheckpointMetadata`` on each ``_metadata``.

    ``(loaded, what)`` per path: ``what`` is Flink's summary (checkpoint id, operators,
    properties, bytes left unread) or the exception it threw
    (``tests/flink_jobs/MetadataCheck.java``, compiled once per release).
    """
    return _metadata_check(version, [f'"{p}"' for p in paths], len(paths))


def _metadata_check(version: str, args: list[str], expected: int) -> list[tuple[bool, str]]:
    import hashlib

    from flink_restore import DRIVER_SOURCES, FLINK_VERSION
    from flink_restore import pyflink_lib as venv_lib

    lib = venv_lib() if version == FLINK_VERSION else pyflink_lib(version)
    source = DRIVER_SOURCES / "MetadataCheck.java"
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    classes = cache_root() / f"metadata-check-{version}-{digest}"
    if not (classes / "MetadataCheck.class").is_file():
        cache_root().mkdir(parents=True, exist_ok=True)
        with open(cache_root() / f".flink-{version}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (classes / "MetadataCheck.class").is_file():
                staging = Path(tempfile.mkdtemp(prefix="metadata-check-", dir=cache_root()))
                try:
                    done = subprocess.run(["javac", "-nowarn", "-d", str(staging), "-cp",
                                           f"{lib}/*", str(source)],
                                          capture_output=True, text=True, check=False)
                    if done.returncode != 0:
                        raise FlinkUnavailable(f"javac failed:\n{done.stdout}{done.stderr}")
                    shutil.rmtree(classes, ignore_errors=True)
                    staging.rename(classes)
                finally:
                    shutil.rmtree(staging, ignore_errors=True)
    # the paths in an argument file (``java @file``): thousands exceed a command line
    with tempfile.NamedTemporaryFile("w", suffix=".args", delete=False) as argfile:
        argfile.write("\n".join(["MetadataCheck", *args]))
    # (the launcher expands an argument file only up to the main class: it is in it). A small
    # heap: a damaged count makes Flink allocate a huge list before the stream ends, which
    # fails at once (OutOfMemoryError) instead of zeroing gigabytes first
    try:
        done = subprocess.run(["java", "-Xmx256m", "-XX:+UseSerialGC", "-cp",
                               f"{lib}/*:{classes}", f"@{argfile.name}"],
                              capture_output=True, text=True, check=False, timeout=600)
    finally:
        os.unlink(argfile.name)
    lines = [ln.split("\t") for ln in done.stdout.splitlines()
             if ln.startswith(("OK\t", "FAIL\t"))]
    if len(lines) != expected:
        raise FlinkUnavailable(f"MetadataCheck on Flink {version} printed {len(lines)} results "
                               f"for {expected} files:\n{done.stdout}{done.stderr[-3000:]}")
    return [(fields[0] == "OK", "\t".join(fields[2:])) for fields in lines]
