"""Reading many small things at once: a bounded pool whose results keep their items' order.

Listing a bucket of hundreds of checkpoints reads each one's metadata: one request after the
other that is hundreds of round trips, so :func:`in_order` keeps up to :data:`READERS` of them
in flight. The results come back in the items' order whatever order the reads end in, so what
is listed never depends on timing; the first error raised (in the items' order) is raised.
On the local disk a read is a copy from the page cache: threads would only add their start-up
(milliseconds each on a busy machine), so :func:`readers_for` gives it one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import pyarrow.fs as pafs

from formats.storage.filesystems import unwrap

__all__ = ["READERS", "in_order", "readers_for"]

#: How many reads :func:`in_order` keeps in flight at most.
READERS = 8

T = TypeVar("T")
R = TypeVar("R")


def in_order(function: Callable[[T], R], items: Sequence[T], limit: int = READERS) -> list[R]:
    """``[function(item) for item in items]``, up to ``limit`` calls at once (``limit >= 1``).

    ``function`` runs on worker threads: it must not need the caller's thread (a click
    context, say). One item, or ``limit == 1``, runs on the calling thread.
    """
    if len(items) < 2 or limit < 2:
        return [function(item) for item in items]
    with ThreadPoolExecutor(min(limit, len(items)), thread_name_prefix="statectl-read") as pool:
        return list(pool.map(function, items))


def readers_for(filesystems: Iterable[pafs.FileSystem]) -> int:
    """How many reads to keep in flight over ``filesystems``.

    :data:`READERS` where one of them is remote (an object store, HDFS); 1 on the local disk.
    """
    remote = any(unwrap(fs).type_name != "local" for fs in filesystems)
    return READERS if remote else 1
