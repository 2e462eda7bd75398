"""Rescale plans: which state each new subtask gets, computed from checkpoint metadata alone.

Pure functions over the shared metadata model (:mod:`statecore.checkpoint`), so the same plan
serves statectl's own checkpoints and, once read, Flink's. Reference §3 and §4:

* keyed state (§4.2): new subtask ``i`` owns ``compute_key_group_range_for_operator_index(M,
  p, i)``. With the parallelism unchanged it keeps old subtask ``i``'s handles as they are;
  otherwise it takes, from every old handle in old-subtask order, the intersection with its
  range (a handle restricted to the overlapping key groups; none when empty). Within one max
  parallelism that is the whole rescale: a new ``_metadata.json`` over the old files.
* a max-parallelism change (which Flink refuses, §4.1) re-hashes every key: the plan then needs
  the number of entries per (old subtask, new key group), which only reading the keys can give
  (``rehashed``), and every keyed file is rewritten.
* operators the new parallelism does not apply to (:func:`rescale_targets`): an operator whose
  max parallelism is lower than other operators' was set on it (Flink's default is the same
  for every operator up to parallelism 85, a job's setting is every operator's): Flink's SQL
  planner sets parallelism 1 and max parallelism 1 on a sink's committer or a global
  aggregate in every job. Such an operator keeps its parallelism and max parallelism
  (``kept``) where the new parallelism is above its max parallelism or a new max parallelism
  is given; ``operator_parallelism`` gives an operator a parallelism of its own.
* operator state (§3): :func:`~statecore.rescale.assign_operator_state`, Flink's
  repartitioner, over element *ranges* of files (statectl's deliberate difference from Flink's
  per-element offsets, DESIGN "Rescale"). A union range that several old subtasks reference
  (all of them did after an earlier rescale) is one list and is restored once, where Flink,
  whose subtasks each wrote their own copy, would restore it once per old subtask.

Sizes: a handle's bytes are its file's bytes apportioned by rows (or elements), an estimate
from metadata; entries are exact.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from statecore.checkpoint import (
    CheckpointKind,
    CheckpointMetadata,
    FileInfo,
    KeyedStateHandle,
    OperatorIdentity,
    OperatorMetadata,
    OperatorStateHandle,
    SubtaskMetadata,
    file_extents,
    share_of_file,
)
from statecore.errors import ParallelismError
from statecore.key_groups import (
    UPPER_BOUND_MAX_PARALLELISM,
    KeyGroupRange,
    compute_key_group_range_for_operator_index,
)
from statecore.operator_backend import OperatorStateMode
from statecore.rescale import assign_operator_state

__all__ = [
    "KEPT",
    "OPERATOR_PARALLELISM",
    "PARALLELISM",
    "OperatorPlan",
    "OperatorTarget",
    "RescalePlan",
    "StateShare",
    "SubtaskPlan",
    "check_rescale",
    "plan_rescale",
    "rescale_targets",
]

#: (operator uid, state name) -> {(old subtask, new key group): entries}
Rehashed = Mapping[tuple[str, str], Mapping[tuple[int, int], int]]

#: Where an operator's new parallelism comes from (``OperatorPlan.parallelism_from``): the
#: plan's parallelism (``-p``), one given for the operator (``--operator-parallelism``), or its
#: own, kept with its max parallelism (:func:`rescale_targets`).
PARALLELISM, OPERATOR_PARALLELISM, KEPT = "parallelism", "operator-parallelism", "kept"


@dataclass(frozen=True)
class OperatorTarget:
    """One operator's new parallelism and max parallelism, and where they come from."""

    parallelism: int
    max_parallelism: int
    #: :data:`PARALLELISM`, :data:`OPERATOR_PARALLELISM` or :data:`KEPT`
    source: str = PARALLELISM


@dataclass(frozen=True)
class StateShare:
    """What one new subtask gets of one state: entries (keyed) or elements (operator)."""

    state: str
    scope: str
    entries: int
    bytes: int


@dataclass(frozen=True)
class SubtaskPlan:
    """One new subtask: its key groups, the handles it reads, its share of every state."""

    index: int
    key_group_range: KeyGroupRange | None
    keyed: tuple[KeyedStateHandle, ...]
    operator: tuple[OperatorStateHandle, ...]
    states: tuple[StateShare, ...]
    bytes: int
    bytes_moved: int

    @property
    def entries(self) -> int:
        return sum(s.entries for s in self.states if s.scope == "keyed")


@dataclass(frozen=True)
class OperatorPlan:
    """One operator's rescale: old and new parallelism and max parallelism, per new subtask."""

    uid: str
    name: str
    old_parallelism: int
    new_parallelism: int
    old_max_parallelism: int
    new_max_parallelism: int
    subtasks: tuple[SubtaskPlan, ...]
    union_elements: int
    #: the operator as output names it (``OperatorMetadata.identity``)
    identity: OperatorIdentity
    #: where ``new_parallelism`` comes from (:data:`PARALLELISM`, :data:`OPERATOR_PARALLELISM`,
    #: :data:`KEPT`: the operator keeps its parallelism and max parallelism)
    parallelism_from: str = PARALLELISM

    @property
    def kept(self) -> bool:
        """Whether the operator keeps its parallelism and max parallelism (see the module)."""
        return self.parallelism_from == KEPT

    @property
    def rehash(self) -> bool:
        """Whether keys move between key groups (max parallelism changes): files rewritten."""
        return self.old_max_parallelism != self.new_max_parallelism

    @property
    def union_blowup(self) -> int:
        """Union elements restored in total: every new subtask gets every element."""
        return self.union_elements * self.new_parallelism

    @property
    def bytes(self) -> int:
        return sum(s.bytes for s in self.subtasks)

    @property
    def bytes_moved(self) -> int:
        return sum(s.bytes_moved for s in self.subtasks)

    @property
    def skew(self) -> float:
        """Max over mean of the new subtasks' bytes (1.0 when perfectly even or empty)."""
        sizes = [s.bytes for s in self.subtasks]
        mean = sum(sizes) / len(sizes)
        return max(sizes) / mean if mean else 1.0

    def metadata(self, source: OperatorMetadata) -> OperatorMetadata:
        """The operator's new metadata, its handles referencing the old files."""
        return replace(source, parallelism=self.new_parallelism,
                       max_parallelism=self.new_max_parallelism,
                       subtasks=tuple(SubtaskMetadata(s.index, s.key_group_range, s.keyed,
                                                      s.operator) for s in self.subtasks))


@dataclass(frozen=True)
class RescalePlan:
    """The plan for every operator of a checkpoint."""

    parallelism: int
    max_parallelism: int | None
    operators: tuple[OperatorPlan, ...]
    #: where data files' state is stored, where that is not their model name (a Flink
    #: snapshot's decoded states: ``inline``, or files relative to the snapshot)
    stored_names: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: per (operator uid, new subtask): the files its restore downloads whole, with their bytes
    #: (a Flink RocksDB snapshot's incremental handles; empty for other formats)
    downloads: Mapping[tuple[str, int], tuple[tuple[str, int], ...]] = field(
        default_factory=dict)

    @property
    def rehash(self) -> bool:
        return any(op.rehash for op in self.operators)

    def stored(self, file: str) -> tuple[str, ...]:
        """Where a data file's state is stored (see ``stored_names``)."""
        return self.stored_names.get(file, (file,))

    @property
    def bytes_moved(self) -> int:
        return sum(op.bytes_moved for op in self.operators)

    @property
    def skew(self) -> float:
        return max((op.skew for op in self.operators), default=1.0)

    def metadata(self, source: CheckpointMetadata, checkpoint_id: int, kind: CheckpointKind,
                 created_ms: int) -> CheckpointMetadata:
        """New metadata over the old files (only for a plan without a rehash)."""
        if self.rehash:
            raise ParallelismError("a max-parallelism change rewrites files; it has no "
                                   "metadata-only form")
        operators = tuple(plan.metadata(op) for plan, op in zip(self.operators,
                                                                 source.operators, strict=True))
        draft = CheckpointMetadata(checkpoint_id, kind, created_ms, operators, source.files)
        return replace(draft, files=files_of(draft))


def check_rescale(op: OperatorMetadata, parallelism: int, max_parallelism: int) -> None:
    """Flink's preconditions for restoring ``op`` at the new parallelism (reference §4.1).

    Raises :class:`ParallelismError` with the reason and what can be given instead. Flink
    additionally refuses any change of a configured max parallelism; statectl performs it
    offline by re-hashing (its headline).
    """
    if parallelism < 1:
        raise ParallelismError(f"the new parallelism must be at least 1, got {parallelism}")
    if not 1 <= max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise ParallelismError(
            f"the max parallelism must be between 1 and {UPPER_BOUND_MAX_PARALLELISM}, got "
            f"{max_parallelism}")
    if parallelism > max_parallelism:
        if max_parallelism != op.max_parallelism:
            raise ParallelismError(
                f"operator {op.uid!r} cannot be restored at parallelism {parallelism}: the new "
                f"maximum parallelism ({max_parallelism}) is lower than the parallelism. Give "
                f"a max parallelism of at least {parallelism}, or a parallelism of at most "
                f"{max_parallelism}.")
        raise ParallelismError(
            f"operator {op.uid!r} cannot be restored at parallelism {parallelism}: the "
            f"maximum parallelism ({max_parallelism}) is lower than the parallelism. Reduce "
            f"the parallelism to at most {max_parallelism} or change the max parallelism "
            f"with --max-parallelism.")


def rescale_targets(metadata: CheckpointMetadata, parallelism: int,
                    max_parallelism: int | None = None,
                    operator_parallelism: Mapping[str, int] | None = None, *,
                    rehashable: Callable[[OperatorMetadata], bool] | None = None
                    ) -> dict[str, OperatorTarget]:
    """Every operator's new parallelism and max parallelism, by uid.

    * an operator in ``operator_parallelism`` (uid -> parallelism, 1 to its new max
      parallelism) gets that parallelism and the new max parallelism (``max_parallelism``,
      else its own): the user named it;
    * an operator whose max parallelism is lower than another operator's had it set on itself
      (Flink's default max parallelism is the same for every operator up to parallelism 85,
      and a job's setting is every operator's), as Flink's SQL planner sets parallelism 1 and
      max parallelism 1 on a sink's committer or a global aggregate in every job. It is
      **kept** -- its parallelism and max parallelism stay -- where ``parallelism`` is above
      its max parallelism (Flink restores it only where the job sets its parallelism) or a
      new ``max_parallelism`` is given (Flink refuses to restore an operator's state at
      another max parallelism than the one the job sets on it);
    * every other operator gets ``parallelism`` and the new max parallelism.

    Raises :class:`ParallelismError` for an operator that cannot take them, saying what can
    be given instead: ``rehashable(op)`` tells whether ``op``'s max parallelism can change
    (its keys' key groups are computable; default: yes).
    """
    if parallelism < 1:
        raise ParallelismError(f"the new parallelism must be at least 1, got {parallelism}")
    if max_parallelism is not None and not 1 <= max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise ParallelismError(
            f"the max parallelism must be between 1 and {UPPER_BOUND_MAX_PARALLELISM}, got "
            f"{max_parallelism}")
    named = dict(operator_parallelism or {})
    unknown = sorted(set(named) - {op.uid for op in metadata.operators})
    if unknown:
        raise ParallelismError(f"no operator {unknown[0]!r} in this checkpoint")
    highest = max((op.max_parallelism for op in metadata.operators), default=1)
    out: dict[str, OperatorTarget] = {}
    for op in metadata.operators:
        new_max = op.max_parallelism if max_parallelism is None else max_parallelism
        if op.uid in named:
            n = named[op.uid]
            if not 1 <= n <= new_max:
                which = "new " if new_max != op.max_parallelism else ""
                raise ParallelismError(
                    f"operator {op.identity.label}: parallelism {n} is outside 1 to its "
                    f"{which}max parallelism ({new_max})")
            out[op.uid] = OperatorTarget(n, new_max, OPERATOR_PARALLELISM)
        elif op.max_parallelism < highest and (op.max_parallelism < parallelism
                                               or max_parallelism is not None):
            out[op.uid] = OperatorTarget(op.parallelism, op.max_parallelism, KEPT)
        elif parallelism > new_max:
            raise _too_high(op, parallelism, new_max, max_parallelism is not None, rehashable)
        else:
            check_rescale(op, parallelism, new_max)
            out[op.uid] = OperatorTarget(parallelism, new_max)
    return out


def _too_high(op: OperatorMetadata, parallelism: int, new_max: int, new: bool,
              rehashable: Callable[[OperatorMetadata], bool] | None) -> ParallelismError:
    """``op`` cannot run at ``parallelism`` > ``new_max``: what can be given instead."""
    where = (f"operator {op.identity.label} cannot be restored at parallelism {parallelism}: "
             f"{'the new' if new else 'its'} maximum parallelism ({new_max}) is lower than the "
             f"parallelism")
    advice = [f"a parallelism of at most {new_max}"]
    if rehashable is None or rehashable(op):
        advice.append(f"--max-parallelism {parallelism} or more (keys are re-hashed)")
    return ParallelismError(f"{where}. Give " + ", or ".join(advice) + ".")


def plan_rescale(metadata: CheckpointMetadata, parallelism: int,
                 max_parallelism: int | None = None, *,
                 rehashed: Rehashed | None = None,
                 operator_parallelism: Mapping[str, int] | None = None,
                 rehashable: Callable[[OperatorMetadata], bool] | None = None) -> RescalePlan:
    """Plan restoring every operator of ``metadata`` at ``parallelism``.

    ``max_parallelism``: the new max parallelism (``None``: unchanged). Which operators take
    them, keep their own or have one given in ``operator_parallelism`` (uid -> parallelism):
    :func:`rescale_targets`. Where an operator's new max parallelism differs from its own,
    ``rehashed`` must give that operator's keyed entries per (old subtask, new key group) for
    every keyed state (the local and Spark engines count them by hashing the keys).
    """
    targets = rescale_targets(metadata, parallelism, max_parallelism, operator_parallelism,
                              rehashable=rehashable)
    sizes = {f.path: f.size for f in metadata.files}
    extent = file_extents(metadata)
    plans = []
    for op in metadata.operators:
        target = targets[op.uid]
        plan = _plan_operator(op, target.parallelism, target.max_parallelism, sizes, extent,
                              rehashed or {})
        plans.append(replace(plan, parallelism_from=target.source))
    return RescalePlan(parallelism, max_parallelism, tuple(plans))


def intersect_handle(handle: KeyedStateHandle, kg: KeyGroupRange) -> KeyedStateHandle | None:
    """``KeyGroupsStateHandle.getIntersection`` (reference §4.2); ``None`` when empty."""
    start = max(handle.key_group_range.start, kg.start)
    end = min(handle.key_group_range.end, kg.end)
    if start > end:
        return None
    return KeyedStateHandle(handle.state, handle.file, KeyGroupRange(start, end),
                            tuple(r for r in handle.rows if start <= r.key_group <= end))


@dataclass(frozen=True)
class _Segments:
    """One old subtask's elements of one operator state: ranges of one or more files."""

    name: str
    mode: OperatorStateMode
    handles: tuple[OperatorStateHandle, ...]

    def __len__(self) -> int:
        return sum(h.element_count for h in self.handles)

    def cut(self, start: int, stop: int) -> _Segments:
        out, offset = [], 0
        for h in self.handles:
            lo, hi = max(start - offset, 0), min(stop - offset, h.element_count)
            if lo < hi:
                out.append(replace(h, first_element=h.first_element + lo, element_count=hi - lo))
            offset += h.element_count
        if not out and self.handles:  # Flink keeps an empty chunk: an empty range
            out.append(replace(self.handles[0], element_count=0))
        return _Segments(self.name, self.mode, tuple(out))


def _plan_operator(op: OperatorMetadata, p: int, new_max: int, sizes: Mapping[str, int],
                   extent: Mapping[str, int], rehashed: Rehashed) -> OperatorPlan:
    old = sorted(op.subtasks, key=lambda s: s.index)
    keyed_states = [s for s in op.states if s.scope == "keyed"]
    kinds = {s.name: s for s in op.states}
    ranges = ([compute_key_group_range_for_operator_index(new_max, p, i) for i in range(p)]
              if op.key_type is not None or any(st.key_group_range for st in old) else None)
    shares: list[dict[str, list[int]]] = [defaultdict(lambda: [0, 0]) for _ in range(p)]
    moved = [0] * p
    keyed: list[list[KeyedStateHandle]] = [[] for _ in range(p)]

    if new_max == op.max_parallelism or ranges is None:  # (no keyed state: nothing to hash)
        for i in range(p):
            if p == len(old):
                picked = list(old[i].keyed)  # unchanged parallelism: handles as they are
            elif ranges is None:
                picked = []
            else:
                picked = [h2 for st in old for h in st.keyed
                          if (h2 := intersect_handle(h, ranges[i])) is not None]
            keyed[i] = picked
            sources = {h.file: st.index for st in old for h in st.keyed}
            for h in picked:
                rows = sum(r.row_count for r in h.rows)
                size = share_of_file(sizes.get(h.file, 0), rows, extent.get(h.file, 0))
                share = shares[i][h.state]
                share[0] += rows
                share[1] += size
                if sources.get(h.file, i) != i:
                    moved[i] += size
    else:
        assert ranges is not None
        owner = {}
        for i, kg in enumerate(ranges):
            for group in range(kg.start, kg.end + 1):
                owner[group] = i
        for state in keyed_states:
            counts = rehashed.get((op.uid, state.name))
            if counts is None:
                raise ParallelismError(
                    f"operator {op.uid!r}, state {state.name!r}: a max-parallelism change "
                    f"needs the entries per new key group (read the keys to plan it)")
            per_old = _old_state_bytes(op, state.name, sizes, extent)
            old_entries: dict[int, int] = defaultdict(int)
            for (old_index, _), n in counts.items():
                old_entries[old_index] += n
            for (old_index, group), n in counts.items():
                if group not in owner:
                    raise ParallelismError(f"key group {group} is outside [0, {new_max})")
                i = owner[group]
                size = share_of_file(per_old.get(old_index, 0), n, old_entries[old_index])
                share = shares[i][state.name]
                share[0] += n
                share[1] += size
                if old_index != i:
                    moved[i] += size

    pieces = [[_Segments(name, handles[0].mode, tuple(handles))
               for name, handles in _by_name(st.operator).items()] for st in old]
    assigned = assign_operator_state(pieces, p, length=len,
                                     cut=lambda seg, a, b: seg.cut(a, b))
    union_seen: set[tuple[str, int, int]] = set()
    union_elements = 0
    operator: list[list[OperatorStateHandle]] = [[] for _ in range(p)]
    for i, located in enumerate(assigned):
        union_here: set[tuple[str, str, int, int]] = set()
        for old_index, seg in located:
            for oh in seg.handles:
                if oh.mode is OperatorStateMode.UNION:
                    # a range several old subtasks reference (an earlier rescale gave each the
                    # same union list) is restored once: it is one list, not one per subtask
                    ident = (oh.state, oh.file, oh.first_element, oh.element_count)
                    if ident in union_here:
                        continue
                    union_here.add(ident)
                operator[i].append(oh)
                size = share_of_file(sizes.get(oh.file, 0), oh.element_count,
                                     extent.get(oh.file, 0))
                share = shares[i][oh.state]
                share[0] += oh.element_count
                share[1] += size
                if old_index != i:
                    moved[i] += size
                key = (oh.file, oh.first_element, oh.element_count)
                if oh.mode is OperatorStateMode.UNION and key not in union_seen:
                    union_seen.add(key)
                    union_elements += oh.element_count

    subtasks = []
    for i in range(p):
        states = tuple(StateShare(name, kinds[name].scope, n, b)
                       for name, (n, b) in sorted(shares[i].items()))
        subtasks.append(SubtaskPlan(
            i, None if ranges is None else ranges[i],
            tuple(keyed[i]), tuple(operator[i]), states, sum(s.bytes for s in states),
            moved[i]))
    return OperatorPlan(op.uid, op.name, len(old), p, op.max_parallelism, new_max,
                        tuple(subtasks), union_elements, op.identity)


def _by_name(handles: Sequence[OperatorStateHandle]) -> dict[str, list[OperatorStateHandle]]:
    out: dict[str, list[OperatorStateHandle]] = {}
    for h in handles:
        out.setdefault(h.state, []).append(h)
    return out


def _old_state_bytes(op: OperatorMetadata, state: str, sizes: Mapping[str, int],
                     extent: Mapping[str, int]) -> dict[int, int]:
    out: dict[int, int] = defaultdict(int)
    for st in op.subtasks:
        for h in st.keyed:
            if h.state == state:
                rows = sum(r.row_count for r in h.rows)
                out[st.index] += share_of_file(sizes.get(h.file, 0), rows, extent.get(h.file, 0))
    return out


def files_of(metadata: CheckpointMetadata) -> tuple[FileInfo, ...]:
    """The files of ``metadata`` that some handle references, in the metadata's order."""
    used = {h.file for op in metadata.operators for st in op.subtasks for h in st.keyed}
    used.update(h.file for op in metadata.operators for st in op.subtasks for h in st.operator)
    return tuple(f for f in metadata.files if f.path in used)
