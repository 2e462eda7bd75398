"""``statectl build``: aggregate input files into keyed state, with checkpoints and resume.

One library call for the command: read the inputs (:mod:`formats.inputs`), run a
:class:`statecore.job.LocalJob` whose function keeps the requested aggregations
(:mod:`statecore.aggregations`), checkpoint every N records into a directory
(:mod:`formats.storage`) while processing goes on, and finish with a checkpoint of the final
state. ``resume`` restores the latest (or a chosen) checkpoint and replays the inputs from the
positions it recorded, so a killed build resumed to the end has the same state as one that was
never interrupted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from formats.inputs import FileSource
from formats.storage import DirectoryCheckpointStorage
from statecore.aggregations import AggregatingFunction, parse_aggregation
from statecore.checkpoint import CheckpointKind
from statecore.errors import InvalidArgumentError
from statecore.job import LocalJob
from statecore.ttl import TtlConfig

__all__ = ["BuildSummary", "build_state"]


@dataclass(frozen=True)
class BuildSummary:
    """What a build did: records processed, checkpoints, and where the final state is."""

    records: int
    total_records: int
    restored_from: int | None
    checkpoints: tuple[int, ...]
    failed_checkpoints: dict[int, str]
    final_checkpoint: int
    final_location: str
    states: tuple[str, ...]
    parallelism: int
    max_parallelism: int


def build_state(
    inputs: Sequence[str],
    *,
    key: str,
    aggregations: Sequence[str],
    checkpoint_dir: str,
    key_type: str | None = None,
    parallelism: int = 1,
    max_parallelism: int | None = None,
    uid: str = "build",
    ttl: int | None = None,
    checkpoint_every: int | None = None,
    keep: int = 3,
    resume: int | str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> BuildSummary:
    """Build keyed state from ``inputs``; see the module docstring.

    ``progress(done, total)`` is called as records are processed (for a progress bar).
    """
    source = FileSource(inputs)
    if key not in source.column_types:
        raise InvalidArgumentError(f"--key {key!r} is not a column of the input "
                                   f"(columns: {', '.join(sorted(source.column_types))})")
    if not aggregations:
        raise InvalidArgumentError("give at least one --agg (e.g. --agg count)")
    ttl_config = None if ttl is None else TtlConfig(ttl)
    parsed = [parse_aggregation(spec, source.column_types, ttl_config) for spec in aggregations]
    storage = DirectoryCheckpointStorage(checkpoint_dir)
    job = LocalJob(uid=uid, name=f"statectl build ({', '.join(aggregations)})", source=source,
                   key_selector=lambda record: record[key],
                   key_type=key_type or source.column_types[key],
                   function_factory=lambda: AggregatingFunction(parsed), storage=storage,
                   parallelism=parallelism, max_parallelism=max_parallelism,
                   checkpoint_every=checkpoint_every, keep=keep, restore_from=resume,
                   configuration={"key": key, "key_type": key_type or source.column_types[key],
                                  "aggregations": " ".join(aggregations),
                                  "ttl": "" if ttl is None else str(ttl)})
    total = source.count()
    already = job.records_already_read
    step = max(1, total // 200)

    def tick(count: int) -> None:
        if progress is not None and (count % step == 0 or already + count == total):
            progress(already + count, total)

    result = job.run(on_record=tick)
    final = job.complete_checkpoint()
    return BuildSummary(
        records=result.records, total_records=total, restored_from=job.restored_from,
        checkpoints=tuple(c for c in result.completed if c != final),
        failed_checkpoints=dict(result.failed), final_checkpoint=final,
        final_location=storage.location(final, CheckpointKind.CHECKPOINT),
        states=tuple(a.state_name for a in parsed), parallelism=job.parallelism,
        max_parallelism=job.max_parallelism)
