"""Who is writing or reading: the owner recorded in markers, claims, pins and leases.

Every object statectl writes to coordinate processes (a checkpoint's ``_inprogress`` marker, a
checkpoint id's claim, a reader's pin, the state directory's writer lease) holds an
:class:`Owner` as JSON: a random token, the host name, the process id and its start time, and
when it was written. Whether the owner still runs decides whether what it left may be
cleaned up (:meth:`Owner.alive`):

- in this process, exactly: the record's holder (a writer, a pin, a lease) has not finished
  (:func:`holding`);
- on this host, exactly: the process exists and started when the owner says (a recycled pid
  is another process);
- on another host, by age: younger than ``stale_after_ms`` counts as alive. Nothing better is
  possible without a live connection; the writer lease renews itself so that a running build
  is never mistaken for a dead one (:mod:`formats.statectl.claims`).
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["STALE_AFTER_MS", "Owner", "hold", "holding", "let_go", "this_process"]

#: An owner on another host is presumed dead once its record is this old (15 minutes).
STALE_AFTER_MS = 15 * 60 * 1000


def _process_start(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot (Linux), or None where unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            # the command name (field 2) may hold spaces and parentheses: split after its end
            return int(stat.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


@dataclass(frozen=True)
class Owner:
    """A process that writes or reads a state directory (see the module doc)."""

    token: str
    host: str
    pid: int
    pid_start: int | None
    since_ms: int

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Owner | None:
        """The owner in ``data``, or None when it is not one (damaged or foreign)."""
        try:
            raw: Any = json.loads(data)
            return cls(str(raw["token"]), str(raw["host"]), int(raw["pid"]),
                       None if raw.get("pid_start") is None else int(raw["pid_start"]),
                       int(raw["since_ms"]))
        except (ValueError, TypeError, KeyError, UnicodeDecodeError):
            return None

    def alive(self, now_ms: int | None = None, stale_after_ms: int = STALE_AFTER_MS) -> bool:
        """Whether the owner may still run (exact on this host, by age elsewhere)."""
        if self.host == socket.gethostname():
            if self.pid == os.getpid():
                return self.token in _HELD
            start = _process_start(self.pid)
            if start is None:
                try:
                    os.kill(self.pid, 0)
                except ProcessLookupError:
                    return False
                except PermissionError:
                    return True  # exists, another user's
                return self.pid_start is None
            return self.pid_start is None or start == self.pid_start
        now = int(time.time() * 1000) if now_ms is None else now_ms
        return now - self.since_ms < stale_after_ms

    def describe(self) -> str:
        since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.since_ms / 1000))
        return f"pid {self.pid} on {self.host}, since {since}"


#: Tokens of this process's records whose holder has not finished (see :func:`holding`).
_HELD: set[str] = set()


@contextmanager
def holding(owner: Owner) -> Iterator[Owner]:
    """Mark ``owner``'s records as live in this process for the block.

    A record this process left behind because its store was unreachable when it finished (a
    lease it could not delete) then counts as gone, here as in any other process.
    """
    hold(owner)
    try:
        yield owner
    finally:
        let_go(owner)


def hold(owner: Owner) -> None:
    """``owner``'s records are live in this process until :func:`let_go`."""
    _HELD.add(owner.token)


def let_go(owner: Owner) -> None:
    _HELD.discard(owner.token)


def this_process(token: str | None = None) -> Owner:
    """The current process as an owner (a fresh random token unless given)."""
    pid = os.getpid()
    return Owner(token or uuid.uuid4().hex[:12], socket.gethostname(), pid,
                 _process_start(pid), int(time.time() * 1000))
