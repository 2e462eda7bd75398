"""The bucket array of ``CopyOnWriteStateMap``, stored as copy-on-write pages.

Flink keeps each table as one Java array and snapshots it with an array copy: O(buckets), a
``memcpy``. In CPython a list copy also touches the reference count of every entry it holds, so
copying a 2-million-slot table costs ~17 ms and releasing it as much again; allocating a doubled
table costs ~6 ms inside one ``put``. statectl therefore stores the same logical array in pages
of :data:`PAGE_SIZE` slots and applies copy-on-write one level up, to pages, exactly as the map
applies it to entries:

* A snapshot copies only the list of pages (O(buckets / 1024)).
* Every page carries the map version it was made in (stored ``+ 1``). A page made before the
  newest open snapshot is shared with it and is copied before its first write; so is the shared
  all-``None`` :data:`EMPTY_PAGE`, which is how a new table's pages are allocated lazily, on
  first write, instead of all at once when the map doubles.

This is a deliberate difference in *representation* only: bucket indices, chain order, the
rehash schedule and every counter Flink exposes are unchanged (the oracle traces prove it).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["EMPTY_PAGE", "PAGE_MASK", "PAGE_SHIFT", "PAGE_SIZE", "BucketTable", "slots"]

PAGE_SHIFT = 10
PAGE_SIZE = 1 << PAGE_SHIFT
PAGE_MASK = PAGE_SIZE - 1

#: The page every slot of a fresh large table starts in. Never written: its stored version 0
#: is <= any highest required snapshot version, so the first write to it copies it (into a
#: list); a tuple, so that a write that skipped the rule would fail instead of corrupting
#: every map.
EMPTY_PAGE: tuple[None, ...] = (None,) * PAGE_SIZE


class BucketTable:
    """A power-of-two array of chain heads, as pages; slot ``i`` is ``pages[i >> 10][i & 1023]``.

    A table of at most :data:`PAGE_SIZE` slots is one page of exactly that length (so a map
    per key group of Flink's default 128 buckets costs 128 slots, not 1024).
    ``versions[p]`` is ``map version + 1`` of the moment page ``p`` was made (0: ``EMPTY_PAGE``).
    The owning map decides when a page must be copied (see ``CopyOnWriteStateMap._set_bucket``).
    """

    __slots__ = ("mask", "pages", "versions")

    def __init__(self, capacity: int, map_version: int) -> None:
        self.mask = capacity - 1
        if capacity <= PAGE_SIZE:
            self.pages: list[Any] = [[None] * capacity]
            self.versions: list[int] = [map_version + 1]
        else:
            count = capacity >> PAGE_SHIFT
            self.pages = [EMPTY_PAGE] * count
            self.versions = [0] * count

    def __len__(self) -> int:
        return self.mask + 1

    def head(self, index: int) -> Any:
        return self.pages[index >> PAGE_SHIFT][index & PAGE_MASK]

    def heads(self) -> list[Any]:
        """All slots in index order (a new list; for layouts and small maps)."""
        return list(slots(self.pages, 0, self.mask + 1))


def slots(pages: list[Any], start: int, stop: int) -> Iterator[Any]:
    """The slots ``[start, stop)`` of a paged array, in index order."""
    while start < stop:
        offset = start & PAGE_MASK
        page = pages[start >> PAGE_SHIFT]
        end = min(len(page), offset + (stop - start))
        yield from page[offset:end]
        start += end - offset
