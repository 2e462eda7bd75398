"""``statectl compat OLD NEW``: will the job that wrote NEW restore OLD? Answered without a JVM.

NEW is any snapshot of the new job version (a savepoint right after it started will do: Flink
writes the serializer snapshot of every state the job registered), the way to know the new
job's serializers without its classes. The restore is judged as Flink's runs it
(``Checkpoints.loadAndValidateCheckpoint``, ``StateAssignmentOperation``, the backends'
restore):

* operators are matched by OperatorID (a uid's hash: :func:`statecore.hashing.operator_id_of_uid`);
  one of OLD that NEW lacks loses its state (entries and bytes counted), and Flink restores
  only with ``allowNonRestoredState`` -- unless it holds no state, which Flink skips; one only
  in NEW starts empty;
* a matched operator's max parallelism must be OLD's: where NEW's differs and is not the
  default of its parallelism (so the job set it), Flink refuses ("The maximum parallelism ...
  changed. This is currently not supported"); where it is the default, Flink adopts OLD's when
  the job does not set one, and the parallelism must not exceed it;
* every state is checked by the format (:meth:`formats.model.checkpoint.Checkpoint.restore_checks`,
  :mod:`formats.model.compatibility`).

The outcome: ``restores`` (as is, reconfigured or after Flink's own migration: exit 0),
``restores-after-migrate`` (Flink refuses, but only states whose values ``statectl migrate``
converts: exit 1), ``restores-dropping-state`` (only with ``allowNonRestoredState``: exit 1),
``unknown`` (statectl cannot tell for some state: exit 1), ``cannot`` (Flink refuses: exit 3).
An operator of OLD dropped while one only in NEW has the same states is named as perhaps
renamed (``statectl migrate --map``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from formats.model.checkpoint import Checkpoint
from formats.model.compatibility import StateCheck, Verdict, worst
from formats.ops.inspect import OperatorSummary, summarize
from statecore.checkpoint import OperatorIdentity, OperatorMetadata
from statecore.errors import InvalidArgumentError
from statecore.key_groups import compute_default_max_parallelism

__all__ = ["OUTCOMES", "CompatReport", "OperatorCompat", "check_compat"]

#: the outcomes, best first, with the exit code each gives
OUTCOMES = {"restores": 0, "restores-after-migrate": 1, "restores-dropping-state": 1,
            "unknown": 1, "cannot": 3}


@dataclass(frozen=True)
class OperatorCompat:
    """One operator of OLD or NEW: how the restore treats it.

    ``status``: ``restored`` (in both), ``dropped`` (OLD only, with state: lost, the restore
    needs ``allowNonRestoredState``), ``skipped`` (OLD only, no state: Flink skips it),
    ``new`` (NEW only: starts empty). ``verdict`` is the worst of its ``checks`` and of
    ``problems`` (what Flink refuses beyond states: a max parallelism); ``notes`` say what the
    verdict assumes of the new job that its snapshot does not show.
    """

    status: str
    old: OperatorIdentity | None
    new: OperatorIdentity | None
    verdict: Verdict
    checks: tuple[StateCheck, ...] = ()
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # what holds only on a condition statectl cannot see
    entries: int | None = 0  # OLD's entries (what is lost when dropped; None: not counted)
    bytes: int = 0
    max_parallelism: tuple[int | None, int | None] = (None, None)  # OLD's, NEW's
    mapped: bool = False  # paired by --map across OperatorIDs: needs statectl migrate --map

    @property
    def label(self) -> str:
        """How output names it: as OLD names it, else as NEW does."""
        identity = self.old or self.new
        assert identity is not None
        return identity.label


@dataclass(frozen=True)
class CompatReport:
    """The restore of OLD by the job that wrote NEW, operator by operator."""

    old: str
    new: str
    old_release: str | None
    new_release: str | None
    operators: tuple[OperatorCompat, ...]

    @property
    def outcome(self) -> str:
        """One of :data:`OUTCOMES` (see the module doc)."""
        verdict = worst(*(o.verdict for o in self.operators))
        if verdict == Verdict.INCOMPATIBLE:
            fixable = all(not o.problems and all(
                c.migratable for c in o.checks if c.verdict == Verdict.INCOMPATIBLE)
                for o in self.operators)
            return "restores-after-migrate" if fixable else "cannot"
        if any(o.mapped for o in self.operators) and verdict != Verdict.UNKNOWN:
            return "restores-after-migrate"
        if verdict == Verdict.UNKNOWN:
            return "unknown"
        if any(o.status == "dropped" for o in self.operators):
            return "restores-dropping-state"
        return "restores"

    @property
    def exit_code(self) -> int:
        """0 restores, 1 only after migrate or dropping state or cannot tell, 3 refused."""
        return OUTCOMES[self.outcome]


def check_compat(old: Checkpoint, new: Checkpoint, maps: Sequence[str] = ()) -> CompatReport:
    """Judge the restore of ``old`` by the job that wrote ``new`` (see the module doc).

    ``maps`` (``OLD=NEW``, each by uid, name or OperatorID): operators paired although their
    OperatorIDs differ (a renamed uid). Flink does not pair them: the restore then needs
    ``statectl migrate --map`` first, which the outcome says.
    """
    summary = {o.uid: o for o in summarize(old, old.location).operators}
    by_id = {op.operator_id or op.uid: op for op in new.metadata.operators}
    mapped: dict[str, OperatorMetadata] = {}
    for text in maps:
        left, sep, right = text.partition("=")
        if not sep or not left or not right:
            raise InvalidArgumentError(f"--map {text!r}: expected OLD=NEW")
        mapped[old.find_operator(left).uid] = new.find_operator(right)
    matched: set[str] = set()
    operators = []
    for op in old.metadata.operators:
        other = mapped.get(op.uid) or by_id.get(op.operator_id or op.uid)
        key = (other.operator_id or other.uid) if other is not None else ""
        sizes = summary[op.uid]
        if other is None:
            has_state = _bytes(sizes) > 0 or bool(_entries(sizes))
            operators.append(OperatorCompat(
                "dropped" if has_state else "skipped", op.identity, None, Verdict.AS_IS,
                entries=_entries(sizes), bytes=_bytes(sizes),
                max_parallelism=(op.max_parallelism, None)))
            continue
        matched.add(key)
        found = old.restore_checks(op.uid, new, other.uid)
        if found is None:
            raise InvalidArgumentError(
                f"compat compares Flink snapshots: {old.location} is a {old.format_name} "
                f"checkpoint and {new.location} a {new.format_name} one (a Flink job restores a "
                "statectl checkpoint once converted: statectl convert)")
        checks = tuple(found)
        problems, notes = _parallelism(op.max_parallelism, other.parallelism,
                                       other.max_parallelism)
        if op.uid in mapped and other.identity.id != op.identity.id:
            notes = (*notes, f"paired by --map with {other.identity.label}: Flink pairs "
                     "operators by OperatorID, so it restores this state only after statectl "
                     "migrate --map")
        verdict = worst(*(c.verdict for c in checks),
                        *([Verdict.INCOMPATIBLE] if problems else []))
        operators.append(OperatorCompat("restored", op.identity, other.identity, verdict, checks,
                                        problems, notes, _entries(sizes), _bytes(sizes),
                                        (op.max_parallelism, other.max_parallelism),
                                        op.uid in mapped
                                        and other.identity.id != op.identity.id))
    only_new = [op for op in new.metadata.operators if (op.operator_id or op.uid) not in matched]
    operators = [_renamed(o, only_new, old) for o in operators]
    operators += [OperatorCompat("new", None, op.identity, Verdict.AS_IS,
                                 max_parallelism=(None, op.max_parallelism))
                  for op in only_new]
    return CompatReport(old.location, new.location, old.releases(), new.releases(),
                        tuple(operators))


def _renamed(found: OperatorCompat, only_new: list[OperatorMetadata], old: Checkpoint
             ) -> OperatorCompat:
    """A dropped operator with a note naming the new-only operator of the same states."""
    if found.status != "dropped" or found.old is None:
        return found
    states = {(s.name, s.kind) for s in old.operator(_uid(old, found.old)).states}
    alike = [op for op in only_new if {(s.name, s.kind) for s in op.states} == states]
    if len(alike) != 1:
        return found
    hint = (f"perhaps renamed to {alike[0].identity.label} (the same states): statectl migrate "
            f"--map {found.old.label}={alike[0].identity.label} writes OLD for it")
    return replace(found, notes=(*found.notes, hint))


def _uid(checkpoint: Checkpoint, identity: OperatorIdentity) -> str:
    return next(op.uid for op in checkpoint.metadata.operators if op.identity == identity)


def _entries(summary: OperatorSummary) -> int | None:
    """The operator's entries, ``None`` where the summary did not count some."""
    counts = [s.entries for s in summary.states]
    return None if None in counts else sum(c or 0 for c in counts)


def _bytes(summary: OperatorSummary) -> int:
    return sum(s.bytes for s in summary.subtasks)


def _parallelism(old_max: int, parallelism: int, new_max: int
                 ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What Flink refuses of the new operator's max parallelism, and what a restore assumes."""
    if new_max == old_max:
        return (), ()
    fix = f"statectl rescale --max-parallelism {new_max} rewrites OLD for it"
    if new_max != compute_default_max_parallelism(parallelism):
        return (f"max parallelism {old_max} -> {new_max}: Flink refuses a changed max "
                f"parallelism ({fix})",), ()
    if parallelism > old_max:
        return (f"parallelism {parallelism} is above OLD's max parallelism {old_max}, which "
                f"Flink adopts when the job sets none ({fix})",), ()
    return (), (f"max parallelism {old_max} -> {new_max}, the default of parallelism "
                f"{parallelism}: restores if the new job does not set one (Flink then adopts "
                f"{old_max}); if it sets {new_max}, Flink refuses ({fix})",)
