"""Flink's ``CopyOnWriteStateMap``: chained hashing, incremental rehash, versioned snapshots.

Port of ``flink-runtime/.../runtime/state/heap/CopyOnWriteStateMap.java`` and
``CopyOnWriteStateMapSnapshot.java``; every rule below is reference §5 (section numbers in the
comments). In short:

* Buckets hold chains of :class:`StateMapEntry`, new entries are head-inserted. Capacity is a
  power of two (default 128); growth is checked *before* inserting a new key
  (``size() > threshold``, threshold 3/4) and starts an **incremental rehash**: every
  get/put/contains/remove first moves whole buckets from the primary table to the new one until
  at least ``min_transferred_per_incremental_rehash`` (4) entries moved.
* ``snapshot()`` is O(buckets): it shallow-copies the bucket arrays and bumps
  ``state_map_version``. Afterwards, an entry (or a state object) whose version is older than
  ``highest_required_snapshot_version`` is shared with a snapshot and is never changed in place:
  writes path-copy the chain prefix up to it (``_handle_chained_entry_copy_on_write``) and
  ``get`` hands out a deep copy of the state (the caller may mutate it).

Hashing modes: ``"flink"`` uses Flink's ``bit_mix(java_hash(key) ^ java_hash(namespace))`` and
reproduces Flink's bucket layout and rehash schedule operation for operation (checked against
``shared/oracle/cow_traces*.json``); ``"fast"`` (the default) uses Python's ``hash``, which is
quicker and only decides in-memory placement (never a key group, never anything on disk).
``"identity"`` (an int key is its own hash) and explicit per-key hashes exist for teaching
walkthroughs (``statectl trace``).

Threads: one owner thread calls every method except the snapshot's; a snapshot may be iterated
and released from any thread (version bookkeeping is guarded by a lock, as Flink guards it with
``synchronized(snapshotVersions)``).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, Literal, TypeVar

from statecore.errors import (
    ConcurrentModificationError,
    InvalidArgumentError,
    SnapshotReleasedError,
    StateMapError,
)
from statecore.hashing import INT32_MAX, bit_mix, to_int32
from statecore.serializers import VOID_NAMESPACE, TypeSerializer, infer_java_hash
from statecore.state_map import StateEntry, StateMap, StateMapSnapshot
from statecore.state_map_layout import EntryView, MapLayout, SnapshotLayout, build_layout

__all__ = [
    "DEFAULT_CAPACITY",
    "MAXIMUM_CAPACITY",
    "MINIMUM_CAPACITY",
    "MIN_TRANSFERRED_PER_INCREMENTAL_REHASH",
    "CopyOnWriteStateMap",
    "CopyOnWriteStateMapSnapshot",
    "EntryView",
    "HashMode",
    "MapLayout",
    "SnapshotLayout",
    "StateMapEntry",
]

K = TypeVar("K")
N = TypeVar("N")
S = TypeVar("S")
T = TypeVar("T")

# §5.1 constants.
MINIMUM_CAPACITY = 4
MAXIMUM_CAPACITY = 1 << 30
DEFAULT_CAPACITY = 128
MIN_TRANSFERRED_PER_INCREMENTAL_REHASH = 4
_MAX_ARRAY_SIZE = INT32_MAX - 8

HashMode = Literal["fast", "flink", "identity"]
_HASH_MODES = ("fast", "flink", "identity")


class StateMapEntry:
    """One chain link: ``(key, namespace) -> state`` with its copy-on-write versions.

    ``entry_version`` is the map version that created this object (a copy gets a new one);
    ``state_version`` the map version in which ``state`` was last set or defensively copied.
    """

    __slots__ = ("key", "namespace", "state", "hash", "next", "entry_version", "state_version",
                 "__weakref__")

    def __init__(
        self,
        key: Any,
        namespace: Any,
        state: Any,
        hash_code: int,
        next_entry: StateMapEntry | None,
        entry_version: int,
        state_version: int,
    ) -> None:
        self.key = key
        self.namespace = namespace
        self.state = state
        self.hash = hash_code
        self.next = next_entry
        self.entry_version = entry_version
        self.state_version = state_version

    def copy_with_version(self, entry_version: int) -> StateMapEntry:
        """Port of the copy constructor ``StateMapEntry(other, entryVersion)`` (§5.4).

        Shares key, namespace, state and ``next``; keeps ``state_version``.
        """
        return StateMapEntry(self.key, self.namespace, self.state, self.hash, self.next,
                             entry_version, self.state_version)

    def __repr__(self) -> str:
        return (f"StateMapEntry({self.key!r}, {self.namespace!r}, {self.state!r}, "
                f"entry_version={self.entry_version}, state_version={self.state_version})")


_VOID = VOID_NAMESPACE

# §5.1: the shared empty table; "not rehashing" is identity with it, and its length is 2.
_EMPTY_TABLE: list[StateMapEntry | None] = [None] * (MINIMUM_CAPACITY >> 1)


def _threshold_for(capacity: int, size: int) -> int:
    if capacity == MAXIMUM_CAPACITY:
        if size > _MAX_ARRAY_SIZE:
            raise StateMapError(f"Maximum capacity of CopyOnWriteStateMap is reached and the "
                                f"job cannot continue. Please consider scaling-out your job or "
                                f"using a different keyed state backend implementation! "
                                f"(size {size})")
        return _MAX_ARRAY_SIZE
    return (capacity >> 1) + (capacity >> 2)


class CopyOnWriteStateMap(StateMap[K, N, S], Generic[K, N, S]):
    """Port of Flink's ``CopyOnWriteStateMap`` (reference §5).

    ``capacity``: 0 gives Flink's empty table; other values are clamped to
    ``[4, 2**30]`` and rounded up to a power of two (§5.1). ``state_serializer`` makes the
    defensive copies (default: ``copy.deepcopy``). ``hash_mode`` is described in the module
    docstring; ``key_hash`` / ``namespace_hash`` override the Java hash used in ``"flink"`` mode
    (default: inferred from the Python value). ``hash_overrides`` pins the bucket hash of given
    keys (teaching walkthroughs). ``min_transferred_per_incremental_rehash`` is Flink's constant
    4; the seed walkthrough uses 1 to move one bucket per step.
    """

    def __init__(
        self,
        capacity: int = DEFAULT_CAPACITY,
        state_serializer: TypeSerializer[S] | None = None,
        *,
        hash_mode: HashMode = "fast",
        key_hash: Callable[[K], int] | None = None,
        namespace_hash: Callable[[N], int] | None = None,
        hash_overrides: Mapping[Any, int] | None = None,
        min_transferred_per_incremental_rehash: int = MIN_TRANSFERRED_PER_INCREMENTAL_REHASH,
    ) -> None:
        if capacity < 0:
            raise InvalidArgumentError("Capacity must be non-negative.")
        if hash_mode not in _HASH_MODES:
            raise InvalidArgumentError(
                f"unknown hash mode {hash_mode!r} (known: {', '.join(_HASH_MODES)})")
        if min_transferred_per_incremental_rehash < 1:
            raise InvalidArgumentError("min_transferred_per_incremental_rehash must be >= 1")
        self._copy: Callable[[Any], Any] = (
            _deep_copy if state_serializer is None else state_serializer.copy)
        self._hash_mode = hash_mode
        self._key_hash = key_hash or infer_java_hash
        self._namespace_hash = namespace_hash or infer_java_hash
        self._hash_overrides = dict(hash_overrides or {})
        self._min_transferred = min_transferred_per_incremental_rehash
        # The fast mode's hash is inlined in the hot paths (a call costs as much as the lookup).
        self._fast = not self._hash_overrides and hash_mode == "fast"

        self._primary_size = 0
        self._incr_size = 0
        self._rehash_index = 0
        self._state_map_version = 0
        self._highest_required = 0
        self._snapshot_versions: set[int] = set()
        self._snapshots: weakref.WeakValueDictionary[int, CopyOnWriteStateMapSnapshot[K, N, S]]
        self._snapshots = weakref.WeakValueDictionary()
        self._versions_lock = threading.Lock()
        self._last_namespace: Any = None
        self._mod_count = 0
        self._threshold = -1
        self._incr: list[StateMapEntry | None] = _EMPTY_TABLE
        if capacity == 0:
            self._primary: list[StateMapEntry | None] = _EMPTY_TABLE
        else:
            capacity = max(MINIMUM_CAPACITY, min(capacity, MAXIMUM_CAPACITY))
            capacity = 1 << (capacity - 1).bit_length()
            self._primary = self._make_table(capacity)

    # -- hashing (§5.2) ---------------------------------------------------------------------

    def _general_hash(self, key: Any, namespace: Any) -> int:
        pinned = self._hash_overrides.get(key) if self._hash_overrides else None
        if pinned is not None:
            return to_int32(pinned)
        if self._hash_mode == "flink":
            return bit_mix(self._key_hash(key) ^ self._namespace_hash(namespace))
        if self._hash_mode == "identity":
            if not isinstance(key, int):
                raise InvalidArgumentError(f"hash mode 'identity' needs int keys, got {key!r}")
            return to_int32(key)
        return _fast_hash(key, namespace)

    # -- size and tables ----------------------------------------------------------------------

    def __len__(self) -> int:
        return self._primary_size + self._incr_size

    @property
    def is_rehashing(self) -> bool:
        return self._incr is not _EMPTY_TABLE

    @property
    def state_map_version(self) -> int:
        return self._state_map_version

    @property
    def highest_required_snapshot_version(self) -> int:
        return self._highest_required

    def _make_table(self, capacity: int) -> list[StateMapEntry | None]:
        self._threshold = _threshold_for(capacity, len(self))
        return [None] * capacity

    def _double_capacity(self) -> None:
        # §5.3 doubleCapacity: only starts the incremental rehash.
        if self._incr is not _EMPTY_TABLE:
            raise StateMapError("There is already a rehash in progress.")
        old_capacity = len(self._primary)
        if old_capacity == MAXIMUM_CAPACITY:
            return
        self._incr = self._make_table(old_capacity * 2)

    def _incremental_rehash(self) -> None:
        # §5.3 incrementalRehash: move whole buckets until >= min_transferred entries moved.
        old_map = self._primary
        new_map = self._incr
        new_mask = len(new_map) - 1
        required = self._highest_required
        version = self._state_map_version
        rh_idx = self._rehash_index
        old_capacity = len(old_map)
        transferred = 0
        while transferred < self._min_transferred:
            e = old_map[rh_idx]
            while e is not None:
                if e.entry_version < required:
                    # copy-on-write: a snapshot still holds this entry and its `next`
                    e = e.copy_with_version(version)
                n = e.next
                pos = e.hash & new_mask
                e.next = new_map[pos]
                new_map[pos] = e
                e = n
                transferred += 1
            old_map[rh_idx] = None
            rh_idx += 1
            if rh_idx == old_capacity:
                self._primary = new_map
                self._incr = _EMPTY_TABLE
                self._primary_size += self._incr_size
                self._incr_size = 0
                self._rehash_index = 0
                return
        self._primary_size -= transferred
        self._incr_size += transferred
        self._rehash_index = rh_idx

    def _select_active_table(self, hash_code: int) -> list[StateMapEntry | None]:
        primary = self._primary
        if (hash_code & (len(primary) - 1)) >= self._rehash_index:
            return primary
        return self._incr

    # -- copy-on-write of chain prefixes (§5.4) -------------------------------------------------

    def _handle_chained_entry_copy_on_write(
        self, tab: list[StateMapEntry | None], idx: int, until: StateMapEntry
    ) -> StateMapEntry:
        """Path-copy the chain from its head up to ``until``; return the live ``until``.

        Entries older than the highest required snapshot version are shared with a snapshot,
        so they are replaced by copies; newer ones are changed in place.
        """
        required = self._highest_required
        version = self._state_map_version
        current = tab[idx]
        assert current is not None
        if current.entry_version < required:
            copy = current.copy_with_version(version)
            tab[idx] = copy
        else:
            copy = current
        while current is not until:
            current = current.next
            assert current is not None
            if current.entry_version < required:
                entry = current.copy_with_version(version)
                copy.next = entry
                copy = entry
            else:
                copy = current
        return copy

    # -- operations -------------------------------------------------------------------------------

    def get(self, key: K, namespace: N) -> S | None:
        if self._incr is not _EMPTY_TABLE:
            self._incremental_rehash()
        if self._fast:
            h = hash(key) if namespace is _VOID else _fast_hash(key, namespace)
        else:
            h = self._general_hash(key, namespace)
        required = self._highest_required
        tab = self._primary
        if (h & (len(tab) - 1)) < self._rehash_index:
            tab = self._incr
        idx = h & (len(tab) - 1)
        e = tab[idx]
        while e is not None:
            if e.hash == h and e.key == key and e.namespace == namespace:
                if e.state_version < required:
                    # The caller may mutate what it gets: copy a state a snapshot still needs.
                    if e.entry_version < required:
                        e = self._handle_chained_entry_copy_on_write(tab, idx, e)
                    e.state_version = self._state_map_version
                    state = e.state
                    e.state = None if state is None else self._copy(state)
                return e.state  # type: ignore[no-any-return]
            e = e.next
        return None

    def contains(self, key: K, namespace: N) -> bool:
        if self._incr is not _EMPTY_TABLE:
            self._incremental_rehash()
        if self._fast:
            h = hash(key) if namespace is _VOID else _fast_hash(key, namespace)
        else:
            h = self._general_hash(key, namespace)
        tab = self._primary
        if (h & (len(tab) - 1)) < self._rehash_index:
            tab = self._incr
        e = tab[h & (len(tab) - 1)]
        while e is not None:
            if e.hash == h and e.key == key and e.namespace == namespace:
                return True
            e = e.next
        return False

    def _put_entry(self, key: Any, namespace: Any) -> StateMapEntry:
        # §5.3 putEntry: the live entry for (key, namespace), created if absent.
        if self._incr is not _EMPTY_TABLE:
            self._incremental_rehash()
        if self._fast:
            h = hash(key) if namespace is _VOID else _fast_hash(key, namespace)
        else:
            h = self._general_hash(key, namespace)
        tab = self._primary
        if (h & (len(tab) - 1)) < self._rehash_index:
            tab = self._incr
        idx = h & (len(tab) - 1)
        e = tab[idx]
        while e is not None:
            if e.hash == h and e.key == key and e.namespace == namespace:
                if e.entry_version < self._highest_required:
                    e = self._handle_chained_entry_copy_on_write(tab, idx, e)
                return e
            e = e.next
        return self._add_new_entry(tab, idx, key, namespace, h, None)

    def put(self, key: K, namespace: N, state: S) -> None:
        # _put_entry inlined: put is the hottest write path, and a new entry is created with
        # its state at once.
        if self._incr is not _EMPTY_TABLE:
            self._incremental_rehash()
        if self._fast:
            h = hash(key) if namespace is _VOID else _fast_hash(key, namespace)
        else:
            h = self._general_hash(key, namespace)
        tab = self._primary
        if (h & (len(tab) - 1)) < self._rehash_index:
            tab = self._incr
        idx = h & (len(tab) - 1)
        e = tab[idx]
        while e is not None:
            if e.hash == h and e.key == key and e.namespace == namespace:
                if e.entry_version < self._highest_required:
                    e = self._handle_chained_entry_copy_on_write(tab, idx, e)
                e.state = state
                e.state_version = self._state_map_version
                return
            e = e.next
        self._add_new_entry(tab, idx, key, namespace, h, state)

    def _add_new_entry(
        self, tab: list[StateMapEntry | None], idx: int, key: Any, namespace: Any, h: int,
        state: Any,
    ) -> StateMapEntry:
        # §5.3: the growth check comes before the insertion; the entry is head-inserted into
        # the table selected before any doubling.
        self._mod_count += 1
        if self._primary_size + self._incr_size > self._threshold:
            self._double_capacity()
        if namespace == self._last_namespace:
            namespace = self._last_namespace
        else:
            self._last_namespace = namespace
        version = self._state_map_version
        e = StateMapEntry(key, namespace, state, h, tab[idx], version, version)
        tab[idx] = e
        if tab is self._primary:
            self._primary_size += 1
        else:
            self._incr_size += 1
        return e

    def put_and_get_old(self, key: K, namespace: N, state: S) -> S | None:
        e = self._put_entry(key, namespace)
        old = e.state
        if e.state_version < self._highest_required and old is not None:
            old = self._copy(old)
        e.state = state
        e.state_version = self._state_map_version
        return old  # type: ignore[no-any-return]

    def transform(
        self, key: K, namespace: N, value: T, transformation: Callable[[S | None, T], S]
    ) -> None:
        e = self._put_entry(key, namespace)
        current = e.state
        if e.state_version < self._highest_required and current is not None:
            current = self._copy(current)
        e.state = transformation(current, value)
        e.state_version = self._state_map_version

    def _remove_entry(self, key: Any, namespace: Any) -> StateMapEntry | None:
        # §5.4 removeEntry.
        if self._incr is not _EMPTY_TABLE:
            self._incremental_rehash()
        if self._fast:
            h = hash(key) if namespace is _VOID else _fast_hash(key, namespace)
        else:
            h = self._general_hash(key, namespace)
        tab = self._primary
        if (h & (len(tab) - 1)) < self._rehash_index:
            tab = self._incr
        idx = h & (len(tab) - 1)
        prev: StateMapEntry | None = None
        e = tab[idx]
        while e is not None:
            if e.hash == h and e.key == key and e.namespace == namespace:
                if prev is None:
                    tab[idx] = e.next
                else:
                    if prev.entry_version < self._highest_required:
                        # prev.next is shared with a snapshot: path-copy up to prev
                        prev = self._handle_chained_entry_copy_on_write(tab, idx, prev)
                    prev.next = e.next
                self._mod_count += 1
                if tab is self._primary:
                    self._primary_size -= 1
                else:
                    self._incr_size -= 1
                return e
            prev = e
            e = e.next
        return None

    def remove(self, key: K, namespace: N) -> None:
        self._remove_entry(key, namespace)

    def remove_and_get_old(self, key: K, namespace: N) -> S | None:
        e = self._remove_entry(key, namespace)
        if e is None:
            return None
        state = e.state
        if e.state_version < self._highest_required and state is not None:
            return self._copy(state)  # type: ignore[no-any-return]
        return state  # type: ignore[no-any-return]

    # -- iteration (§5.6) ----------------------------------------------------------------------

    def __iter__(self) -> Iterator[StateEntry[K, N, S]]:
        """Entries of the primary table, then of the rehash table.

        As Flink's ``StateEntryIterator``: inserting or removing a key while iterating makes the
        next step raise :class:`ConcurrentModificationError`; updating values does not.
        """
        expected = self._mod_count
        tables = [self._primary]
        if self._incr is not _EMPTY_TABLE:
            tables.append(self._incr)
        for tab in tables:
            for head in tab:
                e = head
                while e is not None:
                    if self._mod_count != expected:
                        raise ConcurrentModificationError(
                            "the state map was structurally modified during iteration")
                    yield StateEntry(e.key, e.namespace, e.state)
                    e = e.next
        if self._mod_count != expected:
            raise ConcurrentModificationError(
                "the state map was structurally modified during iteration")

    # -- snapshots (§5.5) ----------------------------------------------------------------------

    def snapshot(self) -> CopyOnWriteStateMapSnapshot[K, N, S]:
        """Port of ``stateSnapshot()``: O(buckets) copy of the bucket arrays plus a version.

        The snapshot iterates exactly the state at this moment while the map keeps changing.
        Release it exactly once (``release()`` or ``with``); until then every entry it shares is
        copied before it is changed.
        """
        return CopyOnWriteStateMapSnapshot(self)

    def _snapshot_map_arrays(self) -> tuple[int, list[StateMapEntry | None]]:
        with self._versions_lock:
            self._state_map_version += 1
            if self._state_map_version > INT32_MAX:
                self._state_map_version -= 1
                raise StateMapError(
                    "Version count overflow in CopyOnWriteStateMap. Enforcing restart.")
            self._highest_required = self._state_map_version
            self._snapshot_versions.add(self._state_map_version)
            version = self._state_map_version
        table = self._primary
        size = max(self._rehash_index + len(table), len(self))
        if self._incr is _EMPTY_TABLE:
            copy = table[:]
            if size > len(copy):
                copy.extend([None] * (size - len(copy)))
            return version, copy
        # While rehashing: the unmigrated part of the primary table, then the two halves of the
        # rehash table that received the migrated buckets (§5.5).
        rh = self._rehash_index
        rest = len(table) - rh
        incr = self._incr
        half = len(incr) >> 1
        copy = [None] * size
        copy[0:rest] = table[rh:]
        copy[rest:rest + rh] = incr[0:rh]
        copy[rest + rh:rest + 2 * rh] = incr[half:half + rh]
        return version, copy

    def _release_snapshot_version(self, version: int) -> None:
        with self._versions_lock:
            if version not in self._snapshot_versions:
                raise SnapshotReleasedError("Attempt to release unknown snapshot version")
            self._snapshot_versions.discard(version)
            self._highest_required = max(self._snapshot_versions, default=0)

    def release_snapshot(self, snapshot: CopyOnWriteStateMapSnapshot[K, N, S]) -> None:
        """Port of ``releaseSnapshot``: refuse a snapshot owned by a different map."""
        if snapshot.owner is not self:
            raise SnapshotReleasedError(
                "Cannot release snapshot which is owned by a different state map.")
        snapshot.release()

    @property
    def snapshot_versions(self) -> tuple[int, ...]:
        with self._versions_lock:
            return tuple(sorted(self._snapshot_versions))

    # -- observability --------------------------------------------------------------------------

    def layout(self, chains: bool = True) -> MapLayout:
        """A read-only view of the tables, chains, versions and snapshot sharing (for tracing).

        With ``chains=False`` only the counters are filled in (cheap; chain fields are empty).
        """
        snapshots = [s for v in self.snapshot_versions if (s := self._snapshots.get(v))]
        return build_layout(
            size=len(self), primary=self._primary,
            incremental=self._incr if self._incr is not _EMPTY_TABLE else None,
            incremental_length=len(self._incr), rehash_index=self._rehash_index,
            state_map_version=self._state_map_version,
            highest_required=self._highest_required, snapshot_versions=self.snapshot_versions,
            primary_size=self._primary_size, incremental_size=self._incr_size,
            threshold=self._threshold, snapshots=snapshots, with_chains=chains)


class CopyOnWriteStateMapSnapshot(StateMapSnapshot[K, N, S], Generic[K, N, S]):
    """Port of ``CopyOnWriteStateMapSnapshot``: the bucket arrays at one map version.

    Created on the owner thread by :meth:`CopyOnWriteStateMap.snapshot`; may be iterated and
    released from another thread. The states it yields must be treated as read-only. It is
    released exactly once: the first ``release()`` gives its version back to the map (which then
    stops copying for it); later calls do nothing; iterating a released snapshot raises
    :class:`SnapshotReleasedError`.
    """

    def __init__(self, owner: CopyOnWriteStateMap[K, N, S]) -> None:
        self.owner = owner
        self.taken_during_rehash = owner.is_rehashing
        self.number_of_entries = len(owner)
        version, data = owner._snapshot_map_arrays()
        self.snapshot_version = version
        self.snapshot_data: list[StateMapEntry | None] | None = data
        self._released = False
        self._release_lock = threading.Lock()
        owner._snapshots[version] = self

    def __len__(self) -> int:
        return self.number_of_entries

    @property
    def released(self) -> bool:
        return self._released

    def __iter__(self) -> Iterator[StateEntry[K, N, S]]:
        """Entries in array order, chain by chain (Flink's ``NonTransformSnapshotIterator``)."""
        data = self.snapshot_data
        if data is None:
            raise SnapshotReleasedError(
                f"snapshot version {self.snapshot_version} was released and cannot be read")
        for head in data:
            e = head
            while e is not None:
                yield StateEntry(e.key, e.namespace, e.state)
                e = e.next

    def release(self) -> None:
        with self._release_lock:
            if self._released:
                return
            self._released = True
            self.owner._release_snapshot_version(self.snapshot_version)
            self.snapshot_data = None

    def __repr__(self) -> str:
        state = "released" if self._released else f"{self.number_of_entries} entries"
        return f"CopyOnWriteStateMapSnapshot(version={self.snapshot_version}, {state})"


def _fast_hash(key: Any, namespace: Any) -> int:
    # In-memory placement only. The void namespace (the common case) adds nothing; other
    # namespaces are mixed in asymmetrically so (k, n) and (n, k) do not collide.
    if namespace is VOID_NAMESPACE:
        return hash(key)
    return hash(key) ^ (hash(namespace) * 0x9E3779B1)


def _deep_copy(value: Any) -> Any:
    import copy

    return copy.deepcopy(value)
