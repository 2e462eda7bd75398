"""``statectl migrate OLD --like NEW --out DIR``: OLD rewritten so that the job of NEW restores it.

Where ``statectl compat`` says Flink would refuse (or restore only dropping state), ``migrate``
writes a canonical savepoint for NEW's Flink release that the new job restores without
``allowNonRestoredState``:

* operators are paired as ``compat`` pairs them (OperatorID), or by ``--map OLD=NEW`` (a renamed
  or re-hashed uid: each side named by uid, name or OperatorID); each is written under the new
  job's identity. An operator of OLD with state that is not paired must be given ``--drop``;
  one without state is left out, as Flink skips it;
* a state the new job restores as it is, or that Flink migrates itself, is written as OLD holds
  it; a state Flink would refuse (Kryo 2 values for Flink 2.x, a generic Kryo type the new job
  holds under Flink's own serializer, ``int`` turned ``long``, ...) and a state renamed with
  ``--rename-state OP/OLD=NEW`` are written with the new job's meta info, every value converted
  and checked (:mod:`formats.flink.types.convert`) -- or nothing is written, the first value
  that does not convert named;
* ``--drop OP/STATE`` leaves a state out;
* what cannot be converted yet is refused before any work: a key serializer Flink refuses (the
  keys would move to other key groups), an operator state Flink refuses, another max
  parallelism (``statectl rescale --max-parallelism`` first).

Every operator keeps its parallelism. The output is staged and published as every savepoint
statectl writes; OLD is never modified. OLD opened by the Spark engine
(:meth:`formats.engines.Engine.open_rewritten`) is converted and written by Spark tasks, the
same savepoint byte for byte (:mod:`formats.spark.flink`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from formats.model.checkpoint import Checkpoint
from formats.model.compatibility import OperatorMigration, Verdict
from formats.ops.rescale import check_target, plan_checkpoint
from statecore.checkpoint import OperatorMetadata
from statecore.errors import InvalidArgumentError

__all__ = ["MigrateResult", "MigratedOperator", "migrate_checkpoint"]


@dataclass(frozen=True)
class MigratedOperator:
    """One operator written: as OLD and NEW name it, its states converted and dropped."""

    old: str
    new: str
    converted: tuple[tuple[str, str, str], ...]  # (OLD state, NEW state, why)
    dropped: tuple[str, ...]
    moved: bool = False  # written under another OperatorID (--map)


@dataclass(frozen=True)
class MigrateResult:
    """What ``migrate`` wrote."""

    location: str
    files: int
    bytes: int
    entries: int
    seconds: float
    operators: tuple[MigratedOperator, ...]
    #: OLD's operators left out: ``(name, why)``
    left_out: tuple[tuple[str, str], ...]
    release: dict[str, Any] | None = None
    release_text: str = ""


def _pairs(texts: Sequence[str], option: str) -> list[tuple[str, str]]:
    out = []
    for text in texts:
        left, sep, right = text.partition("=")
        if not sep or not left or not right:
            raise InvalidArgumentError(f"{option} {text!r}: expected OLD=NEW")
        out.append((left, right))
    return out


def _op_state(text: str, old: Checkpoint, option: str) -> tuple[OperatorMetadata, str | None]:
    """``OP`` or ``OP/STATE`` of OLD (OP: uid, name or OperatorID)."""
    try:
        return old.find_operator(text), None
    except InvalidArgumentError:
        op_text, sep, state = text.rpartition("/")
        if not sep:
            raise
    op = old.find_operator(op_text)
    if state not in {s.name for s in op.states}:
        raise InvalidArgumentError(f"{option} {text!r}: operator {op.identity.label} has no state "
                                   f"{state!r} (its states: "
                                   f"{', '.join(sorted(s.name for s in op.states))})")
    return op, state


def migrate_checkpoint(old: Checkpoint, like: Checkpoint, out: str, *,
                       maps: Sequence[str] = (), drops: Sequence[str] = (),
                       renames: Sequence[str] = (), compress: bool = False,
                       progress: Callable[[int, int, str], None] | None = None
                       ) -> MigrateResult:
    """Write ``old`` at ``out`` for the job that wrote ``like`` (see the module doc).

    ``progress(done, total, what)``: before each operator is written, ``done`` of the
    ``total`` operators written and ``what`` its label (the new job's), and ``(total, total,
    "")`` at the end; on Spark, ``"keyed state"`` first, while one job writes every
    operator's (:func:`formats.flink.write.savepoint_writer.write_savepoint`).
    """
    check_target(out)
    started = time.perf_counter()
    dropped_ops: set[str] = set()
    dropped_states: dict[str, set[str]] = {}
    for text in drops:
        op, state = _op_state(text, old, "--drop")
        if state is None:
            dropped_ops.add(op.uid)
        else:
            dropped_states.setdefault(op.uid, set()).add(state)
    renamed: dict[str, dict[str, str]] = {}
    for left, right in _pairs(renames, "--rename-state"):
        op, state = _op_state(left, old, "--rename-state")
        if state is None:
            raise InvalidArgumentError(f"--rename-state {left}={right}: expected OP/STATE=NEW")
        renamed.setdefault(op.uid, {})[state] = right
    paired: dict[str, str] = {}
    for left, right in _pairs(maps, "--map"):
        paired[old.find_operator(left).uid] = like.find_operator(right).uid
    by_id = {op.operator_id or op.uid: op.uid for op in like.metadata.operators}
    migrations, written, left_out = [], [], []
    for op in old.metadata.operators:
        if op.uid in dropped_ops:
            left_out.append((op.identity.label, "--drop"))
            continue
        new_uid = paired.get(op.uid) or by_id.get(op.operator_id or op.uid)
        if new_uid is None:
            if _has_state(op):
                raise InvalidArgumentError(
                    f"operator {op.identity.label} of OLD has state and is not in the new job: "
                    f"--map it to the new job's operator (--map {op.identity.label}=NEW) or "
                    f"--drop it")
            left_out.append((op.identity.label, "no state, not in the new job"))
            continue
        migration, shown = _migration(old, like, op, new_uid, renamed.get(op.uid, {}),
                                      dropped_states.get(op.uid, set()))
        migrations.append(migration)
        written.append(shown)
    plan = plan_checkpoint(old, max((op.parallelism for op in old.metadata.operators),
                                    default=1),
                           operator_parallelism={op.uid: op.parallelism
                                                 for op in old.metadata.operators})
    result = old.write_migrated(like, migrations, plan, out, compress=compress,
                                progress=progress)
    return MigrateResult(out, result.files, result.bytes, result.entries,
                         time.perf_counter() - started, tuple(written), tuple(left_out),
                         result.release, result.release_text)


def _has_state(op: OperatorMetadata) -> bool:
    return any(st.keyed or st.operator for st in op.subtasks)


def _migration(old: Checkpoint, like: Checkpoint, op: OperatorMetadata, new_uid: str,
               renamed: dict[str, str], dropped: set[str]
               ) -> tuple[OperatorMigration, MigratedOperator]:
    new_op = like.operator(new_uid)
    label = op.identity.label
    if new_op.max_parallelism != op.max_parallelism:
        raise InvalidArgumentError(
            f"operator {label}: max parallelism {op.max_parallelism} in OLD, "
            f"{new_op.max_parallelism} in the new job: statectl rescale --max-parallelism "
            f"{new_op.max_parallelism} OLD first")
    checks = old.restore_checks(op.uid, like, new_uid)
    if checks is None:
        raise InvalidArgumentError(f"{old.location} is a {old.format_name} checkpoint: migrate "
                                   "rewrites Flink snapshots")
    new_states = {s.name for s in new_op.states}
    convert: dict[str, str] = {}
    reasons = []
    for check in checks:
        name = check.state
        if check.scope == "keyed" and (name in dropped or name in renamed):
            continue
        if check.verdict not in (Verdict.INCOMPATIBLE, Verdict.UNKNOWN):
            continue
        if check.scope == "key":
            raise InvalidArgumentError(f"operator {label}: the new job's key serializer is not "
                                       f"OLD's ({check.detail}): statectl cannot convert keys yet")
        if check.scope == "operator":
            raise InvalidArgumentError(f"operator {label}, operator state {name!r}: "
                                       f"{check.detail}: statectl cannot convert it yet")
        if name not in new_states:
            raise InvalidArgumentError(f"operator {label}, state {name!r}: {check.detail} "
                                       f"(--drop {label}/{name} leaves it out)")
        convert[name] = name
        reasons.append((name, name, check.detail))
    for name, target in renamed.items():
        if name in dropped:
            continue
        convert[name] = target
        reasons.append((name, target, "renamed"))
    return (OperatorMigration(op.uid, new_uid, convert, frozenset(dropped)),
            MigratedOperator(label, new_op.identity.label, tuple(reasons),
                             tuple(sorted(dropped)), new_op.identity.id != op.identity.id))
