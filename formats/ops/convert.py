"""``statectl convert``: a checkpoint in another format, as a Flink canonical savepoint.

A statectl checkpoint as a Flink savepoint bootstraps a Flink job; a Flink snapshot as a
canonical savepoint switches backends (a RocksDB incremental checkpoint restores into the heap
backend this way).

The output is a Flink canonical savepoint written as :mod:`formats.flink.write.savepoint_writer`
describes (staged, ``_metadata`` last, an existing output refused); the source is never
modified. Converting keeps every operator's parallelism and max parallelism (an operator Flink's
SQL planner pins to parallelism 1 among others at 2 stays at 1); ``statectl rescale`` changes
them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from formats.flink.write.bootstrap import bootstrap_release, write_flink_savepoint
from formats.model.checkpoint import Checkpoint
from formats.ops.rescale import check_target, plan_checkpoint, refuse_lost_values
from statecore.errors import InvalidArgumentError

__all__ = ["FORMATS", "ConvertResult", "convert_checkpoint"]

FORMATS = ("flink",)


@dataclass(frozen=True)
class ConvertResult:
    """What a conversion wrote."""

    location: str
    format: str
    source_format: str
    files: int
    bytes: int
    entries: int
    seconds: float
    #: the Flink release the savepoint is for (``formats.flink.write.versions.TargetRelease``)
    release: dict[str, Any] | None = None
    release_text: str = ""


def convert_checkpoint(checkpoint: Checkpoint, out: str, to: str = "flink", *,
                       compress: bool = False, flink_version: str | None = None
                       ) -> ConvertResult:
    """Write ``checkpoint`` in format ``to`` at ``out`` (which must not exist).

    ``flink_version`` ("1.20"): the Flink release the savepoint is for; by default a Flink
    source's own, and the newest for statectl's format (:mod:`formats.flink.write.versions`).
    """
    if to not in FORMATS:
        raise InvalidArgumentError(f"unknown target format {to!r} (one of {', '.join(FORMATS)})")
    if checkpoint.format_name == "statectl":
        bootstrap_release(flink_version)  # refuses a release before any work
    else:
        checkpoint.check_release(flink_version)
    check_target(out)
    started = time.perf_counter()
    if checkpoint.format_name == "statectl":
        written = write_flink_savepoint(checkpoint, out, compress=compress,
                                        flink_version=flink_version)
    else:  # already Flink's: every operator at its own parallelism, as a canonical savepoint
        operators = checkpoint.metadata.operators
        parallelism = max((op.parallelism for op in operators), default=1)
        plan = plan_checkpoint(checkpoint, parallelism, operator_parallelism={
            op.uid: op.parallelism for op in operators})
        refuse_lost_values(checkpoint)
        written = checkpoint.write_rescaled(plan, out, compress=compress,
                                            flink_version=flink_version)
    return ConvertResult(out, to, checkpoint.format_name, written.files, written.bytes,
                         written.entries, time.perf_counter() - started, written.release,
                         written.release_text)
