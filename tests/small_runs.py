"""Key-group runs made small, so that the fixtures' few kilobytes are read in several runs.

The streaming reads (:mod:`formats.ops.key_group_runs`) cut a keyed handle into runs of about
``CHUNK_BYTES`` stored bytes; the fixtures' handles are smaller than one default run. The tests
that compare a run-by-run read with a whole one set the runs to about a third of the smallest
handle with state.
"""

from __future__ import annotations

from typing import Any

import pytest

import formats.ops.key_group_runs as runs_module
from formats.ops.key_group_runs import key_group_chunks

__all__ = ["cut_in_small_runs"]


def cut_in_small_runs(checkpoint: Any, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Set the run size to a third of ``checkpoint``'s smallest handle with state; return the
    number of runs of each of its keyed handles."""
    handles = [(op.uid, h) for op in checkpoint.metadata.operators for st in op.subtasks
               for h in st.keyed]
    sizes = [sum(b for _, b in checkpoint.key_group_estimates(uid, h) or [])
             for uid, h in handles]
    monkeypatch.setattr(runs_module, "CHUNK_BYTES", max(1, min(
        (n for n in sizes if n), default=3) // 3))
    return [len(key_group_chunks(checkpoint, uid, h) or [None]) for uid, h in handles]
