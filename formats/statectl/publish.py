"""Publishing a staged statectl checkpoint: ``_metadata.json`` last, then the directory.

A checkpoint is complete exactly when its ``_metadata.json`` exists (DESIGN "statectl checkpoint
format, version 1"). :func:`publish` writes it under a temporary name, fsyncs and renames it,
then renames the staging directory (:func:`formats.filesystems.staged`) into place.
"""

from __future__ import annotations

import json

import pyarrow.fs as pafs

from formats.filesystems import fsync
from statecore.checkpoint import CheckpointMetadata, metadata_to_json

__all__ = ["METADATA_FILE", "publish"]

#: The metadata file of a statectl checkpoint; its presence means the checkpoint is complete.
METADATA_FILE = "_metadata.json"


def publish(fs: pafs.FileSystem, staging: str, final: str, metadata: CheckpointMetadata) -> None:
    """Make a staged checkpoint complete: its metadata, then the directory into place.

    ``_metadata.json`` is written under a temporary name, fsynced and renamed; then the staged
    directory is renamed to ``final``.
    """
    # compact: the per-key-group row triples would otherwise take most of the file
    document = json.dumps(metadata_to_json(metadata), separators=(",", ":"),
                          sort_keys=True).encode()
    temporary = f"{staging}/{METADATA_FILE}.tmp"
    with fs.open_output_stream(temporary) as out:
        out.write(document)
    fsync(fs, temporary)
    fs.move(temporary, f"{staging}/{METADATA_FILE}")
    fs.move(staging, final)
    fsync(fs, final.rsplit("/", 1)[0] if "/" in final else ".")
