"""Flink's ``StateMapEntry``: one chain link of the copy-on-write map (reference §5).

Port of the nested class ``CopyOnWriteStateMap.StateMapEntry`` in
``flink-runtime/.../runtime/state/heap/CopyOnWriteStateMap.java``. The map
(:mod:`statecore.copy_on_write_state_map`) links them into chains; its snapshots
(:mod:`statecore.copy_on_write_snapshot`) walk them.
"""

from __future__ import annotations

from typing import Any

__all__ = ["StateMapEntry"]


class StateMapEntry:
    """One chain link: ``(key, namespace) -> state`` with its copy-on-write versions.

    ``entry_version`` is the map version that created this object (a copy gets a new one);
    ``state_version`` the map version in which ``state`` was last set or defensively copied.

    Flink's ``StateMapEntry`` also caches the composite hash. Here the map recomputes it from
    ``key`` and ``namespace`` where it needs it (rehash steps, layouts,
    ``CopyOnWriteStateMap._entry_hash``): a cached hash would cost a slot and an int object
    (32 or 48 bytes) per entry, half again the entry. Six slots and no ``__weakref__`` (nothing
    refers to entries weakly) make an entry 80 bytes: GC header, object header, six pointers.
    """

    __slots__ = ("key", "namespace", "state", "next", "entry_version", "state_version")

    def __init__(
        self,
        key: Any,
        namespace: Any,
        state: Any,
        next_entry: StateMapEntry | None,
        entry_version: int,
        state_version: int,
    ) -> None:
        self.key = key
        self.namespace = namespace
        self.state = state
        self.next = next_entry
        self.entry_version = entry_version
        self.state_version = state_version

    def copy_with_version(self, entry_version: int) -> StateMapEntry:
        """Port of the copy constructor ``StateMapEntry(other, entryVersion)`` (§5.4).

        Shares key, namespace, state and ``next``; keeps ``state_version``.
        """
        return StateMapEntry(self.key, self.namespace, self.state, self.next, entry_version,
                             self.state_version)

    def __repr__(self) -> str:
        return (f"StateMapEntry({self.key!r}, {self.namespace!r}, {self.state!r}, "
                f"entry_version={self.entry_version}, state_version={self.state_version})")
