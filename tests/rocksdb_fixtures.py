"""Finding the real RocksDB files of the Flink fixtures (``../shared/flink-fixtures-rocksdb``).

Every file under ``$STATECTL_FLINK_ROCKSDB_FIXTURES`` (default
``../shared/flink-fixtures-rocksdb`` beside the repository) is sniffed: an SST file ends with the
block-based table magic, a MANIFEST starts with a log record whose CRC holds. Nothing here names
a file, a count or a key. ``incremental_handles`` reads each set's ``metadata-dump.json`` for the
``IncrementalRemoteKeyedStateHandle``s whose files are all real files (not inline).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import google_crc32c
import pytest

from formats.flink.read.rocksdb.checksums import crc32c_unmask
from formats.flink.read.rocksdb.footer import has_block_based_magic

ROOT = Path(__file__).resolve().parent.parent


def varint(value: int) -> bytes:
    """RocksDB's varint32/64 (``util/coding.h``): 7 bits a byte, low first, high bit = more."""
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def rocksdb_fixtures_dir() -> Path:
    default = ROOT.parent / "shared" / "flink-fixtures-rocksdb"
    return Path(os.environ.get("STATECTL_FLINK_ROCKSDB_FIXTURES", default))


def _files() -> list[Path]:
    base = rocksdb_fixtures_dir()
    if not base.is_dir():
        pytest.fail(f"no RocksDB fixtures directory {base}; set STATECTL_FLINK_ROCKSDB_FIXTURES")
    return sorted(p for p in base.rglob("*") if p.is_file())


def is_manifest(data: bytes) -> bool:
    """A RocksDB log whose first record (FULL or FIRST) carries a valid masked CRC-32C."""
    if len(data) < 7 or data[6] not in (1, 2):
        return False
    length = data[4] | data[5] << 8
    if 7 + length > len(data):
        return False
    stored = int.from_bytes(data[:4], "little")
    return google_crc32c.value(data[6:7 + length]) == crc32c_unmask(stored)


def sst_files() -> list[Path]:
    found = [p for p in _files() if has_block_based_magic(_tail(p))]
    if not found:
        pytest.fail(f"no SST files under {rocksdb_fixtures_dir()}")
    return found


def manifest_files() -> list[Path]:
    found = [p for p in _files() if is_manifest(p.read_bytes())]
    if not found:
        pytest.fail(f"no MANIFEST files under {rocksdb_fixtures_dir()}")
    return found


def _tail(path: Path) -> bytes:
    with path.open("rb") as f:
        f.seek(max(0, path.stat().st_size - 8))
        return f.read()


def relative_id(path: Path) -> str:
    return str(path.relative_to(rocksdb_fixtures_dir()))


@dataclass(frozen=True)
class Handle:
    """An incremental keyed state handle of real files: local name -> file."""

    where: str
    shared: dict[str, Path]
    private: dict[str, Path]


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        if node.get("class") == "IncrementalRemoteKeyedStateHandle":
            yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def _resolve(set_dir: Path, handle: dict[str, Any]) -> Path | None:
    path = handle.get("path")
    if not isinstance(path, str) or not path.startswith("file:<root>/"):
        return None
    resolved = set_dir / path.removeprefix("file:<root>/")
    return resolved if resolved.is_file() else None


def incremental_handles() -> list[Handle]:
    handles = []
    for dump in sorted(rocksdb_fixtures_dir().glob("*/metadata-dump.json")):
        set_dir = dump.parent
        for snapshot, content in json.loads(dump.read_text()).items():
            for number, node in enumerate(_walk(content)):
                files = {}
                for kind in ("sharedState", "privateState"):
                    files[kind] = {f["localPath"]: _resolve(set_dir, f["handle"])
                                   for f in node.get(kind, [])}
                every = [*files["sharedState"].values(), *files["privateState"].values()]
                if every and all(p is not None for p in every):
                    handles.append(Handle(f"{set_dir.name}/{snapshot}#{number}",
                                          files["sharedState"],  # type: ignore[arg-type]
                                          files["privateState"]))  # type: ignore[arg-type]
    return handles
