"""Publishing a staged statectl checkpoint: ``_metadata.json`` last, as the commit point.

A checkpoint is complete exactly when its ``_metadata.json`` exists (DESIGN "statectl checkpoint
format, version 1"). :func:`publish` writes it by the commit protocol of
:mod:`formats.storage.commit`: on the local disk under a temporary name, fsynced and renamed, then
the staging directory renamed into place; on an object store with one request into the checkpoint
directory itself, after every data file.
"""

from __future__ import annotations

import json

import pyarrow.fs as pafs

from formats.storage.commit import commit
from statecore.checkpoint import CheckpointMetadata, metadata_to_json

__all__ = ["METADATA_FILE", "publish"]

#: The metadata file of a statectl checkpoint; its presence means the checkpoint is complete.
METADATA_FILE = "_metadata.json"


def publish(fs: pafs.FileSystem, staging: str, final: str, metadata: CheckpointMetadata) -> None:
    """Make a staged checkpoint complete: its metadata last (see :mod:`formats.storage.commit`)."""
    # compact: the per-key-group row triples would otherwise take most of the file
    document = json.dumps(metadata_to_json(metadata), separators=(",", ":"),
                          sort_keys=True).encode()
    commit(fs, staging, final, METADATA_FILE, document)
