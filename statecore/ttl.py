"""State time-to-live: configuration, the expiry rule and the access semantics of Flink's TTL.

Port of ``StateTtlConfig`` and ``flink-runtime/.../runtime/state/ttl/`` (``TtlValue``,
``TtlUtils``, ``AbstractTtlDecorator``, ``TtlIncrementalCleanup``,
``TtlStateSnapshotTransformer``), reference §9. Time is processing time in milliseconds from an
injectable clock (a zero-argument callable; :class:`ManualClock` for tests).

A state with TTL stores :class:`TtlValue` ``(user_value, last_access_timestamp)``: the whole
value for value, reducing and aggregating state, each element for list state and each value for
map state (user keys are not wrapped), exactly as Flink lays them out (§9.2).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Generic, NamedTuple, TypeVar

from statecore.errors import InvalidArgumentError

__all__ = [
    "DEFAULT_INCREMENTAL_CLEANUP",
    "LONG_MAX",
    "Clock",
    "IncrementalCleanup",
    "ManualClock",
    "StateVisibility",
    "TtlConfig",
    "TtlValue",
    "UpdateType",
    "expired",
    "system_clock",
]

T = TypeVar("T")

#: Java ``Long.MAX_VALUE``.
LONG_MAX = (1 << 63) - 1

Clock = Callable[[], int]


def system_clock() -> int:
    """Processing time in milliseconds (Flink's default ``System.currentTimeMillis``)."""
    return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that only moves when told to (tests, replays)."""

    def __init__(self, now: int = 0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, millis: int) -> int:
        self.now += millis
        return self.now


class UpdateType(Enum):
    """When the last-access timestamp is refreshed (``StateTtlConfig.UpdateType``)."""

    ON_CREATE_AND_WRITE = "on_create_and_write"
    ON_READ_AND_WRITE = "on_read_and_write"


class StateVisibility(Enum):
    """Whether a read may return an expired value not yet cleaned up (§9.1)."""

    NEVER_RETURN_EXPIRED = "never_return_expired"
    RETURN_EXPIRED_IF_NOT_CLEANED_UP = "return_expired_if_not_cleaned_up"


@dataclass(frozen=True, slots=True)
class IncrementalCleanup:
    """``cleanupIncrementally(cleanupSize, runCleanupForEveryRecord)`` (§9.4); size > 0."""

    cleanup_size: int = 5
    run_for_every_record: bool = False

    def __post_init__(self) -> None:
        if self.cleanup_size <= 0:
            raise InvalidArgumentError(
                f"Number of incrementally cleaned up state entries should be positive, "
                f"got {self.cleanup_size}")


#: ``DEFAULT_INCREMENTAL_CLEANUP_STRATEGY = (5, false)``.
DEFAULT_INCREMENTAL_CLEANUP = IncrementalCleanup(5, False)


@dataclass(frozen=True, slots=True)
class TtlConfig:
    """Port of ``StateTtlConfig`` (processing time only, as in Flink).

    ``ttl`` is in milliseconds and must be positive ("TTL is expected to be positive.").
    ``cleanup_full_snapshot`` drops expired entries while a full snapshot is written (§9.5).
    ``incremental_cleanup`` is the explicit strategy; without one, heap state still cleans
    incrementally with (5, false) unless ``cleanup_in_background`` is off (§9.1).
    """

    ttl: int
    update_type: UpdateType = UpdateType.ON_CREATE_AND_WRITE
    visibility: StateVisibility = StateVisibility.NEVER_RETURN_EXPIRED
    cleanup_full_snapshot: bool = False
    incremental_cleanup: IncrementalCleanup | None = None
    cleanup_in_background: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.ttl, int) or isinstance(self.ttl, bool) or self.ttl <= 0:
            raise InvalidArgumentError("TTL is expected to be positive.")

    @property
    def effective_incremental_cleanup(self) -> IncrementalCleanup | None:
        """Port of ``getIncrementalCleanupStrategy``.

        The explicit strategy, else the default when cleaning in background, else none.
        """
        if self.incremental_cleanup is not None:
            return self.incremental_cleanup
        return DEFAULT_INCREMENTAL_CLEANUP if self.cleanup_in_background else None

    @property
    def update_on_read(self) -> bool:
        return self.update_type is UpdateType.ON_READ_AND_WRITE

    @property
    def return_expired(self) -> bool:
        return self.visibility is StateVisibility.RETURN_EXPIRED_IF_NOT_CLEANED_UP


class TtlValue(NamedTuple, Generic[T]):
    """Port of ``TtlValue``: a user value and its last access timestamp (immutable)."""

    user_value: T
    last_access_timestamp: int


def expired(timestamp: int, ttl: int, now: int) -> bool:
    """Port of ``TtlUtils.expired``: ``ts + ttl <= now``, without overflowing a Java long.

    ``ts + (ts > 0 ? min(ttl, Long.MAX - ts) : ttl) <= now`` (§9.2): a timestamp so large that
    adding the TTL would overflow expires at ``Long.MAX_VALUE``.
    """
    return timestamp + (min(ttl, LONG_MAX - timestamp) if timestamp > 0 else ttl) <= now


class TtlContext:
    """What the TTL-enabled states of one descriptor share: the config and the clock.

    Implements ``AbstractTtlDecorator``'s read rule (§9.3) and the per-kind
    ``getUnexpiredOrNull`` used by incremental and full-snapshot cleanup (§9.4, §9.5).
    """

    def __init__(self, config: TtlConfig, clock: Clock) -> None:
        self.config = config
        self.clock = clock

    def is_expired(self, value: TtlValue[Any], now: int | None = None) -> bool:
        return expired(value.last_access_timestamp, self.config.ttl,
                       self.clock() if now is None else now)

    def wrap(self, user_value: T) -> TtlValue[T]:
        """``wrapWithTs``: stamp a written value with the current time."""
        return TtlValue(user_value, self.clock())

    def get_with_check_and_update(
        self,
        stored: TtlValue[T] | None,
        update: Callable[[TtlValue[T]], None],
        clear: Callable[[], None],
    ) -> TtlValue[T] | None:
        """Port of ``getWrappedWithTtlCheckAndUpdate`` (§9.3).

        ``None`` stays ``None``. Expired: ``clear()``, then ``None`` unless the visibility
        returns expired values (then the expired value). Unexpired with ``on_read_and_write``:
        ``update`` with the value re-stamped now.
        """
        if stored is None:
            return None
        now = self.clock()
        if expired(stored.last_access_timestamp, self.config.ttl, now):
            clear()
            return stored if self.config.return_expired else None
        if self.config.update_on_read:
            update(TtlValue(stored.user_value, now))
        return stored

    def unexpired_value_or_none(self, stored: TtlValue[T] | None, now: int) -> TtlValue[T] | None:
        """Value, reducing and aggregating state: ``None`` if expired, else the same object."""
        if stored is None or expired(stored.last_access_timestamp, self.config.ttl, now):
            return None
        return stored

    def unexpired_list_or_none(
        self, stored: list[TtlValue[T]] | None, now: int, copy: Callable[[T], T]
    ) -> list[TtlValue[T]] | None:
        """List state's ``getUnexpiredOrNull`` (§9.4 table).

        The same list if empty or nothing expired; else a new list of copied unexpired
        elements; ``None`` if every element expired.
        """
        if not stored:
            return stored
        ttl = self.config.ttl
        live = [e for e in stored if not expired(e.last_access_timestamp, ttl, now)]
        if len(live) == len(stored):
            return stored
        if not live:
            return None
        return [TtlValue(copy(e.user_value), e.last_access_timestamp) for e in live]

    def unexpired_map_or_none(
        self, stored: dict[Any, TtlValue[T]] | None, now: int, copy: Callable[[T], T]
    ) -> dict[Any, TtlValue[T]] | None:
        """Map state's ``getUnexpiredOrNull`` (§9.4 table).

        The same dict if nothing expired (Flink compares sizes), a new dict of copied unexpired
        entries otherwise, ``None`` if all expired; an empty map is returned as is.
        """
        if not stored:
            return stored
        ttl = self.config.ttl
        live = {k: TtlValue(copy(v.user_value), v.last_access_timestamp)
                for k, v in stored.items() if not expired(v.last_access_timestamp, ttl, now)}
        if len(live) == len(stored):
            return stored
        return live or None

    def snapshot_list_filter(self, stored: list[TtlValue[T]], now: int) -> list[TtlValue[T]] | None:
        """Full-snapshot cleanup of a list (§5.7, §9.5, ``STOP_ON_FIRST_INCLUDED``).

        Drop the leading expired elements up to the first live one, then keep the rest of the
        list unchanged even if later elements expired; ``None`` when nothing remains.
        """
        ttl = self.config.ttl
        for i, element in enumerate(stored):
            if not expired(element.last_access_timestamp, ttl, now):
                return stored if i == 0 else stored[i:]
        return None
