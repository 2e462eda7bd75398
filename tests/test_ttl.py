"""State TTL against reference §9 (and §5.6 / §5.7 for the visitor and the snapshot rules).

Every expectation below is written from the reference, rule by rule, never read back from the
implementation; each assertion names its rule. The layout:

* configuration (§9.1) and the expiry formula (§9.2);
* the matrix: update type x visibility x cleanup strategy x state kind (x map kind where the
  cleanup allows it), a scripted timeline on a backend with a :class:`ManualClock`, split into
  three tests (reads and refresh, snapshot output, incremental cleanup of other keys);
* per-element timestamps of list and map state, and the reduce / aggregate functions (§9.3);
* full-snapshot cleanup with Flink's list and map rules (§9.5, §5.7);
* incremental cleanup granularity: whole chains, at most ``n`` empty positions per call, the
  visitor resuming where it stopped (§9.4, §5.6), and the nested map's batches.

Setup notes. ``max_parallelism = 1`` puts every key in key group 0, so one state map holds the
whole state. The copy-on-write map starts with 128 buckets and the default ``"fast"`` hash mode
hashes an ``int`` key to itself with the void namespace, so key ``k`` lives in bucket
``k & 127`` (each test that relies on it checks the map's layout first). Some cleanup tests
"plant" entries straight into the state table: they store exactly what the state itself stores
(§9.2: ``TtlValue(value, ts)``, a list of them, or a dict of them) without running the cleanup
callback, so the visitor starts from a known position.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import pytest

from statecore.copy_on_write_state_map import CopyOnWriteStateMap
from statecore.errors import InvalidArgumentError
from statecore.key_groups import assign_to_key_group
from statecore.keyed_backend import HeapKeyedStateBackend, MapKind
from statecore.keyed_state import (
    AggregatingState,
    KeyedState,
    ListState,
    MapState,
    ReducingState,
    StateDescriptor,
    StateKind,
    ValueState,
    aggregating_state,
    list_state,
    map_state,
    reducing_state,
    value_state,
)
from statecore.serializers import VOID_NAMESPACE
from statecore.ttl import (
    DEFAULT_INCREMENTAL_CLEANUP,
    LONG_MAX,
    IncrementalCleanup,
    ManualClock,
    StateVisibility,
    TtlConfig,
    TtlValue,
    UpdateType,
    expired,
)

TTL = 100
T0 = 1_000
NAME = "s"

ON_CREATE = UpdateType.ON_CREATE_AND_WRITE
ON_READ = UpdateType.ON_READ_AND_WRITE
NEVER = StateVisibility.NEVER_RETURN_EXPIRED
RETURN_EXPIRED = StateVisibility.RETURN_EXPIRED_IF_NOT_CLEANED_UP

KINDS = list(StateKind)
UPDATE_TYPES = [ON_CREATE, ON_READ]
VISIBILITIES = [NEVER, RETURN_EXPIRED]
MAP_KINDS: list[MapKind] = ["copy_on_write", "nested"]

#: Buckets of the copy-on-write map (Flink's DEFAULT_CAPACITY) and of its idle rehash table
#: (Flink's EMPTY_TABLE, length MINIMUM_CAPACITY >>> 1 = 2), §5.1 / §5.6.
BUCKETS = 128
IDLE_REHASH_TABLE_LENGTH = 2


# -- the five state kinds: how to write, read and recognise one value --------------------------


class SumAggregate:
    """Sum of ints; the result is a string so that it differs from the accumulator."""

    def create_accumulator(self) -> int:
        return 0

    def add(self, value: int, accumulator: int) -> int:
        return accumulator + value

    def get_result(self, accumulator: int) -> str:
        return f"sum={accumulator}"

    def merge(self, a: int, b: int) -> int:
        return a + b


def descriptor(kind: StateKind, config: TtlConfig | None, name: str = NAME) -> StateDescriptor:
    if kind is StateKind.VALUE:
        return value_state(name, ttl=config)
    if kind is StateKind.LIST:
        return list_state(name, ttl=config)
    if kind is StateKind.MAP:
        return map_state(name, "string", ttl=config)
    if kind is StateKind.REDUCING:
        return reducing_state(name, operator.add, ttl=config)
    return aggregating_state(name, SumAggregate(), ttl=config)


def write(kind: StateKind, state: KeyedState) -> None:
    """The scenario's one write: value "v", list element "a", map "k" -> "a", or 1 added."""
    if kind is StateKind.VALUE:
        cast(ValueState, state).update("v")
    elif kind is StateKind.LIST:
        cast(ListState, state).add("a")
    elif kind is StateKind.MAP:
        cast(MapState, state).put("k", "a")
    elif kind is StateKind.REDUCING:
        cast(ReducingState, state).add(1)
    else:
        cast(AggregatingState, state).add(1)


def read(kind: StateKind, state: KeyedState) -> Any:
    if kind is StateKind.VALUE:
        return cast(ValueState, state).value()
    if kind is StateKind.LIST:
        return cast(ListState, state).get()
    if kind is StateKind.MAP:
        return cast(MapState, state).get("k")
    if kind is StateKind.REDUCING:
        return cast(ReducingState, state).get()
    return cast(AggregatingState, state).get()


#: What ``read`` returns for the written value (live, or expired but returned).
WRITTEN_READ: dict[StateKind, Any] = {
    StateKind.VALUE: "v", StateKind.LIST: ["a"], StateKind.MAP: "a", StateKind.REDUCING: 1,
    StateKind.AGGREGATING: "sum=1"}
#: What ``read`` returns when there is nothing (Flink: null, an empty iterable for lists).
ABSENT_READ: dict[StateKind, Any] = {
    StateKind.VALUE: None, StateKind.LIST: [], StateKind.MAP: None, StateKind.REDUCING: None,
    StateKind.AGGREGATING: None}


def stored_form(kind: StateKind, ts: int) -> Any:
    """§9.2 layout of the written value stamped ``ts``: what the state map holds."""
    if kind is StateKind.LIST:
        return [TtlValue("a", ts)]  # each element wrapped
    if kind is StateKind.MAP:
        return {"k": TtlValue("a", ts)}  # each value wrapped, user keys not
    if kind is StateKind.VALUE:
        return TtlValue("v", ts)
    return TtlValue(1, ts)  # reducing: the reduced value; aggregating: the accumulator


# -- backends and what they physically hold ------------------------------------------------------


def make_backend(map_kind: MapKind = "copy_on_write",
                 ) -> tuple[HeapKeyedStateBackend[int], ManualClock]:
    clock = ManualClock(T0)
    return HeapKeyedStateBackend("int64", 1, map_kind=map_kind, clock=clock), clock


def stored(backend: HeapKeyedStateBackend[int], key: int, name: str = NAME) -> Any:
    return backend.table(name).get(key, VOID_NAMESPACE)


def present(backend: HeapKeyedStateBackend[int], name: str = NAME) -> dict[int, Any]:
    """Everything physically stored for the state: ``{key: stored value}``."""
    return {e.key: e.state for e in backend.table(name)}


def plant(backend: HeapKeyedStateBackend[int], key: int, value: Any, name: str = NAME) -> None:
    """Store ``value`` for ``key`` as the state would (§9.2 layout) without any TTL callback."""
    backend.table(name).put(key, VOID_NAMESPACE, value)


def snapshot_of(backend: HeapKeyedStateBackend[int], name: str = NAME) -> dict[int, Any]:
    """What ``backend.snapshot()`` writes for the state: ``{key: state}`` over key groups."""
    out: dict[int, Any] = {}
    for block in backend.snapshot():
        if block.state_name == name:
            for entry in block.entries:
                assert entry.key not in out
                out[entry.key] = entry.state
    return out


def chains(backend: HeapKeyedStateBackend[int], name: str = NAME) -> dict[int, set[int]]:
    """Bucket index -> keys of its chain, in the copy-on-write map of key group 0."""
    state_map = backend.table(name).map_for_key_group(0)
    assert isinstance(state_map, CopyOnWriteStateMap)
    layout = state_map.layout()
    assert not layout.rehashing and layout.primary_table_length == BUCKETS
    return {bucket: {e.key for e in entries} for bucket, entries in layout.primary_chains}


def test_setup_every_int_key_is_in_key_group_0_and_in_bucket_k_mod_128() -> None:
    # The premise of the layout-based tests: one key group (max parallelism 1, §1.2) and the
    # fast hash mode placing int key k in bucket k & 127 of the 128-bucket map.
    keys = [0, 1, 5, 10, 64, 100, 127, 128, 129, 256]
    assert {assign_to_key_group(k, 1, "int64") for k in keys} == {0}
    backend, _ = make_backend()
    backend.get_value_state(value_state(NAME, ttl=TtlConfig(TTL, cleanup_in_background=False)))
    for k in keys:
        plant(backend, k, TtlValue("v", T0))
    assert chains(backend) == {0: {0, 128, 256}, 1: {1, 129}, 5: {5}, 10: {10}, 64: {64},
                               100: {100}, 127: {127}}


# -- §9.1 configuration ----------------------------------------------------------------------


@pytest.mark.parametrize("ttl", [0, -1, -TTL, 1.5, "100", None])
def test_ttl_must_be_a_positive_int(ttl: Any) -> None:
    # §9.1 constructor check: ttl.toMillis() > 0, "TTL is expected to be positive."
    with pytest.raises(InvalidArgumentError, match=r"^TTL is expected to be positive\.$"):
        TtlConfig(ttl)


def test_smallest_ttl_is_accepted() -> None:
    assert TtlConfig(1).ttl == 1  # §9.1: any ttl > 0


def test_config_defaults_follow_the_builder() -> None:
    config = TtlConfig(TTL)
    # §9.1 builder defaults
    assert config.update_type is UpdateType.ON_CREATE_AND_WRITE
    assert config.visibility is StateVisibility.NEVER_RETURN_EXPIRED
    assert config.cleanup_in_background is True
    assert config.cleanup_full_snapshot is False  # no explicit strategies
    assert config.incremental_cleanup is None
    # §9.1: no explicit strategy + cleanup in background -> the default (5, false)
    assert config.effective_incremental_cleanup == IncrementalCleanup(5, False)
    assert DEFAULT_INCREMENTAL_CLEANUP == IncrementalCleanup(5, False)


@pytest.mark.parametrize("in_background", [True, False])
def test_explicit_incremental_strategy_wins(in_background: bool) -> None:
    explicit = IncrementalCleanup(3, True)
    config = TtlConfig(TTL, incremental_cleanup=explicit, cleanup_in_background=in_background)
    # §9.1 getIncrementalCleanupStrategy: the explicit strategy if one is set
    assert config.effective_incremental_cleanup == explicit


def test_no_background_cleanup_means_no_incremental_cleanup() -> None:
    # §9.1: no explicit strategy and disableCleanupInBackground -> no incremental cleanup
    assert TtlConfig(TTL, cleanup_in_background=False).effective_incremental_cleanup is None
    assert TtlConfig(TTL, cleanup_full_snapshot=True,
                     cleanup_in_background=False).effective_incremental_cleanup is None


@pytest.mark.parametrize("size", [0, -1, -5])
def test_incremental_cleanup_size_must_be_positive(size: int) -> None:
    # §9.1: cleanupIncrementally requires cleanupSize > 0
    with pytest.raises(InvalidArgumentError, match="should be positive"):
        IncrementalCleanup(size)


def test_incremental_cleanup_size_one_is_accepted() -> None:
    assert IncrementalCleanup(1, True) == IncrementalCleanup(cleanup_size=1,
                                                            run_for_every_record=True)


def test_default_config_cleans_five_entries_per_access_and_not_on_key_selection() -> None:
    # §9.1: heap TTL state cleans incrementally by default with (5, false); §9.4 each access
    # visits chains until 5 entries are counted; run_for_every_record=false -> key selection
    # alone cleans nothing.
    backend, clock = make_backend()
    state = backend.get_value_state(value_state(NAME, ttl=TtlConfig(TTL)))
    for k in range(7):  # buckets 0..6, chains of one entry
        plant(backend, k, TtlValue("v", T0))
    clock.now = T0 + TTL  # all expired (§9.2)
    for _ in range(3):
        backend.set_current_key(64)
    assert set(present(backend)) == set(range(7))  # no cleanup on key selection
    assert state.value() is None  # one access of the state (key 64 has no value)
    assert set(present(backend)) == {5, 6}  # buckets 0..4 visited: 5 entries counted


# -- §9.2 expiry -----------------------------------------------------------------------------

# (timestamp, ttl, now, expired?, why), all from ts + (ts > 0 ? min(ttl, MAX - ts) : ttl) <= now
EXPIRY_CASES: list[tuple[int, int, int, bool, str]] = [
    (T0, TTL, T0 + TTL - 1, False, "ts + ttl > now"),
    (T0, TTL, T0 + TTL, True, "bound inclusive: ts + ttl == now is expired"),
    (T0, TTL, T0 + TTL + 1, True, "ts + ttl < now"),
    (T0, TTL, 0, False, "now before ts"),
    (1, 1, 2, True, "smallest positive ts and ttl"),
    (1, 1, 1, False, "smallest positive ts and ttl, one ms early"),
    (0, TTL, TTL, True, "ts <= 0 branch: 0 + ttl <= now"),
    (0, TTL, TTL - 1, False, "ts <= 0 branch: 0 + ttl > now"),
    (-50, TTL, 50, True, "ts <= 0 branch: negative ts, -50 + 100 <= 50"),
    (-50, TTL, 49, False, "ts <= 0 branch: negative ts, -50 + 100 > 49"),
    (0, LONG_MAX, LONG_MAX, True, "ts <= 0 branch: ttl is not clamped"),
    (-1, LONG_MAX, LONG_MAX - 1, True, "ts <= 0 branch: -1 + MAX = MAX - 1 <= now"),
    (-1, LONG_MAX, LONG_MAX - 2, False, "ts <= 0 branch: -1 + MAX = MAX - 1 > now"),
    (LONG_MAX - 1, 10, LONG_MAX, True, "min(10, MAX - ts) = 1: expires exactly at MAX"),
    (LONG_MAX - 1, 10, LONG_MAX - 1, False, "min(10, 1) = 1: MAX > MAX - 1"),
    (LONG_MAX - 5, 10, LONG_MAX, True, "clamped to MAX, not MAX + 5 (no overflow past MAX)"),
    (LONG_MAX - 5, 10, LONG_MAX - 1, False, "clamped sum MAX > now; a wrapped sum would be < 0"),
    (LONG_MAX - 5, 5, LONG_MAX, True, "ttl == MAX - ts: no clamping needed, sum is MAX"),
    (LONG_MAX - 5, 4, LONG_MAX - 1, True, "ttl < MAX - ts: plain sum MAX - 1 <= now"),
    (LONG_MAX, 1, LONG_MAX, True, "ts == MAX: min(ttl, 0) = 0, ts <= now"),
    (LONG_MAX, 1, LONG_MAX - 1, False, "ts == MAX: ts > now"),
    (LONG_MAX // 2 + 1, LONG_MAX, LONG_MAX, True, "huge ttl clamped to MAX - ts"),
    (LONG_MAX // 2 + 1, LONG_MAX, LONG_MAX - 1, False, "huge ttl: a wrapped sum would expire"),
]


@pytest.mark.parametrize(("ts", "ttl", "now", "want", "why"), EXPIRY_CASES,
                         ids=[c[4] for c in EXPIRY_CASES])
def test_expired_follows_ttlutils_formula(ts: int, ttl: int, now: int, want: bool,
                                          why: str) -> None:
    # §9.2 TtlUtils.expired: ts + (ts > 0 ? min(ttl, Long.MAX - ts) : ttl) <= now
    assert expired(ts, ttl, now) is want, why


def test_expiry_sum_never_exceeds_long_max() -> None:
    # §9.2 "overflow is avoided": for ts > 0 the expiry instant ts + min(ttl, MAX - ts) is at
    # most MAX, so a value stamped near MAX is live just before MAX and expired at MAX.
    for ts in (LONG_MAX - 1_000, LONG_MAX - 10, LONG_MAX - 1, LONG_MAX):
        for ttl in (1, 10, 1_000_000, LONG_MAX):
            expiry = ts + min(ttl, LONG_MAX - ts)
            assert expiry <= LONG_MAX
            assert expired(ts, ttl, expiry) is True
            assert expired(ts, ttl, expiry - 1) is False


# -- the matrix: update type x visibility x cleanup strategy x state kind ------------------------


@dataclass(frozen=True)
class Strategy:
    """One cleanup strategy of the matrix, as a TtlConfig factory."""

    name: str
    full_snapshot: bool = False
    incremental: IncrementalCleanup | None = None

    def config(self, update_type: UpdateType, visibility: StateVisibility) -> TtlConfig:
        # Background cleanup is off unless the strategy is incremental, so each strategy is
        # alone (§9.1: otherwise the default (5, false) would also run).
        return TtlConfig(TTL, update_type, visibility, cleanup_full_snapshot=self.full_snapshot,
                         incremental_cleanup=self.incremental,
                         cleanup_in_background=self.incremental is not None)


CLEANUP_SIZE = 2
NO_CLEANUP = Strategy("none")
INCREMENTAL = Strategy("incremental", incremental=IncrementalCleanup(CLEANUP_SIZE, False))
INCREMENTAL_EVERY_RECORD = Strategy("incremental_every_record",
                                    incremental=IncrementalCleanup(CLEANUP_SIZE, True))
FULL_SNAPSHOT = Strategy("full_snapshot", full_snapshot=True)
STRATEGIES = [NO_CLEANUP, INCREMENTAL, INCREMENTAL_EVERY_RECORD, FULL_SNAPSHOT]

#: The scenario's key (bucket 127) and the other keys (buckets 1..8, chains of one entry).
KEY = 127
OTHERS = list(range(1, 9))
#: A key that never has state: accessing the state under it only runs the cleanup callback.
IDLE_KEY = 64

#: §5.6/§9.4: every access moves the visitor at least one position (or starts a new walk), so
#: two walks over the 128 buckets and the idle rehash table reach every entry; one more walk
#: as margin.
ENOUGH_ACCESSES = 3 * (BUCKETS + IDLE_REHASH_TABLE_LENGTH)

# The incremental visitor can not reach bucket 127 during the timeline below: after bucket 8,
# buckets 9..126 are empty and a visitor scans at most CLEANUP_SIZE empty positions per call,
# the first empty call stopping the run (§5.6, §9.4), so it takes >= 118 / 2 = 59 accesses;
# the timeline makes fewer than 30. So "expired but not cleaned up" is deterministic for KEY.

MATRIX = [
    pytest.param(kind, update_type, visibility, strategy, map_kind,
                 id=f"{kind.value}-{update_type.value}-{visibility.value}-{strategy.name}-"
                    f"{map_kind}")
    for kind in KINDS
    for update_type in UPDATE_TYPES
    for visibility in VISIBILITIES
    for strategy in STRATEGIES
    for map_kind in MAP_KINDS
    # The nested map has no buckets: its visitor walks insertion order in batches, so whether
    # it reaches KEY first depends on history; its cleanup is tested on its own further down.
    if not (map_kind == "nested" and strategy.incremental is not None)
]


@dataclass
class Scenario:
    backend: HeapKeyedStateBackend[int]
    clock: ManualClock
    kind: StateKind
    state: KeyedState

    def read(self, key: int) -> Any:
        self.backend.set_current_key(key)
        return read(self.kind, self.state)


def start_scenario(kind: StateKind, update_type: UpdateType, visibility: StateVisibility,
                   strategy: Strategy, map_kind: MapKind, key_written_at: int = T0) -> Scenario:
    """OTHERS written at T0, then KEY written at ``key_written_at``, all through the state."""
    backend, clock = make_backend(map_kind)
    state = backend.get_state(descriptor(kind, strategy.config(update_type, visibility)))
    for k in OTHERS:
        backend.set_current_key(k)
        write(kind, state)
    clock.now = key_written_at
    backend.set_current_key(KEY)
    write(kind, state)
    if map_kind == "copy_on_write":
        assert chains(backend) == {k: {k} for k in [*OTHERS, KEY]}  # layout premise
    return Scenario(backend, clock, kind, state)


def expected_timeline(update_type: UpdateType, visibility: StateVisibility,
                      ) -> list[tuple[int, str, int | None, str]]:
    """Reads of KEY (written at T0): (now, what the read returns, stamp stored after, rule).

    "written" is the written value, "absent" the kind's empty result; a stored stamp of None
    means the state is physically gone.
    """
    # §9.3: an expired value is cleared, then NeverReturnExpired -> null,
    # ReturnExpiredIfNotCleanedUp -> the expired value
    on_expiry = "written" if visibility is RETURN_EXPIRED else "absent"
    if update_type is ON_CREATE:
        return [
            (T0 + 60, "written", T0, "§9.2 live; §9.3 OnCreateAndWrite: a read keeps the stamp"),
            (T0 + TTL - 1, "written", T0, "§9.2 T0 + ttl > now: the last live millisecond"),
            (T0 + TTL, on_expiry, None, "§9.2 T0 + ttl <= now (inclusive): expired -> cleared"),
            (T0 + TTL + 1, "absent", None, "§9.3 cleared: nothing left, whatever the visibility"),
        ]
    refreshed = T0 + 60 + TTL - 1  # past T0 + TTL: alive only thanks to the first refresh
    return [
        (T0 + 60, "written", T0 + 60, "§9.3 OnReadAndWrite: a live read re-stamps with now"),
        (refreshed, "written", refreshed, "§9.2 (T0+60) + ttl > now: live, re-stamped again"),
        (refreshed + TTL, on_expiry, None, "§9.2 stamp + ttl <= now: expired -> cleared"),
        (refreshed + TTL + 1, "absent", None, "§9.3 cleared: nothing left, any visibility"),
    ]


@pytest.mark.parametrize(("kind", "update_type", "visibility", "strategy", "map_kind"), MATRIX)
def test_matrix_reads_refresh_and_expire(kind: StateKind, update_type: UpdateType,
                                         visibility: StateVisibility, strategy: Strategy,
                                         map_kind: MapKind) -> None:
    s = start_scenario(kind, update_type, visibility, strategy, map_kind)
    # §9.3: writes wrap with now; §9.2: the stored layout per kind
    assert stored(s.backend, KEY) == stored_form(kind, T0)
    results = {"written": WRITTEN_READ[kind], "absent": ABSENT_READ[kind]}
    for now, result, stamp, rule in expected_timeline(update_type, visibility):
        s.clock.now = now
        assert s.read(KEY) == results[result], f"read at {now}: {rule}"
        want_stored = None if stamp is None else stored_form(kind, stamp)
        assert stored(s.backend, KEY) == want_stored, f"stored after read at {now}: {rule}"


def expected_snapshot_keys(strategy: Strategy, present_keys: set[int],
                           stamps: dict[int, int], now: int) -> set[int]:
    if not strategy.full_snapshot:
        return present_keys  # §9.5 applies only with cleanupFullSnapshot
    # §9.5 filterOrTransform(v) = expired(v) ? null : v, time read at write time;
    # §9.2 expired: ts + ttl <= now (no overflow near these stamps)
    return {k for k in present_keys if not stamps[k] + TTL <= now}


@pytest.mark.parametrize(("kind", "update_type", "visibility", "strategy", "map_kind"), MATRIX)
def test_matrix_snapshot_output(kind: StateKind, update_type: UpdateType,
                                visibility: StateVisibility, strategy: Strategy,
                                map_kind: MapKind) -> None:
    s = start_scenario(kind, update_type, visibility, strategy, map_kind)
    s.clock.now = T0 + 60
    assert s.read(KEY) == WRITTEN_READ[kind]
    # §9.3: only OnReadAndWrite re-stamps KEY; OTHERS were never read
    stamps = {k: T0 for k in OTHERS} | {KEY: T0 + 60 if update_type is ON_READ else T0}
    s.clock.now = T0 + TTL  # OTHERS expired; KEY expired unless refreshed (§9.2)
    live_before = present(s.backend)
    # no access since anything expired, so no cleanup can have removed anything yet
    assert set(live_before) == {*OTHERS, KEY}

    written = snapshot_of(s.backend)

    want_keys = expected_snapshot_keys(strategy, set(live_before), stamps, T0 + TTL)
    assert set(written) == want_keys
    for k in want_keys:  # entries are written as stored (single elements: nothing to trim)
        assert written[k] == stored_form(kind, stamps[k])
    # §9.5: applied only while writing the snapshot, live state untouched
    assert present(s.backend) == live_before


@pytest.mark.parametrize(("kind", "update_type", "visibility", "strategy", "map_kind"), MATRIX)
def test_matrix_incremental_cleanup_of_other_keys(kind: StateKind, update_type: UpdateType,
                                                  visibility: StateVisibility,
                                                  strategy: Strategy, map_kind: MapKind) -> None:
    # KEY is written 50 ms later than OTHERS, so at T0 + TTL it is the one live entry.
    s = start_scenario(kind, update_type, visibility, strategy, map_kind,
                       key_written_at=T0 + 50)
    s.clock.now = T0 + TTL
    incremental = strategy.incremental
    every_record = incremental is not None and incremental.run_for_every_record

    def count_removals(step: Callable[[], None]) -> list[int]:
        removed = []
        for _ in range(ENOUGH_ACCESSES):
            before = len(s.backend.table(NAME))
            step()
            removed.append(before - len(s.backend.table(NAME)))
        return removed

    # Phase 1, key selection only. §9.4: with runCleanupForEveryRecord the cleanup also runs
    # on every key selection; otherwise key selection never cleans.
    on_selection = count_removals(lambda: s.backend.set_current_key(IDLE_KEY))
    if every_record:
        assert set(present(s.backend)) == {KEY}
    else:
        assert sum(on_selection) == 0
        assert set(present(s.backend)) == {*OTHERS, KEY}

    # Phase 2, state accesses under a key without state. §9.4: stateAccessed on every access.
    s.backend.set_current_key(IDLE_KEY)
    on_access = count_removals(lambda: read(kind, s.state))
    if incremental is None:
        # §9.1: no incremental cleanup; full-snapshot cleanup never touches live state (§9.5)
        assert set(present(s.backend)) == {*OTHERS, KEY}
    else:
        assert set(present(s.backend)) == {KEY}  # every expired entry of another key removed
        # §9.4: a run stops once cleanup_size entries are counted (chains of one entry here)
        assert max(on_selection + on_access) <= CLEANUP_SIZE
    # §9.4 getUnexpiredOrNull: a live value is the same object, never rewritten or removed
    assert stored(s.backend, KEY) == stored_form(kind, T0 + 50)


# -- §9.3 writes, per-element timestamps, reduce and aggregate -------------------------------


def background_off(update_type: UpdateType = ON_CREATE, visibility: StateVisibility = NEVER,
                   ) -> TtlConfig:
    """No incremental cleanup (§9.1), so reads alone decide what is removed."""
    return TtlConfig(TTL, update_type, visibility, cleanup_in_background=False)


@pytest.mark.parametrize("kind", [StateKind.VALUE, StateKind.REDUCING, StateKind.AGGREGATING])
@pytest.mark.parametrize("update_type", UPDATE_TYPES)
def test_a_write_re_stamps_the_whole_value(kind: StateKind, update_type: UpdateType) -> None:
    backend, clock = make_backend()
    state = backend.get_state(descriptor(kind, background_off(update_type)))
    backend.set_current_key(KEY)
    write(kind, state)
    clock.now = T0 + 60
    if kind is StateKind.VALUE:
        cast(ValueState, state).update("w")
    else:
        write(kind, state)
    # §9.3: writes always wrap with now, whatever the update type
    assert stored(backend, KEY).last_access_timestamp == T0 + 60
    clock.now = T0 + TTL  # expired for the first stamp, live for the second (§9.2)
    want = {StateKind.VALUE: "w", StateKind.REDUCING: 2, StateKind.AGGREGATING: "sum=2"}
    assert read(kind, state) == want[kind]


@pytest.mark.parametrize("map_kind", MAP_KINDS)
@pytest.mark.parametrize("visibility", VISIBILITIES)
@pytest.mark.parametrize("update_type", UPDATE_TYPES)
def test_list_elements_expire_individually(update_type: UpdateType, visibility: StateVisibility,
                                           map_kind: MapKind) -> None:
    backend, clock = make_backend(map_kind)
    state = backend.get_list_state(list_state(NAME, ttl=background_off(update_type, visibility)))
    backend.set_current_key(KEY)
    state.add("x")  # stamped T0
    clock.now = T0 + 50
    state.add("y")  # stamped T0 + 50: a later add does not re-stamp "x" (§9.2 per element)
    assert stored(backend, KEY) == [TtlValue("x", T0), TtlValue("y", T0 + 50)]

    clock.now = T0 + TTL  # "x" expired (inclusive bound), "y" live (§9.2)
    got = state.get()
    # §9.3 TtlListState.get: expired elements left out, or returned under
    # ReturnExpiredIfNotCleanedUp
    assert got == (["x", "y"] if visibility is RETURN_EXPIRED else ["y"])
    if update_type is ON_READ:
        # §9.3: OnReadAndWrite rewrites the list with the unexpired elements stamped now
        assert stored(backend, KEY) == [TtlValue("y", T0 + TTL)]
    else:
        # §9.3: one element still live -> no clearing, nothing rewritten
        assert stored(backend, KEY) == [TtlValue("x", T0), TtlValue("y", T0 + 50)]


@pytest.mark.parametrize("map_kind", MAP_KINDS)
@pytest.mark.parametrize("visibility", VISIBILITIES)
@pytest.mark.parametrize("update_type", UPDATE_TYPES)
def test_list_with_every_element_expired_is_cleared(update_type: UpdateType,
                                                    visibility: StateVisibility,
                                                    map_kind: MapKind) -> None:
    backend, clock = make_backend(map_kind)
    state = backend.get_list_state(list_state(NAME, ttl=background_off(update_type, visibility)))
    backend.set_current_key(KEY)
    state.add("x")
    clock.now = T0 + 50
    state.add("y")
    clock.now = T0 + 50 + TTL  # both expired (§9.2), none was read before
    # §9.3: the filtering iterator ends without a live element -> the state is cleared;
    # the expired elements are returned only under ReturnExpiredIfNotCleanedUp
    assert state.get() == (["x", "y"] if visibility is RETURN_EXPIRED else [])
    assert stored(backend, KEY) is None
    assert state.get() == []  # cleared: nothing left to return


@pytest.mark.parametrize("visibility", VISIBILITIES)
def test_list_read_and_write_refresh_keeps_elements_alive(visibility: StateVisibility) -> None:
    backend, clock = make_backend()
    state = backend.get_list_state(list_state(NAME, ttl=background_off(ON_READ, visibility)))
    backend.set_current_key(KEY)
    state.add_all(["x", "y"])  # both stamped T0
    clock.now = T0 + 30
    state.add("z")  # stamped T0 + 30
    clock.now = T0 + 60
    assert state.get() == ["x", "y", "z"]  # all live (§9.2)
    # §9.3: OnReadAndWrite rewrites the live elements stamped now
    assert stored(backend, KEY) == [TtlValue(v, T0 + 60) for v in "xyz"]
    clock.now = T0 + 60 + TTL - 1
    assert state.get() == ["x", "y", "z"]  # live thanks to the refresh; the original stamps
    # (T0, T0 + 30) would have expired by now
    assert stored(backend, KEY) == [TtlValue(v, T0 + 60 + TTL - 1) for v in "xyz"]


@pytest.mark.parametrize("map_kind", MAP_KINDS)
@pytest.mark.parametrize("visibility", VISIBILITIES)
@pytest.mark.parametrize("update_type", UPDATE_TYPES)
def test_map_values_expire_per_user_key(update_type: UpdateType, visibility: StateVisibility,
                                        map_kind: MapKind) -> None:
    backend, clock = make_backend(map_kind)
    state = backend.get_map_state(map_state(NAME, "string",
                                            ttl=background_off(update_type, visibility)))
    backend.set_current_key(KEY)
    state.put("a", "A")
    clock.now = T0 + 50
    state.put("b", "B")
    assert stored(backend, KEY) == {"a": TtlValue("A", T0), "b": TtlValue("B", T0 + 50)}

    clock.now = T0 + TTL  # "a" expired, "b" live (§9.2)
    # §9.3 per entry: expired -> remove(key), returned only under ReturnExpiredIfNotCleanedUp
    want = [("a", "A"), ("b", "B")] if visibility is RETURN_EXPIRED else [("b", "B")]
    assert sorted(state.items()) == want
    # §9.3: OnReadAndWrite re-stamps the live value read; the expired one is removed
    b_stamp = T0 + TTL if update_type is ON_READ else T0 + 50
    assert stored(backend, KEY) == {"b": TtlValue("B", b_stamp)}
    assert state.get("a") is None  # removed: nothing to return, whatever the visibility
    assert state.get("b") == "B"


@pytest.mark.parametrize("visibility", VISIBILITIES)
def test_map_get_of_an_expired_value(visibility: StateVisibility) -> None:
    backend, clock = make_backend()
    state = backend.get_map_state(map_state(NAME, "string", ttl=background_off(ON_CREATE,
                                                                              visibility)))
    backend.set_current_key(KEY)
    state.put("a", "A")
    clock.now = T0 + 50
    state.put("b", "B")
    clock.now = T0 + TTL
    # §9.3: expired -> remove(key); null or the expired value per visibility
    assert state.get("a") == ("A" if visibility is RETURN_EXPIRED else None)
    assert stored(backend, KEY) == {"b": TtlValue("B", T0 + 50)}
    clock.now = T0 + 50 + TTL
    assert state.get("b") == ("B" if visibility is RETURN_EXPIRED else None)
    # removing the last entry clears the whole state (HeapMapState.remove)
    assert stored(backend, KEY) is None


@pytest.mark.parametrize("visibility", VISIBILITIES)
def test_map_contains_follows_the_read_rule(visibility: StateVisibility) -> None:
    backend, clock = make_backend()
    state = backend.get_map_state(map_state(NAME, "string", ttl=background_off(ON_CREATE,
                                                                              visibility)))
    backend.set_current_key(KEY)
    state.put("a", "A")
    clock.now = T0 + 50
    state.put("b", "B")
    clock.now = T0 + TTL
    # TtlMapState.contains = getWrapped(key) != null (§9.3 getWrappedWithTtlCheckAndUpdate):
    # an expired-but-present entry is removed, and still reported under
    # ReturnExpiredIfNotCleanedUp
    assert state.contains("a") is (visibility is RETURN_EXPIRED)
    assert stored(backend, KEY) == {"b": TtlValue("B", T0 + 50)}
    assert state.contains("a") is False  # now cleaned up
    assert state.contains("b") is True
    assert state.contains("never") is False


@pytest.mark.parametrize("visibility", VISIBILITIES)
def test_map_is_empty_counts_expired_entries_not_cleaned_up(visibility: StateVisibility,
                                                            ) -> None:
    backend, clock = make_backend()
    state = backend.get_map_state(map_state(NAME, "string", ttl=background_off(ON_CREATE,
                                                                              visibility)))
    backend.set_current_key(KEY)
    assert state.is_empty() is True
    state.put("a", "A")
    clock.now = T0 + TTL  # "a" expired (§9.2)
    # Flink's TtlMapState.isEmpty delegates to the original map: expired entries still count
    assert state.is_empty() is False
    assert stored(backend, KEY) == {"a": TtlValue("A", T0)}  # isEmpty cleans nothing
    state.get("a")  # §9.3: the read removes the expired entry (the last one: state cleared)
    assert stored(backend, KEY) is None
    assert state.is_empty() is True


@pytest.mark.parametrize("update_type", UPDATE_TYPES)
def test_map_read_and_write_re_stamps_values_read(update_type: UpdateType) -> None:
    backend, clock = make_backend()
    state = backend.get_map_state(map_state(NAME, "string", ttl=background_off(update_type)))
    backend.set_current_key(KEY)
    state.put_all({"a": "A", "b": "B"})  # §9.3: putAll wraps each value with now
    assert stored(backend, KEY) == {"a": TtlValue("A", T0), "b": TtlValue("B", T0)}
    clock.now = T0 + 60
    assert state.get("a") == "A"
    # §9.3: only OnReadAndWrite re-stamps, and only the value read
    a_stamp = T0 + 60 if update_type is ON_READ else T0
    assert stored(backend, KEY) == {"a": TtlValue("A", a_stamp), "b": TtlValue("B", T0)}
    clock.now = T0 + TTL
    assert state.keys() == (["a"] if update_type is ON_READ else [])


#: (ms between the two adds, result of get): TtlReduceFunction / TtlAggregateFunction treat an
#: expired accumulated value as absent (§9.2 bound inclusive)
ACCUMULATION_TABLE = [(TTL - 1, "both_added"), (TTL, "expired_dropped")]


@pytest.mark.parametrize("visibility", VISIBILITIES)
@pytest.mark.parametrize(("gap", "case"), ACCUMULATION_TABLE)
@pytest.mark.parametrize("kind", [StateKind.REDUCING, StateKind.AGGREGATING])
def test_expired_accumulator_counts_as_absent_on_add(kind: StateKind, gap: int, case: str,
                                                     visibility: StateVisibility) -> None:
    backend, clock = make_backend()
    state = backend.get_state(descriptor(kind, background_off(ON_CREATE, visibility)))
    backend.set_current_key(KEY)
    add = cast(ReducingState | AggregatingState, state).add
    add(1)
    clock.now = T0 + gap
    add(5)  # whatever the visibility: add uses getUnexpired, never the expired value
    accumulated = 6 if case == "both_added" else 5
    assert stored(backend, KEY) == TtlValue(accumulated, T0 + gap)  # wrapped with now
    want = accumulated if kind is StateKind.REDUCING else f"sum={accumulated}"
    assert read(kind, state) == want


# -- §9.5 / §5.7 full-snapshot cleanup ---------------------------------------------------------


def full_snapshot_only() -> TtlConfig:
    return TtlConfig(TTL, cleanup_full_snapshot=True, cleanup_in_background=False)


def list_stamped(backend: HeapKeyedStateBackend[int], clock: ManualClock, state: ListState,
                 key: int, elements: list[tuple[str, int]]) -> None:
    """Add each element at its own time (the clock is set back as needed)."""
    backend.set_current_key(key)
    for value, ts in elements:
        clock.now = ts
        state.add(value)


# (elements with stamps, what the snapshot writes) at now = T0 + TTL, ttl 100: stamp T0 is
# expired, T0 + 50 live. §5.7 STOP_ON_FIRST_INCLUDED: drop leading expired elements up to the
# first live one, keep the rest unchanged even if expired; nothing left -> entry dropped.
LIST_SNAPSHOT_TABLE: list[tuple[list[tuple[str, int]], list[tuple[str, int]] | None]] = [
    ([("x", T0), ("y", T0 + 50), ("z", T0)], [("y", T0 + 50), ("z", T0)]),
    ([("x", T0), ("w", T0), ("y", T0 + 50), ("z", T0)], [("y", T0 + 50), ("z", T0)]),
    ([("y", T0 + 50), ("z", T0)], [("y", T0 + 50), ("z", T0)]),
    ([("y", T0 + 50), ("v", T0 + 60)], [("y", T0 + 50), ("v", T0 + 60)]),
    ([("x", T0), ("z", T0)], None),
    ([("x", T0)], None),
]


@pytest.mark.parametrize("map_kind", MAP_KINDS)
@pytest.mark.parametrize(("elements", "written"), LIST_SNAPSHOT_TABLE)
def test_full_snapshot_list_rule_stop_on_first_included(
        elements: list[tuple[str, int]], written: list[tuple[str, int]] | None,
        map_kind: MapKind) -> None:
    backend, clock = make_backend(map_kind)
    state = backend.get_list_state(list_state(NAME, ttl=full_snapshot_only()))
    list_stamped(backend, clock, state, KEY, elements)
    clock.now = T0 + TTL
    live_before = present(backend)

    snapshot = snapshot_of(backend)

    if written is None:
        assert KEY not in snapshot  # §5.7: an empty result gives null, the entry is dropped
    else:
        assert snapshot[KEY] == [TtlValue(v, ts) for v, ts in written]
    # §9.5: live state untouched
    assert present(backend) == live_before
    assert stored(backend, KEY) == [TtlValue(v, ts) for v, ts in elements]


def test_incremental_list_cleanup_drops_every_expired_element_unlike_the_snapshot() -> None:
    # §9.4 getUnexpiredOrNull for lists: a new list of the unexpired elements (all of them
    # filtered), in contrast to the snapshot's STOP_ON_FIRST_INCLUDED.
    backend, clock = make_backend()
    config = TtlConfig(TTL, incremental_cleanup=IncrementalCleanup(1, False))
    state = backend.get_list_state(list_state(NAME, ttl=config))
    plant(backend, 0, [TtlValue("x", T0), TtlValue("y", T0 + 50), TtlValue("z", T0)])
    clock.now = T0 + TTL
    backend.set_current_key(IDLE_KEY)
    assert state.get() == []  # one access: the visitor starts at bucket 0
    assert stored(backend, 0) == [TtlValue("y", T0 + 50)]


# ({user key: stamp}, what the snapshot writes) at now = T0 + TTL. §5.7: each value filtered
# individually; an empty result -> the entry is dropped.
MAP_SNAPSHOT_TABLE: list[tuple[dict[str, int], dict[str, int] | None]] = [
    ({"a": T0, "b": T0 + 50, "c": T0}, {"b": T0 + 50}),
    ({"b": T0 + 50, "d": T0 + 99}, {"b": T0 + 50, "d": T0 + 99}),
    ({"a": T0, "c": T0}, None),
]


@pytest.mark.parametrize("map_kind", MAP_KINDS)
@pytest.mark.parametrize(("entries", "written"), MAP_SNAPSHOT_TABLE)
def test_full_snapshot_map_values_filtered_individually(
        entries: dict[str, int], written: dict[str, int] | None, map_kind: MapKind) -> None:
    backend, clock = make_backend(map_kind)
    state = backend.get_map_state(map_state(NAME, "string", ttl=full_snapshot_only()))
    backend.set_current_key(KEY)
    for user_key, ts in entries.items():
        clock.now = ts
        state.put(user_key, user_key.upper())
    clock.now = T0 + TTL

    snapshot = snapshot_of(backend)

    if written is None:
        assert KEY not in snapshot  # §5.7: empty result -> null -> entry dropped
    else:
        assert snapshot[KEY] == {k: TtlValue(k.upper(), ts) for k, ts in written.items()}
    # §9.5: live state untouched
    assert stored(backend, KEY) == {k: TtlValue(k.upper(), ts) for k, ts in entries.items()}


@pytest.mark.parametrize("map_kind", MAP_KINDS)
@pytest.mark.parametrize(("kind", "empty"), [(StateKind.LIST, []), (StateKind.MAP, {})])
def test_full_snapshot_drops_an_empty_collection(kind: StateKind, empty: Any,
                                                 map_kind: MapKind) -> None:
    # §5.7: for list and map state "an empty result gives null, so the entry is dropped"; an
    # empty stored collection filters to an empty result. The state API never stores one,
    # so it is planted (a restored Flink checkpoint may hold one: Flink's map entries
    # iterator removes expired entries without clearing the emptied map).
    backend, _ = make_backend(map_kind)
    backend.get_state(descriptor(kind, full_snapshot_only()))
    plant(backend, KEY, empty)
    plant(backend, 1, stored_form(kind, T0 + 50))  # a live neighbour is written
    assert snapshot_of(backend) == {1: stored_form(kind, T0 + 50)}
    assert stored(backend, KEY) == empty  # §9.5: live state untouched


@pytest.mark.parametrize("map_kind", MAP_KINDS)
@pytest.mark.parametrize("kind", KINDS)
def test_full_snapshot_reads_the_time_when_it_is_written(kind: StateKind,
                                                         map_kind: MapKind) -> None:
    backend, clock = make_backend(map_kind)
    state = backend.get_state(descriptor(kind, full_snapshot_only()))
    backend.set_current_key(KEY)
    write(kind, state)
    clock.now = T0 + 50
    snapshot = backend.snapshot()  # taken while the value is live
    clock.now = T0 + TTL  # ... and written after it expired
    # §9.5: "the time is read per entry at write time"
    assert [e for block in snapshot for e in block.entries] == []
    assert stored(backend, KEY) == stored_form(kind, T0)  # live state untouched


@pytest.mark.parametrize("kind", KINDS)
def test_without_full_snapshot_cleanup_expired_entries_are_written(kind: StateKind) -> None:
    backend, clock = make_backend()
    state = backend.get_state(descriptor(kind, background_off()))
    backend.set_current_key(KEY)
    write(kind, state)
    clock.now = T0 + 10 * TTL
    # §9.5 is a strategy: without cleanupFullSnapshot the snapshot holds what is stored
    assert snapshot_of(backend) == {KEY: stored_form(kind, T0)}


# -- §9.4 / §5.6 incremental cleanup granularity -------------------------------------------------


def cleanup_backend(kind: StateKind, cleanup: IncrementalCleanup,
                    map_kind: MapKind = "copy_on_write",
                    ) -> tuple[HeapKeyedStateBackend[int], ManualClock, KeyedState]:
    backend, clock = make_backend(map_kind)
    config = TtlConfig(TTL, incremental_cleanup=cleanup)
    return backend, clock, backend.get_state(descriptor(kind, config))


def access(backend: HeapKeyedStateBackend[int], kind: StateKind, state: KeyedState) -> None:
    """One state access under IDLE_KEY (no state there): only the cleanup callback acts."""
    backend.set_current_key(IDLE_KEY)
    assert read(kind, state) == ABSENT_READ[kind]


@pytest.mark.parametrize("kind", KINDS)
def test_one_access_removes_a_whole_chain_even_past_cleanup_size(kind: StateKind) -> None:
    backend, clock, state = cleanup_backend(kind, IncrementalCleanup(1, False))
    for k in (0, 128, 256, 1, 129):
        plant(backend, k, stored_form(kind, T0))
    plant(backend, 2, stored_form(kind, T0))
    assert chains(backend) == {0: {0, 128, 256}, 1: {1, 129}, 2: {2}}
    clock.now = T0 + TTL  # everything expired (§9.2)

    # §9.4: nextEntries returns a whole chain; entryNum += chain size, so a chain of 3 goes at
    # once although cleanup_size is 1, and the run stops there
    access(backend, kind, state)
    assert set(present(backend)) == {1, 129, 2}
    # §9.4: the next access resumes with the next chain (the same visitor)
    access(backend, kind, state)
    assert set(present(backend)) == {2}
    access(backend, kind, state)
    assert present(backend) == {}


@pytest.mark.parametrize("kind", KINDS)
def test_a_chain_is_counted_whole_and_its_live_entries_kept(kind: StateKind) -> None:
    backend, clock, state = cleanup_backend(kind, IncrementalCleanup(2, False))
    plant(backend, 0, stored_form(kind, T0))
    plant(backend, 128, stored_form(kind, T0 + 50))
    plant(backend, 256, stored_form(kind, T0))
    plant(backend, 1, stored_form(kind, T0))
    assert chains(backend) == {0: {0, 128, 256}, 1: {1}}
    clock.now = T0 + TTL  # 0, 256, 1 expired; 128 live

    access(backend, kind, state)
    # §9.4: chain of bucket 0 counted as 3 >= 2 -> the run stops before bucket 1;
    # getUnexpiredOrNull keeps the live entry as it is
    assert present(backend) == {128: stored_form(kind, T0 + 50), 1: stored_form(kind, T0)}


def test_visitor_scans_at_most_n_empty_positions_per_call_and_resumes() -> None:
    kind = StateKind.VALUE
    backend, clock, state = cleanup_backend(kind, IncrementalCleanup(2, False))
    for k in (0, 1, 5):
        plant(backend, k, stored_form(kind, T0))
    assert chains(backend) == {0: {0}, 1: {1}, 5: {5}}
    clock.now = T0 + TTL
    # §5.6 getStateIncrementalVisitor(n = cleanup_size = 2): nextEntries returns the next
    # chain, scanning at most 2 empty positions; an empty result stops the run (§9.4), and
    # the next run continues with the same visitor from where it stopped.
    timeline = [
        ({5}, "buckets 0 and 1: 2 entries counted, run over"),
        ({5}, "buckets 2, 3 empty: 2 positions scanned, empty result, run over"),
        (set(), "bucket 4 empty, bucket 5: chain found and cleaned"),
    ]
    for want, why in timeline:
        access(backend, kind, state)
        assert set(present(backend)) == want, why


@pytest.mark.parametrize("cleanup", [IncrementalCleanup(1, False), IncrementalCleanup(2, False),
                                     DEFAULT_INCREMENTAL_CLEANUP],
                         ids=["size_1", "size_2", "default_size_5"])
@pytest.mark.parametrize("kind", KINDS)
def test_incremental_cleanup_reaches_every_bucket(kind: StateKind,
                                                  cleanup: IncrementalCleanup) -> None:
    # Written through the state only. Gaps wider than cleanup_size between the keys: the
    # visitor must cross them a few positions per access, keeping its position (§5.6: at most
    # n empty positions per call; §9.4: a new visitor only when the old one is exhausted).
    keys = [0, 10, 50, 100, 126]
    backend, clock, state = cleanup_backend(kind, cleanup)
    for k in keys:
        backend.set_current_key(k)
        write(kind, state)
    assert chains(backend) == {k: {k} for k in keys}
    clock.now = T0 + TTL
    for _ in range(ENOUGH_ACCESSES):
        access(backend, kind, state)
    assert present(backend) == {}, "every expired entry is eventually cleaned up"


@pytest.mark.parametrize("every_record", [True, False])
def test_run_for_every_record_cleans_on_key_selection(every_record: bool) -> None:
    kind = StateKind.VALUE
    backend, clock, _ = cleanup_backend(kind, IncrementalCleanup(1, every_record))
    for k in (0, 1):
        plant(backend, k, stored_form(kind, T0))
    clock.now = T0 + TTL
    # §9.4: with runCleanupForEveryRecord the cleanup also runs on every key selection
    backend.set_current_key(IDLE_KEY)
    assert set(present(backend)) == ({1} if every_record else {0, 1})
    backend.set_current_key(IDLE_KEY)
    assert set(present(backend)) == (set() if every_record else {0, 1})


@pytest.mark.parametrize("kind", [StateKind.LIST, StateKind.MAP])
def test_incremental_cleanup_rewrites_a_partly_expired_collection(kind: StateKind) -> None:
    backend, clock, state = cleanup_backend(kind, IncrementalCleanup(10, False))
    partly: Any
    live: Any
    cleaned: Any
    if kind is StateKind.LIST:
        partly = [TtlValue("x", T0), TtlValue("y", T0 + 50)]
        live = [TtlValue("p", T0 + 50), TtlValue("q", T0 + 60)]
        cleaned = [TtlValue("y", T0 + 50)]
    else:
        partly = {"x": TtlValue("X", T0), "y": TtlValue("Y", T0 + 50)}
        live = {"p": TtlValue("P", T0 + 50)}
        cleaned = {"y": TtlValue("Y", T0 + 50)}
    plant(backend, 0, partly)
    plant(backend, 1, live)
    plant(backend, 2, stored_form(kind, T0))
    clock.now = T0 + TTL
    access(backend, kind, state)
    # §9.4 getUnexpiredOrNull: a partly expired list/map -> the unexpired part (visitor.update);
    # all expired -> null (visitor.remove); nothing expired -> the same object, left alone
    assert stored(backend, 0) == cleaned
    assert stored(backend, 1) is live
    assert stored(backend, 2) is None


@pytest.mark.parametrize(("kind", "empty"), [(StateKind.LIST, []), (StateKind.MAP, {})])
def test_incremental_cleanup_keeps_an_empty_collection(kind: StateKind, empty: Any) -> None:
    # §9.4 table: list "the same list if empty", map "an empty map is returned as is"
    backend, clock, state = cleanup_backend(kind, IncrementalCleanup(10, False))
    plant(backend, 0, empty)
    plant(backend, 1, stored_form(kind, T0))
    clock.now = T0 + TTL
    access(backend, kind, state)
    assert present(backend) == {0: empty}


@pytest.mark.parametrize("kind", KINDS)
def test_nested_map_visitor_cleans_batches_of_cleanup_size(kind: StateKind) -> None:
    backend, clock, state = cleanup_backend(kind, IncrementalCleanup(2, False), "nested")
    keys = [0, 128, 256, 1, 2]  # no buckets here: colliding keys are plain entries
    for k in keys:
        plant(backend, k, stored_form(kind, T0))
    clock.now = T0 + TTL
    # The nested map has no chains: nextEntries returns at most cleanup_size entries, so each
    # access counts exactly cleanup_size (§9.4 loop), resuming with the same visitor.
    removed = []
    for _ in range(3):
        before = len(backend.table(NAME))
        access(backend, kind, state)
        removed.append(before - len(backend.table(NAME)))
    assert removed == [2, 2, 1]
    assert present(backend) == {}


def test_nested_map_cleanup_reaches_entries_added_after_a_walk() -> None:
    kind = StateKind.VALUE
    backend, clock, state = cleanup_backend(kind, IncrementalCleanup(1, False), "nested")
    plant(backend, 0, stored_form(kind, T0))
    clock.now = T0 + TTL
    access(backend, kind, state)
    assert present(backend) == {}
    plant(backend, 1, stored_form(kind, T0))
    plant(backend, 2, stored_form(kind, T0 + 50))
    for _ in range(3):
        access(backend, kind, state)
    # §9.4: an exhausted visitor is replaced by a new one, which sees the new entries; only
    # the expired one goes
    assert present(backend) == {2: stored_form(kind, T0 + 50)}
