"""The ``StateMap`` contract shared by the copy-on-write map and the nested-dict baseline.

Port of Flink's ``StateMap`` / ``StateMapSnapshot`` (``flink-runtime/.../state/heap/``). A state
map holds the state of one key group: composite keys ``(key, namespace)`` to state objects.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from typing import Any, Generic, NamedTuple, TypeVar

from statecore.errors import InvalidArgumentError
from statecore.serializers import VOID_NAMESPACE

__all__ = [
    "StateEntry",
    "StateIncrementalVisitor",
    "StateMap",
    "StateMapSnapshot",
    "VOID_NAMESPACE",
]

K = TypeVar("K")
N = TypeVar("N")
S = TypeVar("S")
T = TypeVar("T")


class StateEntry(NamedTuple, Generic[K, N, S]):
    """One ``(key, namespace, state)`` triple, as iterators and snapshots yield them."""

    key: K
    namespace: N
    state: S


class StateMapSnapshot(ABC, Generic[K, N, S]):
    """A point-in-time view of a state map.

    Contract (as Flink's): the objects it yields must be treated as read-only; it is released
    exactly once (later ``release`` calls do nothing); it can be used as a context manager,
    which releases it on exit; a released snapshot can no longer be read.
    """

    @abstractmethod
    def __iter__(self) -> Iterator[StateEntry[K, N, S]]: ...

    @abstractmethod
    def __len__(self) -> int: ...

    @abstractmethod
    def release(self) -> None: ...

    @property
    @abstractmethod
    def released(self) -> bool: ...

    def __enter__(self) -> StateMapSnapshot[K, N, S]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def to_dict(self) -> dict[tuple[K, N], S]:
        """The snapshot's contents as ``{(key, namespace): state}`` (states shared, not copied)."""
        return {(e.key, e.namespace): e.state for e in self}


class StateIncrementalVisitor(ABC, Generic[K, N, S]):
    """Port of ``InternalKvState.StateIncrementalVisitor``: walks a map a few chains at a time.

    Used by TTL's incremental cleanup (reference §5.6, §9.4). ``next_entries`` returns the next
    chain (a bucket's entries, or a batch for maps without buckets); an empty list means the
    walk stops for now. ``remove`` and ``update`` write through the map's normal operations.
    """

    @abstractmethod
    def has_next(self) -> bool: ...

    @abstractmethod
    def next_entries(self) -> list[StateEntry[K, N, S]]: ...

    @abstractmethod
    def remove(self, entry: StateEntry[K, N, S]) -> None: ...

    @abstractmethod
    def update(self, entry: StateEntry[K, N, S], new_state: S) -> None: ...


class StateMap(ABC, Generic[K, N, S]):
    """State of one key group: ``(key, namespace) -> state``.

    ``None`` is not a valid key or namespace (Flink: "No key set..." / "Provided namespace is
    null."); use :data:`VOID_NAMESPACE` for state without a namespace.
    """

    @abstractmethod
    def get(self, key: K, namespace: N) -> S | None:
        """The state, or ``None``. Callers may mutate the returned object in place."""

    @abstractmethod
    def contains(self, key: K, namespace: N) -> bool: ...

    @abstractmethod
    def put(self, key: K, namespace: N, state: S) -> None: ...

    @abstractmethod
    def put_and_get_old(self, key: K, namespace: N, state: S) -> S | None: ...

    @abstractmethod
    def remove(self, key: K, namespace: N) -> None: ...

    @abstractmethod
    def remove_and_get_old(self, key: K, namespace: N) -> S | None: ...

    @abstractmethod
    def transform(
        self, key: K, namespace: N, value: T, transformation: Callable[[S | None, T], S]
    ) -> None:
        """``state = transformation(current state or None, value)``."""

    @abstractmethod
    def __len__(self) -> int: ...

    @abstractmethod
    def __iter__(self) -> Iterator[StateEntry[K, N, S]]: ...

    @abstractmethod
    def snapshot(self) -> StateMapSnapshot[K, N, S]: ...

    @abstractmethod
    def incremental_visitor(
        self, recommended_max_positions: int
    ) -> StateIncrementalVisitor[K, N, S]: ...

    def keys(self, namespace: N) -> Iterator[K]:
        """Port of ``getKeys(namespace)``: the keys that have state in ``namespace``."""
        return (e.key for e in self if e.namespace == namespace)

    def size_of_namespace(self, namespace: N) -> int:
        """Port of ``sizeOfNamespace``: counted by iteration, as in Flink."""
        return sum(1 for e in self if e.namespace == namespace)

    def to_dict(self) -> dict[tuple[K, N], S]:
        """The live contents as ``{(key, namespace): state}`` (states shared, not copied)."""
        return {(e.key, e.namespace): e.state for e in self}

    @staticmethod
    def _check_key_and_namespace(key: Any, namespace: Any) -> None:
        if key is None:
            raise InvalidArgumentError(
                "No key set. This method should not be called outside of a keyed context."
            )
        if namespace is None:
            raise InvalidArgumentError("Provided namespace is null.")
