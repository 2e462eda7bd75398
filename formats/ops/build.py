"""``statectl build``: aggregate input files into keyed state, with checkpoints and resume.

One library call for the command: read the inputs (:mod:`formats.inputs`), run a
:class:`statecore.job.LocalJob` whose function keeps the requested aggregations
(:mod:`statecore.aggregations`), checkpoint every N records into a directory
(:mod:`formats.statectl.storage`) while processing goes on, and finish with a checkpoint of the
final state. ``resume`` restores the latest (or a chosen) checkpoint and replays the inputs from the
positions it recorded, so a killed build resumed to the end has the same state as one that was
never interrupted.

When every aggregation is foldable (``count``, ``sum``/``min``/``max`` of integer columns, no
TTL) the job folds runs of records per key with Arrow first (:mod:`formats.ops.fold`): the same
state, checkpoints and positions, without a Python call per record. ``fold=False`` processes
every record on its own (the reference the tests compare folding with).

Bad input records (:mod:`formats.inputs.bad_records`), by ``on_bad_record``: ``"refuse"`` (the
default) refuses an input holding one before anything is written, naming file, row and column;
``"skip"`` leaves them out (the other records' column types and key groups are the ones they
have without them) and counts them per reason in every checkpoint, beside the input positions,
so a resumed build neither counts one twice nor loses one; ``"fail"`` processes the records
before the first bad one (in the order the job reads them), writes a checkpoint of them, and
raises :class:`~formats.inputs.InputError` naming the record and that checkpoint: once the
record is fixed, ``resume`` goes on from there.

Integer sums wrap around at their type's width (two's complement), as Flink's do: ``sum`` of
an ``int64`` column is kept as Java's ``long`` arithmetic keeps it (Flink's
``LongSumAggregator``, ``org.apache.flink.api.common.aggregators``, and the ``LongSum`` of
``org.apache.flink.streaming.api.functions.aggregation.SumFunction`` add two ``long`` values
with Java's ``+``, which wraps), ``int32``/``int16``/``int8`` sums as ``SumFunction``'s
``IntSum``/``ShortSum``/``ByteSum`` do (the sum cast back to the type). A sum past
``2**63 - 1`` goes on from ``-2**63``: a checkpoint never fails for it, and the state is the
one a Flink job holds (:func:`parse_aggregations`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any

from formats.inputs import FileSource, InputError
from formats.inputs.bad_records import FAIL, ON_BAD_RECORD, REFUSE, BadRecord
from formats.open import open_checkpoint
from formats.ops.fold import AggregationFolder, foldable
from formats.statectl.storage import DirectoryCheckpointStorage
from statecore.aggregations import AggregatingFunction, Aggregation, parse_aggregation
from statecore.checkpoint import CheckpointKind
from statecore.errors import CheckpointError, InvalidArgumentError
from statecore.job import CONFIGURATION_STATE, LocalJob
from statecore.key_groups import compute_default_max_parallelism
from statecore.ttl import TtlConfig

__all__ = ["BuildSeconds", "BuildSummary", "build_state", "continue_build", "numeric_columns",
           "parse_aggregations", "refuse_another_build", "stored_build_settings"]

#: Bits of the Java integer types a sum wraps at (see the module doc)
_WIDTHS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
#: Aggregations that need numbers in their column
_NUMERIC_OPS = ("sum", "min", "max", "window-count")


def _wrapping_sum(bits: int) -> Callable[[Any, Any], Any]:
    """Java's ``+`` of two integers of ``bits`` bits, cast back to the type (wraps around)."""
    half, full = 1 << (bits - 1), 1 << bits

    def add(a: Any, b: Any) -> Any:
        total = a + b
        return total if -half <= total < half else (total + half) % full - half

    return add


def parse_aggregations(specs: Sequence[str], column_types: Mapping[str, str],
                       ttl: TtlConfig | None = None) -> list[Aggregation]:
    """The aggregations of ``specs``, integer sums wrapping as Flink's (module doc).

    :func:`statecore.aggregations.parse_aggregation` for each, with the reduce function of an
    integer ``sum`` replaced by Java's arithmetic of its type.
    """
    parsed = []
    for spec in specs:
        aggregation = parse_aggregation(spec, column_types, ttl)
        bits = _WIDTHS.get(aggregation.descriptor.value_type)
        if aggregation.op == "sum" and bits is not None:
            aggregation = dataclasses.replace(aggregation, descriptor=dataclasses.replace(
                aggregation.descriptor, reduce_function=_wrapping_sum(bits)))
        parsed.append(aggregation)
    return parsed


def numeric_columns(specs: Sequence[str]) -> frozenset[str]:
    """The columns ``specs`` need numbers in (``sum``, ``min``, ``max``, ``window-count``)."""
    columns = set()
    for spec in specs:
        op, _, rest = spec.partition(":")
        if op in _NUMERIC_OPS and rest:
            columns.add(rest.rsplit(":", 1)[0] if op == "window-count" else rest)
    return frozenset(columns)


@dataclass(frozen=True)
class BuildSeconds:
    """Where a build's time went (wall-clock seconds, from inside the process).

    ``setup``: opening the inputs (CSV and JSON Lines files are parsed here), the storage and
    the job, and a restore; ``processing``: reading and aggregating every record (including
    checkpoints taken on the way, written while processing goes on, and waiting for the last
    of them); ``final_checkpoint``: taking and writing the final checkpoint (``None`` where
    the engine writes it while processing: Spark's tasks). Interpreter start-up and imports
    come before all of them.
    """

    setup: float
    processing: float
    final_checkpoint: float | None

    @property
    def total(self) -> float:
        """The build's time from opening its inputs to its final checkpoint."""
        return self.setup + self.processing + (self.final_checkpoint or 0.0)


@dataclass(frozen=True)
class BuildSummary:
    """What a build did: records processed, checkpoints, and where the final state is.

    ``folded``: whether runs of records were folded per key (:mod:`formats.ops.fold`);
    ``seconds``: where the time went (``None`` when the engine does not say).
    ``on_bad_record``: what bad input records did (``"refuse"``, ``"skip"``, ``"fail"``);
    ``skipped``: bad records left out, per reason (:data:`formats.inputs.bad_records.REASONS`,
    sorted, only reasons with records), over the whole build as its final checkpoint counts
    them: records skipped before a resume included (unlike ``records``, this run's);
    ``skipped_examples``: the first of them in input order (at most
    :data:`formats.inputs.bad_records.EXAMPLES`), each with its file, row, line, column and reason.
    """

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
    folded: bool = False
    seconds: BuildSeconds | None = None
    on_bad_record: str = REFUSE
    skipped: dict[str, int] = field(default_factory=dict)
    skipped_examples: tuple[BadRecord, ...] = ()


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
    fold: bool = True,
    fold_records: int = 1 << 22,
    on_bad_record: str = REFUSE,
) -> BuildSummary:
    """Build keyed state from ``inputs``; see the module docstring.

    ``progress(done, total)`` is called as records are processed (for a progress bar).
    ``fold``: fold runs of up to ``fold_records`` records per key where the aggregations allow
    it (the same state). ``on_bad_record``: ``"refuse"``, ``"skip"`` or ``"fail"`` (see the
    module docstring).
    """
    started = time.perf_counter()
    if on_bad_record not in ON_BAD_RECORD:
        raise InvalidArgumentError(f"--on-bad-record {on_bad_record!r}: give one of "
                                   f"{', '.join(ON_BAD_RECORD)}")
    source = FileSource(inputs, key, key_type=key_type, on_bad_record=on_bad_record,
                        numeric=numeric_columns(aggregations))
    if key not in source.column_types:
        raise InvalidArgumentError(f"--key {key!r} is not a column of the input "
                                   f"(columns: {', '.join(sorted(source.column_types))})")
    if not aggregations:
        raise InvalidArgumentError("give at least one --agg (e.g. --agg count)")
    ttl_config = None if ttl is None else TtlConfig(ttl)
    parsed = parse_aggregations(aggregations, source.column_types, ttl_config)
    # a batch build: its throughput and peak memory count, not the stall of a next fork
    storage = DirectoryCheckpointStorage(checkpoint_dir, huge_pages=False)
    with storage.writing(), closing(source):  # one build per state directory
        return _run(source, storage, parsed, key=key, aggregations=aggregations,
                    key_type=key_type, parallelism=parallelism, max_parallelism=max_parallelism,
                    uid=uid, ttl=ttl, checkpoint_every=checkpoint_every, keep=keep,
                    resume=resume, progress=progress, fold=fold, fold_records=fold_records,
                    on_bad_record=on_bad_record, started=started)


def _run(source: FileSource, storage: DirectoryCheckpointStorage,
         parsed: list[Aggregation], *, key: str, aggregations: Sequence[str],
         key_type: str | None, parallelism: int, max_parallelism: int | None, uid: str,
         ttl: int | None, checkpoint_every: int | None, keep: int, resume: int | str | None,
         progress: Callable[[int, int], None] | None, fold: bool, fold_records: int,
         on_bad_record: str, started: float) -> BuildSummary:
    resolved_key_type = key_type or source.column_types[key]
    if resume is None:
        refuse_another_build(storage, {"key": key, "key_type": resolved_key_type,
                                      "aggregations": " ".join(aggregations),
                                      "ttl": "" if ttl is None else str(ttl), "uid": uid})
    if max_parallelism is None:
        max_parallelism = compute_default_max_parallelism(parallelism)
    folder = (AggregationFolder(source, key, resolved_key_type, max_parallelism, parsed)
              if fold and foldable(parsed, source.column_types[key], resolved_key_type)
              else None)
    job = LocalJob(uid=uid, name=f"statectl build ({', '.join(aggregations)})", source=source,
                   key_selector=lambda record: record[key],
                   key_type=resolved_key_type,
                   function_factory=lambda: AggregatingFunction(parsed), storage=storage,
                   parallelism=parallelism, max_parallelism=max_parallelism,
                   checkpoint_every=checkpoint_every, keep=keep, restore_from=resume,
                   configuration={"key": key, "key_type": resolved_key_type,
                                  "aggregations": " ".join(aggregations),
                                  "ttl": "" if ttl is None else str(ttl)},
                   folder=folder, fold_records=fold_records)
    total = source.count()
    already = job.records_already_read
    step = max(1, total // 200)
    reported = [0]

    def tick(count: int) -> None:
        if progress is not None and (count - reported[0] >= step or already + count == total):
            reported[0] = count
            progress(already + count, total)

    # --on-bad-record fail: the records before the first bad one, then a checkpoint of them
    stop = source.first_bad(job.positions) if on_bad_record == FAIL else None
    processing = time.perf_counter()
    result = job.run(limit=None if stop is None else stop[0], on_record=tick)
    if stop is not None:
        _fail_at(job, stop[1], processed=result.records)
    finishing = time.perf_counter()
    final = job.complete_checkpoint()
    finished = time.perf_counter()
    return BuildSummary(
        records=result.records, total_records=total, restored_from=job.restored_from,
        checkpoints=tuple(c for c in result.completed if c != final),
        failed_checkpoints=dict(result.failed), final_checkpoint=final,
        final_location=storage.location(final, CheckpointKind.CHECKPOINT),
        states=tuple(a.state_name for a in parsed), parallelism=job.parallelism,
        max_parallelism=job.max_parallelism, folded=folder is not None,
        seconds=BuildSeconds(setup=processing - started, processing=finishing - processing,
                             final_checkpoint=finished - finishing),
        on_bad_record=on_bad_record, skipped=job.skipped,
        skipped_examples=tuple(source.bad_before(job.positions)))


def _fail_at(job: LocalJob, bad: BadRecord, processed: int) -> None:
    """Stop a build (``--on-bad-record fail``) at ``bad``, after checkpointing what came before.

    ``processed``: records this run processed before it; none: no new checkpoint (the one
    resumed from, if any, holds them).
    """
    if processed:
        kept = (f"checkpoint {job.complete_checkpoint()} holds the records before it; fix it, "
                f"then --resume goes on from there")
    elif job.restored_from is not None:
        kept = (f"checkpoint {job.restored_from} holds the records before it; fix it, then "
                f"--resume goes on from there")
    else:
        kept = "no record came before it, nothing was written"
    raise InputError(f"{bad.where()}: {bad.detail} (--on-bad-record fail): {kept}")


def refuse_another_build(storage: DirectoryCheckpointStorage, settings: dict[str, str]) -> None:
    """A new build (no ``--resume``) in a directory holding another job's checkpoints.

    Its checkpoints would follow the other job's, and ``--resume`` or ``snapshot take``
    would then mix them: refused, saying what differs. The same job started again (the same
    key, aggregations, TTL and uid) is welcome: its checkpoints follow the earlier run's.
    """
    completed = [c for c in storage.completed() if c.kind is CheckpointKind.CHECKPOINT]
    if not completed:
        return
    try:
        stored = stored_build_settings(storage.base)
    except CheckpointError as exc:
        raise InvalidArgumentError(
            f"--checkpoint-dir {storage.shown} holds checkpoints statectl build did not write "
            f"({exc}): give a new --checkpoint-dir") from exc
    differs = [f"{name} {stored.get(name) or '(none)'!r} there, {value or '(none)'!r} here"
               for name, value in settings.items() if stored.get(name, "") != value]
    if differs:
        raise InvalidArgumentError(
            f"--checkpoint-dir {storage.shown} holds the checkpoints of another build "
            f"({'; '.join(differs)}): give a new --checkpoint-dir, or continue that build "
            f"with its own settings and --resume")


def stored_build_settings(checkpoint_dir: str) -> dict[str, str]:
    """The settings a build stored in its latest checkpoint (its ``job-configuration``).

    ``key``, ``key_type``, ``aggregations`` (space-separated), ``ttl`` (empty: none), plus the
    operator's ``uid``, ``parallelism`` and ``max_parallelism``.
    """
    completed = [c for c in DirectoryCheckpointStorage(checkpoint_dir, create=False).completed()
                 if c.kind is CheckpointKind.CHECKPOINT]
    if not completed:
        raise CheckpointError(f"{checkpoint_dir} has no completed checkpoint to continue from")
    checkpoint = open_checkpoint(completed[-1].location)
    operators = checkpoint.metadata.operators
    stored = [entry for entry in checkpoint.operator_entries(operators[0].uid, 0)
              if entry.name == CONFIGURATION_STATE] if len(operators) == 1 else []
    if not stored:
        raise CheckpointError(f"{completed[-1].location} was not written by statectl build: "
                              "it has no job configuration to continue with")
    settings = {str(k): str(v) for k, v in stored[0].entries}
    missing = {"key", "key_type", "aggregations", "ttl"} - settings.keys()
    if missing:
        raise CheckpointError(f"{completed[-1].location}: the job configuration lacks "
                              f"{', '.join(sorted(missing))}")
    op = operators[0]
    return {**settings, "uid": op.uid, "parallelism": str(op.parallelism),
            "max_parallelism": str(op.max_parallelism)}


def continue_build(inputs: Sequence[str], checkpoint_dir: str,
                   progress: Callable[[int, int], None] | None = None,
                   on_bad_record: str = REFUSE) -> BuildSummary:
    """Resume the build of ``checkpoint_dir`` with its stored settings over ``inputs``.

    What ``statectl snapshot take --input`` runs before its savepoint: the same as ``build
    --resume`` with the settings the build was started with, read from its latest checkpoint.
    ``on_bad_record`` is not a stored setting: it is given again.
    """
    settings = stored_build_settings(checkpoint_dir)
    return build_state(
        inputs, key=settings["key"], aggregations=settings["aggregations"].split(" "),
        checkpoint_dir=checkpoint_dir, key_type=settings["key_type"],
        parallelism=int(settings["parallelism"]),
        max_parallelism=int(settings["max_parallelism"]), uid=settings["uid"],
        ttl=int(settings["ttl"]) if settings["ttl"] else None, resume="latest",
        progress=progress, on_bad_record=on_bad_record)
