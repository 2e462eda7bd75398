"""Collapsing the heap into transparent huge pages (formats.statectl.huge_pages): dense ranges
become huge pages with their bytes unchanged, sparse ones stay as they are, ``stop`` is
obeyed, and the density arithmetic matches a model."""

from __future__ import annotations

import ctypes
import mmap
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given
from hypothesis import strategies as st

from formats.statectl import huge_pages as thp
from formats.statectl.async_writer import collapses_paused
from statecore.errors import InvalidArgumentError

HUGE, PAGE, PER = thp.HUGE_PAGE, thp.PAGE, thp.PAGES_PER_HUGE


MADV_DONTFORK = 10  # linux/mman.h


@pytest.fixture(autouse=True)
def no_writer_collapses() -> Iterator[None]:
    """No process writer's waiting thread (of an earlier test) collapses meanwhile."""
    with collapses_paused():
        yield


@contextmanager
def mapping(size: int) -> Iterator[tuple[mmap.mmap, int]]:
    """A private anonymous mapping of its own and its address.

    Marked ``MADV_DONTFORK`` on Linux, so that the kernel never merges it with a neighbour
    (the interpreter's arenas): /proc/self/smaps then shows it alone.
    """
    m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    view = ctypes.c_char.from_buffer(m)
    address = ctypes.addressof(view)
    del view
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        assert libc.madvise(address, size, MADV_DONTFORK) == 0
    try:
        yield m, address
    finally:
        m.close()


def smaps_field(address: int, field: str) -> int:
    """``field`` (kB) of the mapping of /proc/self/smaps that holds ``address``."""
    inside = False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                low, high = (int(x, 16) for x in head.split("-"))
                inside = low <= address < high
            elif inside and head == f"{field}:":
                return int(line.split()[1])
    raise AssertionError(f"no mapping holds {address:#x}")


def aligned_ranges(address: int, size: int) -> list[int]:
    first = -(-address // HUGE) * HUGE
    return list(range(first, (address + size) // HUGE * HUGE, HUGE))


def test_dense_ranges_become_huge_pages_with_their_bytes_unchanged() -> None:
    size = 8 * HUGE
    with mapping(size) as (m, address):
        content = os.urandom(size)
        m[:] = content  # every page resident
        expected = aligned_ranges(address, size)
        done = thp.collapse([(address, address + size)])
        assert m[:] == content
        if why := thp.available():  # not Linux with THP: nothing is tried, and it says why
            assert done == thp.Collapsed(unavailable=why)
            return
        assert done.unavailable == ""
        assert done.ranges + done.refused == len(expected) >= 7
        assert done.bytes == done.ranges * HUGE
        assert smaps_field(address, "AnonHugePages") == done.ranges * HUGE // 1024
        assert done.ranges > 0  # an idle machine has free huge pages for 16 MiB


def test_sparse_ranges_are_left_as_they_are() -> None:
    size = 8 * HUGE
    with mapping(size) as (m, address):
        for offset in range(0, size, 64 * PAGE):  # 8 of every 512 pages
            m[offset] = 1
        rss = smaps_field(address, "Rss")
        done = thp.collapse([(address, address + size)])
        assert (done.ranges, done.bytes) == (0, 0)
        assert smaps_field(address, "Rss") == rss  # no hole was filled
        assert smaps_field(address, "AnonHugePages") == 0
        # the threshold is the caller's: one page per range is enough with min_resident=1
        low = thp.collapse([(address, address + size)], min_resident=1)
        if not thp.available():
            assert low.ranges + low.refused == len(aligned_ranges(address, size))


def test_stop_is_asked_before_every_call() -> None:
    size = 8 * HUGE
    with mapping(size) as (m, address):
        m[:] = b"\x01" * size
        asked = []

        def stop() -> bool:
            asked.append(True)
            return len(asked) > 2

        done = thp.collapse([(address, address + size)], stop=stop)
        if thp.available():
            assert done.ranges == 0 and asked == []
            return
        assert len(asked) == 3
        assert done.ranges + done.refused == 2
        never = thp.collapse([(address, address + size)], stop=lambda: True)
        assert (never.ranges, never.refused) == (0, 0)


def test_min_resident_is_checked() -> None:
    for bad in (0, PER + 1):
        with pytest.raises(InvalidArgumentError, match="min_resident"):
            thp.collapse([], min_resident=bad)


def test_the_heap_is_every_private_writable_anonymous_mapping() -> None:
    maps = "\n".join([
        "55d0c000-55d0e000 r--p 00000000 08:01 123 /usr/bin/python3.11",
        "55d0e000-55d10000 rw-p 00002000 08:01 123 /usr/bin/python3.11",
        "55d10000-55d90000 rw-p 00000000 00:00 0 [heap]",
        "7f0000000000-7f0000400000 rw-p 00000000 00:00 0 ",
        "7f0000400000-7f0000600000 r--p 00000000 00:00 0",
        "7f0000600000-7f0000800000 rw-s 00000000 00:01 77 /dev/zero (deleted)",
        "7f0000800000-7f0000a00000 rw-p 00000000 00:00 0",
        "7ffc0000-7ffd0000 rw-p 00000000 00:00 0 [stack]",
        "garbage",
    ])
    assert list(thp.anonymous_regions(maps)) == [
        (0x55d10000, 0x55d90000), (0x7f0000000000, 0x7f0000400000),
        (0x7f0000800000, 0x7f0000a00000)]
    if not thp.available():  # the live process has a heap
        assert list(thp.anonymous_regions())


@given(st.lists(st.integers(0, PER), max_size=12), st.integers(1, PER),
       st.integers(0, PER - 1))
def test_dense_ranges_match_a_model(resident_per_range: list[int],
                                             min_resident: int, tail: int) -> None:
    first = 0x7F0000000000
    answer = b"".join(bytes([1 | 0xA0] * n + [0xFE] * (PER - n))  # undefined high bits set
                      for n in resident_per_range) + b"\x01" * tail  # a partial range: ignored
    starts = list(thp.dense_ranges(first, answer, min_resident))
    assert starts == [first + i * HUGE for i, n in enumerate(resident_per_range)
                      if n >= min_resident]
