"""Transparent huge pages for the interpreter's heap: a shorter fork for the process writer.

``fork()`` copies the parent's page tables: one entry per 4 KiB page of anonymous memory, plus
a reference on each page (Linux ``mm/memory.c``, ``copy_pte_range``). For a state of 500k keys
(about 160 MB of heap) that is 40k entries, 6 ms of kernel time on the benchmark VM, and the
processing thread waits for all of it: the fork is the longest stall of an asynchronous
checkpoint. A transparent huge page (2 MiB on x86-64) is one entry, copied by
``copy_huge_pmd`` (``mm/huge_memory.c``): the fork of a heap in huge pages takes a fraction of
a millisecond.

CPython's allocator maps its arenas (1 MiB each) itself, and glibc's heap grows by ``brk``;
neither asks for huge pages. With the kernel's THP mode ``madvise`` (the common default) a
region gets huge pages only on request. :func:`collapse_heap` asks for them after the fact:
``madvise(MADV_COLLAPSE)`` (Linux 6.1, ``mm/khugepaged.c``, ``madvise_collapse``) copies each
2 MiB-aligned range of the process's private anonymous memory into one huge page, synchronously,
on the calling thread (``ctypes`` releases the GIL for the call, so processing goes on).

Deliberate limits:

- **Only dense ranges.** A range is collapsed only when at least ``min_resident`` of its 512
  pages are resident (``mincore``): a collapse fills the holes of its range, so the heap grows
  by at most 1/8 of what is collapsed (``MADV_COLLAPSE`` ignores ``khugepaged``'s
  ``max_ptes_none``, so the bound is ours).
- **Never while a forked writer shares the pages.** ``MADV_COLLAPSE`` also ignores
  ``max_ptes_shared``: a range still shared with a child would be copied for the parent,
  doubling its memory. The caller passes ``stop``; the process writer's stops as soon as one
  of its children is alive (checked before every call, so at most one huge page is collapsed
  after a fork started).
- **One huge page at a time, spaced.** A collapse copies its range with the mmap lock held for
  writing (``collapse_huge_page``), so the other threads' page faults in that mapping wait
  for it: about 0.6 ms per huge page on the benchmark VM when the kernel has a free huge page
  at hand, about 5 ms when the hypervisor must first back a fresh one (free page reporting).
  One ``madvise`` per huge page with ``PAUSE`` between them lets the processing thread's
  faults through between two copies instead of after all of them.
- **Again after every fork.** The parent's first write into a shared huge page splits its
  entry back into 512 small ones (since Linux 5.8 an anonymous THP's copy-on-write fault splits
  the PMD and copies one 4 KiB page, ``do_huge_pmd_wp_page``), so the writer collapses again
  once its child has exited. The first checkpoint of a process forks the heap as it found it.
- **Nothing else changes.** No ``MADV_HUGEPAGE`` (new faults keep the system's default), no
  sysfs setting, no memory content: a collapse is invisible except in ``/proc/self/smaps``.

Elsewhere (not Linux, THP ``never``, a kernel before 6.1, no ``mincore``) it does nothing and
says so in its :class:`Collapsed` report.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from statecore.errors import InvalidArgumentError

__all__ = ["HUGE_PAGE", "Collapsed", "anonymous_regions", "available", "collapse",
           "collapse_heap", "dense_ranges"]

HUGE_PAGE = 2 << 20  # x86-64 and arm64 with 4 KiB pages: a PMD maps 2 MiB
PAGE = 4096
PAGES_PER_HUGE = HUGE_PAGE // PAGE
MADV_COLLAPSE = 25  # linux/mman.h (asm-generic/mman-common.h), Linux 6.1
WINDOW_BYTES = 64 << 20  # mincore() is asked about this much at a time (16 KiB of answer)
PAUSE = 0.001  # seconds between two collapses: the other threads' page faults get through
THP_ENABLED = Path("/sys/kernel/mm/transparent_hugepage/enabled")
_LOW_BIT = bytes(i & 1 for i in range(256))  # mincore: only bit 0 of each byte is defined


@dataclass(frozen=True)
class Collapsed:
    """What :func:`collapse` did.

    Dense huge-page ranges collapsed and their bytes, ranges the kernel refused (busy or no
    memory: left as they were), and why nothing was tried.
    """

    ranges: int = 0
    bytes: int = 0
    refused: int = 0
    unavailable: str = ""


_unsupported = ""  # why MADV_COLLAPSE cannot work, once _probe() has asked the kernel
_probed: list[bool] = []


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        madvise, mincore = libc.madvise, libc.mincore
    except (OSError, AttributeError):
        return None
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    mincore.restype = ctypes.c_int
    return libc


def available() -> str:
    """Empty when collapsing can work here, else why not."""
    if not sys.platform.startswith("linux"):
        return "not Linux"
    if os.sysconf("SC_PAGE_SIZE") != PAGE:
        return f"page size {os.sysconf('SC_PAGE_SIZE')}, not {PAGE}"
    if _unsupported:
        return _unsupported
    try:
        mode = THP_ENABLED.read_text()
    except OSError:
        return "no transparent huge pages in this kernel"
    if "[never]" in mode:
        return "transparent huge pages are disabled ([never])"
    return ""


def anonymous_regions(maps: str | None = None) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of this process's private, writable, anonymous mappings.

    glibc's ``[heap]`` included; from ``/proc/self/maps`` (or ``maps``, its text).
    """
    text = Path("/proc/self/maps").read_text() if maps is None else maps
    for line in text.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) < 5:
            continue
        span, perms = fields[0], fields[1]
        name = fields[5].strip() if len(fields) == 6 else ""
        if perms[:2] != "rw" or perms[3:4] != "p" or name not in ("", "[heap]"):
            continue
        low, _, high = span.partition("-")
        try:
            yield int(low, 16), int(high, 16)
        except ValueError:
            continue


def dense_ranges(first: int, resident: bytes, min_resident: int) -> Iterator[int]:
    """Start addresses of the dense huge-page ranges of a window.

    ``first``: the window's first address (huge-page aligned); ``resident``: ``mincore``'s
    answer for it, one byte per page (only bit 0 is defined). A range is dense when at least
    ``min_resident`` of its pages are resident; a partial range at the end is not looked at.
    """
    bits = resident.translate(_LOW_BIT)
    for page in range(0, len(bits) - PAGES_PER_HUGE + 1, PAGES_PER_HUGE):
        if bits.count(1, page, page + PAGES_PER_HUGE) >= min_resident:
            yield first + page * PAGE


def _dense_starts(libc: ctypes.CDLL, start: int, end: int, min_resident: int
                  ) -> Iterator[int]:
    """:func:`dense_ranges` over ``[start, end)``, ``mincore`` asked one window at a time."""
    first = -(-start // HUGE_PAGE) * HUGE_PAGE
    last = end // HUGE_PAGE * HUGE_PAGE
    answer = ctypes.create_string_buffer(WINDOW_BYTES // PAGE)
    for low in range(first, last, WINDOW_BYTES):
        high = min(low + WINDOW_BYTES, last)
        if libc.mincore(low, high - low, answer) != 0:
            continue  # unmapped meanwhile (ENOMEM): nothing to collapse there
        yield from dense_ranges(low, answer.raw[:(high - low) // PAGE], min_resident)


def collapse(regions: Iterable[tuple[int, int]], *, stop: Callable[[], bool] = lambda: False,
             min_resident: int = PAGES_PER_HUGE * 7 // 8, pause: float = PAUSE) -> Collapsed:
    """Collapse the dense 2 MiB-aligned ranges of ``regions`` into transparent huge pages.

    One ``madvise`` call per huge page, ``pause`` seconds apart; ``stop`` is asked before
    every call, and once it says yes nothing more is collapsed.
    """
    if not 1 <= min_resident <= PAGES_PER_HUGE:
        raise InvalidArgumentError(f"min_resident must be 1..{PAGES_PER_HUGE}, got "
                                   f"{min_resident}")
    if why := available():
        return Collapsed(unavailable=why)
    libc = _libc()
    if libc is None:
        return Collapsed(unavailable="no madvise or mincore in the C library")
    if why := _probe(libc):
        return Collapsed(unavailable=why)
    ranges = size = refused = 0
    for start, end in list(regions):
        for low in _dense_starts(libc, start, end, min_resident):
            if ranges or refused:
                time.sleep(pause)
            if stop():
                return Collapsed(ranges, size, refused)
            if libc.madvise(low, HUGE_PAGE, MADV_COLLAPSE) == 0:
                ranges += 1
                size += HUGE_PAGE
            else:  # EAGAIN (busy), ENOMEM (no huge page free), EINVAL (a region that
                refused += 1  # refuses huge pages, VM_NOHUGEPAGE): left as it was
    return Collapsed(ranges, size, refused)


def _probe(libc: ctypes.CDLL) -> str:
    """Empty when this kernel knows ``MADV_COLLAPSE``, else why not.

    Asked once, on a fresh private anonymous mapping with every page of one aligned
    huge-page range touched.
    """
    global _unsupported
    if _probed:
        return _unsupported
    probe = mmap.mmap(-1, 2 * HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        view = ctypes.c_char.from_buffer(probe)
        base = ctypes.addressof(view)
        del view
        aligned = -(-base // HUGE_PAGE) * HUGE_PAGE
        for address in range(aligned, aligned + HUGE_PAGE, PAGE):
            probe[address - base] = 1
        if libc.madvise(aligned, HUGE_PAGE, MADV_COLLAPSE) != 0 \
                and ctypes.get_errno() == errno.EINVAL:
            _unsupported = "this kernel has no MADV_COLLAPSE (Linux 6.1 or later has)"
    finally:
        probe.close()
    _probed.append(True)
    return _unsupported


def collapse_heap(*, stop: Callable[[], bool] = lambda: False,
                  min_resident: int = PAGES_PER_HUGE * 7 // 8) -> Collapsed:
    """:func:`collapse` over every private anonymous mapping of this process."""
    if why := available():
        return Collapsed(unavailable=why)
    try:
        regions = list(anonymous_regions())
    except OSError as exc:
        return Collapsed(unavailable=f"cannot read /proc/self/maps: {exc}")
    return collapse(regions, stop=stop, min_resident=min_resident)
