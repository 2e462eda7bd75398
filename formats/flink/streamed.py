"""A Flink snapshot opened to be rewritten in bounded memory (``rescale --out``, ``convert``).

Opened whole (:func:`formats.flink.checkpoint.open_flink_checkpoint` decoding at open), a
snapshot is held decoded in memory, several times its size (issue 45). Opened here, its keyed
state is decoded piece by piece twice and never held whole: a first pass counts each handle's
rows and bytes per key group (:func:`~formats.flink.read.pieces.count_piece`, as the Spark
engine's tasks count them), so that the model (and so a rescale's plan) is the one decoding at
open gives; the rewrite then reads each handle run of key groups by run as it writes
(:mod:`formats.flink.write.rewrite`). Memory holds a few pieces of about
``run_bytes`` stored bytes (or the largest key group; the engine gives
:data:`formats.ops.key_group_runs.CHUNK_BYTES`).

A snapshot with values statectl cannot read at all (a heap stream past an undecodable value,
damage) is opened decoded at open instead: the rewrite refuses it before writing anything, as
it always has, and ``--partial`` shows what could be read.
"""

from __future__ import annotations

from formats.flink.checkpoint import FlinkCheckpoint, open_flink_checkpoint
from formats.flink.read.incremental import OpenedHandles
from formats.flink.read.keyed import HeaderCache
from formats.flink.read.pieces import (
    StateCounts,
    count_piece,
    decode_piece,
    merge_counts,
    plan_pieces,
)
from formats.flink.read.streams import SnapshotStreams

__all__ = ["counted_in_runs"]


def counted_in_runs(checkpoint: FlinkCheckpoint, run_bytes: int) -> FlinkCheckpoint | None:
    """``checkpoint`` (opened with ``decode=False``) counted, to be rewritten run by run.

    Its keyed handles are decoded in pieces of about ``run_bytes`` stream bytes, counted, and
    the snapshot opened again with those counts; the rewrite reads runs of that size
    (:meth:`FlinkCheckpoint.decoded_runs`). ``None``: some value cannot be read (see the
    module doc), and nothing is kept of what was decoded.
    """
    streams = SnapshotStreams(checkpoint.fs, checkpoint.root)
    headers: HeaderCache = {}
    opened = OpenedHandles()
    parts: dict[tuple[int, int, int], list[dict[str, StateCounts]]] = {}
    for piece in plan_pieces(checkpoint.keyed_sources, run_bytes):
        header, decoded, info = decode_piece(streams, piece, headers, refuse=False,
                                             opened=opened)
        if any(damaged or not kept for *_, damaged, kept in decoded.losses.parts()):
            return None
        parts.setdefault(piece.source.ident, []).append(
            count_piece(header, decoded, info, (), piece.source.where))
    counts = {ident: merge_counts(found) for ident, found in parts.items()}
    counted = open_flink_checkpoint(checkpoint.fs, checkpoint.root, checkpoint.location,
                                    decode=False, counts=counts, partial=True,
                                    names=checkpoint.names)
    counted.run_bytes = run_bytes
    return counted
