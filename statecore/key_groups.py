"""Key groups: Flink-identical assignment of keys to key groups and key groups to subtasks.

Port of ``KeyGroupRangeAssignment`` and ``KeyGroupRange``
(``flink-runtime/.../runtime/state/``), reference §1.2. The arithmetic is Flink's exactly; the
one deliberate difference is validation: where Flink returns a value for an input outside its
documented bounds (an operator index >= parallelism, a max parallelism of 0 or above 32768 in
``assign_to_key_group``, anything in ``compute_operator_index_for_key_group``), statectl raises
:class:`~statecore.errors.InvalidArgumentError` instead of producing a key group that no
subtask owns.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from statecore.errors import InvalidArgumentError, KeyGroupError, ParallelismError
from statecore.hashing import murmur_hash, round_up_to_power_of_two
from statecore.serializers import TypeSerializer, resolve_type

__all__ = [
    "DEFAULT_LOWER_BOUND_MAX_PARALLELISM",
    "UPPER_BOUND_MAX_PARALLELISM",
    "KeyGroupRange",
    "assign_key_to_parallel_operator",
    "assign_to_key_group",
    "check_parallelism_preconditions",
    "compute_default_max_parallelism",
    "compute_key_group_for_key_hash",
    "compute_key_group_range_for_operator_index",
    "compute_operator_index_for_key_group",
]

#: ``KeyGroupRangeAssignment.DEFAULT_LOWER_BOUND_MAX_PARALLELISM`` (1 << 7).
DEFAULT_LOWER_BOUND_MAX_PARALLELISM = 1 << 7
#: ``Transformation.UPPER_BOUND_MAX_PARALLELISM`` (1 << 15), inclusive.
UPPER_BOUND_MAX_PARALLELISM = 1 << 15


@dataclass(frozen=True, slots=True)
class KeyGroupRange:
    """Inclusive range ``[start, end]`` of key groups; port of Flink's ``KeyGroupRange``.

    Flink represents the empty range as ``EMPTY_KEY_GROUP_RANGE = (0, -1)``; so does this class
    (``KeyGroupRange.empty()``), and ``end == start - 1`` is the only empty shape accepted.
    """

    start: int
    end: int

    def __post_init__(self) -> None:
        if self.start < 0:
            raise InvalidArgumentError(f"key group range start must be >= 0, got {self.start}")
        if self.end < self.start - 1:
            raise InvalidArgumentError(f"key group range end {self.end} < start {self.start} - 1")

    @classmethod
    def empty(cls) -> KeyGroupRange:
        return cls(0, -1)

    @classmethod
    def of(cls, start: int, end: int) -> KeyGroupRange:
        return cls(start, end)

    @property
    def number_of_key_groups(self) -> int:
        return self.end - self.start + 1

    def __len__(self) -> int:
        return self.number_of_key_groups

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.start, self.end + 1))

    def __contains__(self, key_group: object) -> bool:
        return isinstance(key_group, int) and self.start <= key_group <= self.end

    def intersection(self, other: KeyGroupRange) -> KeyGroupRange:
        """Port of ``KeyGroupRange.getIntersection``: the empty range when they do not meet."""
        start = max(self.start, other.start)
        end = min(self.end, other.end)
        return KeyGroupRange(start, end) if start <= end else KeyGroupRange.empty()

    def index_of(self, key_group: int) -> int:
        """Offset of ``key_group`` within this range; :class:`KeyGroupError` if outside."""
        if not self.start <= key_group <= self.end:
            raise KeyGroupError(f"key group {key_group} is not in {self}")
        return key_group - self.start

    def __str__(self) -> str:
        return f"KeyGroupRange{{startKeyGroup={self.start}, endKeyGroup={self.end}}}"


def check_parallelism_preconditions(parallelism: int) -> None:
    """Port of ``checkParallelismPreconditions``: ``0 < parallelism <= 32768``."""
    if not 0 < parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise ParallelismError(f"Operator parallelism not within bounds: {parallelism}")


def _check_max_parallelism(max_parallelism: int) -> None:
    if not 0 < max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise ParallelismError(
            "Maximum parallelism must be between 1 and "
            f"{UPPER_BOUND_MAX_PARALLELISM}. Found: {max_parallelism}"
        )


def compute_key_group_for_key_hash(key_hash: int, max_parallelism: int) -> int:
    """Port of ``computeKeyGroupForKeyHash``: ``murmur_hash(key_hash) % max_parallelism``.

    Precondition ``0 < max_parallelism <= 32768`` (Flink does not check it; statectl does).
    """
    _check_max_parallelism(max_parallelism)
    return murmur_hash(key_hash) % max_parallelism


def assign_to_key_group(
    key: Any, max_parallelism: int, key_type: str | TypeSerializer[Any] | None = None
) -> int:
    """Port of ``assignToKeyGroup``: the key group of ``key`` for ``max_parallelism``.

    ``key_type`` names the Java type whose ``hashCode`` applies (``"string"``, ``"int32"``,
    ``"int64"``, ``"tuple<string,int64>"``, ... or a serializer); without it the type is
    inferred from the Python value (``int`` as ``int32`` when it fits, else ``int64``), which
    is only safe when the declared Flink type is known to match. ``None`` keys are refused
    with Flink's message ("Assigned key must not be null!").
    """
    if key is None:
        raise InvalidArgumentError("Assigned key must not be null!")
    serializer = resolve_type(key_type, key)
    return compute_key_group_for_key_hash(serializer.java_hash(key), max_parallelism)


def compute_operator_index_for_key_group(
    max_parallelism: int, parallelism: int, key_group: int
) -> int:
    """Port of ``computeOperatorIndexForKeyGroup``: ``key_group * parallelism // max_parallelism``.

    Preconditions (checked here, not by Flink): ``0 < parallelism <= max_parallelism <= 32768``
    and ``0 <= key_group < max_parallelism``.
    """
    _check_parallelisms(max_parallelism, parallelism)
    if not 0 <= key_group < max_parallelism:
        raise InvalidArgumentError(
            f"key group {key_group} is outside [0, {max_parallelism}) for max parallelism "
            f"{max_parallelism}"
        )
    return key_group * parallelism // max_parallelism


def assign_key_to_parallel_operator(
    key: Any,
    max_parallelism: int,
    parallelism: int,
    key_type: str | TypeSerializer[Any] | None = None,
) -> int:
    """Port of ``assignKeyToParallelOperator`` (what ``KeyGroupStreamPartitioner`` uses)."""
    key_group = assign_to_key_group(key, max_parallelism, key_type)
    return compute_operator_index_for_key_group(max_parallelism, parallelism, key_group)


def compute_key_group_range_for_operator_index(
    max_parallelism: int, parallelism: int, operator_index: int
) -> KeyGroupRange:
    """Port of ``computeKeyGroupRangeForOperatorIndex``: the inclusive range subtask i owns.

    ``start = ceil(i * M / p)``, ``end = floor(((i + 1) * M - 1) / p)``. Preconditions:
    ``0 < parallelism <= max_parallelism <= 32768`` (Flink's checks and messages) and
    ``0 <= operator_index < parallelism`` (statectl's; Flink returns ranges beyond M).
    """
    _check_parallelisms(max_parallelism, parallelism)
    if not 0 <= operator_index < parallelism:
        raise InvalidArgumentError(
            f"operator index {operator_index} is outside [0, {parallelism}) "
            f"for parallelism {parallelism}"
        )
    start = (operator_index * max_parallelism + parallelism - 1) // parallelism
    end = ((operator_index + 1) * max_parallelism - 1) // parallelism
    return KeyGroupRange(start, end)


def compute_default_max_parallelism(parallelism: int) -> int:
    """Port of ``computeDefaultMaxParallelism``.

    ``min(max(round_up_to_power_of_two(p + p // 2), 128), 32768)`` for ``0 < p <= 32768``.
    """
    check_parallelism_preconditions(parallelism)
    return min(
        max(round_up_to_power_of_two(parallelism + parallelism // 2),
            DEFAULT_LOWER_BOUND_MAX_PARALLELISM),
        UPPER_BOUND_MAX_PARALLELISM,
    )


def _check_parallelisms(max_parallelism: int, parallelism: int) -> None:
    check_parallelism_preconditions(parallelism)
    check_parallelism_preconditions(max_parallelism)
    if max_parallelism < parallelism:
        raise ParallelismError("Maximum parallelism must not be smaller than parallelism.")
