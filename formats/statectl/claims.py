"""One state directory, several processes: ids claimed once, one writer, readers protected.

Everything lives under ``<root>/_claims/`` (ignored by listings), written with the conditional
writes of :mod:`formats.storage.conditional`, each object holding its
:class:`~formats.storage.owners.Owner`:

``id-0000042``
    the claim of checkpoint id 42 (``chk-0000042`` or ``savepoint-0000042``), created
    create-only: whoever creates it owns the id, so no id is ever issued twice. Claims go with
    their checkpoint when it is deleted, except the highest, which keeps the ids counting up.
``writer``
    the writer lease: the one build (``build``, ``snapshot take --input``) allowed to take
    checkpoints in the directory. A second build gets a
    :class:`~statecore.errors.ConcurrentWriteError`. On the local disk it is an ``flock`` on
    the file, released by the kernel when the holder dies. On an object store it is a lease
    object with an expiry (:data:`LEASE_SECONDS`), renewed every third of it by a thread of
    the holder with a compare-and-swap; it is taken over (compare-and-swap again) once it
    expired or, at once, when its holder ran on this host and is gone.
``read-0000042-<token>``
    a pin: a process reads checkpoint 42 (a resume restores it, a savepoint copies it).
``release-0000042``
    an intent: a process deletes checkpoint 42.

A reader writes its pin, then looks for an intent; a releaser writes its intent, then looks for
pins. Whichever comes second sees the other and backs off (the stores are strongly consistent:
local disks, S3 since 2020, S3-compatible servers), so retention and ``snapshot release``
never delete a checkpoint being read. A pin or intent whose owner is gone
(:meth:`~formats.storage.owners.Owner.alive`) is ignored and removed by ``snapshot prune``.

Where conditional writes are only best effort (:func:`formats.storage.conditional.guarantee`), so
are these guarantees: run one process per state directory there.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from typing import IO

import pyarrow.fs as pafs

from formats.storage.conditional import create_only, read_versioned, replace_if
from formats.storage.filesystems import redact, renames_atomically, unwrap
from formats.storage.owners import Owner, hold, holding, let_go, this_process
from statecore.errors import ConcurrentWriteError, StatectlError

__all__ = ["CLAIMS_DIR", "LEASE_SECONDS", "Claims", "Lease"]

CLAIMS_DIR = "_claims"
#: How long an object-store writer lease lasts without renewal (renewed every third of it).
LEASE_SECONDS = 30.0
#: How many ids a claim tries past the first taken one before giving up.
CLAIM_ATTEMPTS = 1000


@dataclass(frozen=True)
class _LeaseRecord:
    owner: Owner
    expires_ms: int

    def to_bytes(self) -> bytes:
        return json.dumps({**asdict(self.owner), "expires_ms": self.expires_ms},
                          sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> _LeaseRecord | None:
        owner = Owner.from_bytes(data)
        try:
            expires = int(json.loads(data)["expires_ms"])
        except (ValueError, TypeError, KeyError, UnicodeDecodeError):
            return None
        return None if owner is None else cls(owner, expires)

    def held(self, now_ms: int) -> bool:
        """Whether the lease still binds: not expired, and its holder not known to be dead."""
        if now_ms >= self.expires_ms:
            return False
        return self.owner.alive(now_ms, stale_after_ms=1 << 62)


# flock'ed lease files of this process, closed in forked children (so that a child writer
# outliving a killed parent never keeps the lock)
_LOCKED: dict[str, IO[bytes]] = {}


def _close_locks_in_child() -> None:
    # closing the child's copy of the descriptor keeps the lock: it belongs to the open file
    # description, which the parent's descriptor still holds (no LOCK_UN here)
    for handle in _LOCKED.values():
        try:
            handle.close()
        except OSError:
            pass
    _LOCKED.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_locks_in_child)


class Lease:
    """The writer lease of a state directory, held (see the module doc)."""

    def __init__(self, claims: Claims, owner: Owner) -> None:
        self.claims, self.owner = claims, owner
        self.lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._handle: IO[bytes] | None = None
        self._version = ""

    def check(self) -> None:
        """Raise :class:`ConcurrentWriteError` if the lease was lost to another process."""
        if self.lost:
            raise ConcurrentWriteError(
                f"lost the state directory {redact(self.claims.root)} to another process (its "
                f"lease was not renewed in time); this build stops without further checkpoints")

    # -- the local disk: flock -----------------------------------------------------------------

    def _lock(self) -> None:
        path = self.claims.path("writer")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        handle = open(path, "a+b")  # noqa: SIM115 - held until released
        try:
            if path in _LOCKED:  # flock would grant it again to this process
                raise BlockingIOError
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _holder(handle)
            handle.close()  # (another descriptor: closing it keeps the holder's flock)
            raise ConcurrentWriteError(self.claims.busy(
                holder.describe() if holder else "another process")) from None
        handle.seek(0)
        handle.truncate()
        handle.write(self.owner.to_bytes())
        handle.flush()
        self._handle = handle
        _LOCKED[path] = handle

    # -- object stores: a lease object ---------------------------------------------------------

    def _record(self) -> bytes:
        expires = int((time.time() + LEASE_SECONDS) * 1000)
        return _LeaseRecord(self.owner, expires).to_bytes()

    def _acquire_object(self) -> None:
        fs, path = self.claims.fs, self.claims.path("writer")
        for _ in range(3):
            if create_only(fs, path, self._record()):
                current = read_versioned(fs, path)
                if current is None or Owner.from_bytes(current[0]) != self.owner:
                    continue  # taken over at once: only by a process judging us dead
                self._version = current[1]
                return
            current = read_versioned(fs, path)
            if current is None:
                continue  # released meanwhile
            record = _LeaseRecord.from_bytes(current[0])
            if record is not None and record.held(int(time.time() * 1000)):
                raise ConcurrentWriteError(self.claims.busy(record.owner.describe()))
            version = replace_if(fs, path, self._record(), current[1])
            if version is not None:
                self._version = version
                return
        raise ConcurrentWriteError(self.claims.busy("another process"))

    def _renew(self) -> None:
        deadline = time.monotonic() + LEASE_SECONDS
        while not self._stop.wait(LEASE_SECONDS / 3):
            try:
                version = replace_if(self.claims.fs, self.claims.path("writer"), self._record(),
                                     self._version)
            except (OSError, StatectlError):
                version = ""  # unreachable: try again until the lease would expire
            if version is None:
                self.lost = True
                return
            if version:
                self._version = version
                deadline = time.monotonic() + LEASE_SECONDS
            elif time.monotonic() > deadline:
                self.lost = True
                return

    def acquire(self) -> Lease:
        hold(self.owner)
        try:
            return self._acquire()
        except BaseException:
            let_go(self.owner)
            raise

    def _acquire(self) -> Lease:
        if renames_atomically(self.claims.fs) and isinstance(unwrap(self.claims.fs),
                                                              pafs.LocalFileSystem):
            self._lock()
            return self
        self._acquire_object()
        self._thread = threading.Thread(target=self._renew, daemon=True,
                                        name="statectl-lease")
        self._thread.start()
        return self

    def release(self) -> None:
        let_go(self.owner)
        if self._handle is not None:
            _LOCKED.pop(self.claims.path("writer"), None)
            self._handle.close()  # unlocks
            self._handle = None
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.lost:
            return
        try:
            current = read_versioned(self.claims.fs, self.claims.path("writer"))
            if current is not None and current[1] == self._version:
                self.claims.fs.delete_file(self.claims.path("writer"))
        except (OSError, StatectlError):
            pass  # the store is unreachable: the lease expires (or, here, counts as gone)


class Claims:
    """The coordination objects of the state directory ``root`` on ``fs`` (module doc)."""

    def __init__(self, fs: pafs.FileSystem, root: str) -> None:
        self.fs, self.root = fs, root
        self.owner = this_process()
        #: the highest id claimed as far as this process knows (None: not looked yet); a
        #: claim tries the next id first and lists the claims only when it was taken
        self._highest: int | None = None

    def path(self, name: str) -> str:
        return f"{self.root}/{CLAIMS_DIR}/{name}"

    def busy(self, holder: str) -> str:
        return (f"another build is writing to {redact(self.root)} ({holder}); wait until it "
                "has finished (or stop it) and run again")

    def _names(self) -> list[str]:
        selector = pafs.FileSelector(f"{self.root}/{CLAIMS_DIR}", allow_not_found=True)
        try:
            infos = self.fs.get_file_info(selector)
        except FileNotFoundError:
            # Arrow's local listing may still fail while another process creates the directory
            # (allow_not_found covers a directory missing when looked at, not one appearing)
            return []
        return sorted(info.base_name for info in infos if info.type == pafs.FileType.File)

    def _read_owner(self, name: str) -> Owner | None:
        found = read_versioned(self.fs, self.path(name))
        return None if found is None else Owner.from_bytes(found[0])

    # -- ids -----------------------------------------------------------------------------------

    def highest_id(self) -> int:
        ids = [int(n[3:]) for n in self._names() if n.startswith("id-") and n[3:].isdigit()]
        return max(ids, default=0)

    def claim_id(self, candidate: int, taken: set[int] | None = None) -> int:
        """Claim ``candidate`` or the next free id after it (and after every claimed one).

        ``taken`` are ids known to be in use otherwise (a directory with that name exists);
        they are claimed too (burnt) and skipped. Ids go up: a claim is above every claim
        this process has seen, and above every claim when it had to look.
        """
        if self._highest is None:
            self._highest = self.highest_id()
        checkpoint_id = max(candidate, self._highest + 1)
        for _ in range(CLAIM_ATTEMPTS):
            if create_only(self.fs, self.path(f"id-{checkpoint_id:07d}"),
                           replace(self.owner, since_ms=int(time.time() * 1000)).to_bytes()):
                self._highest = checkpoint_id
                if taken is None or checkpoint_id not in taken:
                    return checkpoint_id
                checkpoint_id += 1
            else:  # another process claimed it: continue after the highest claim
                checkpoint_id = max(checkpoint_id, self.highest_id()) + 1
        raise ConcurrentWriteError(f"no free checkpoint id in {redact(self.root)} after "
                                   f"{checkpoint_id}")

    def drop_id(self, checkpoint_id: int) -> None:
        """Forget the claim of a deleted checkpoint (the highest claim stays: ids go up)."""
        known = self._highest if self._highest is not None and self._highest > checkpoint_id \
            else self.highest_id()
        if checkpoint_id < known:
            try:
                self.fs.delete_file(self.path(f"id-{checkpoint_id:07d}"))
            except OSError:
                pass

    # -- the writer lease ----------------------------------------------------------------------

    def acquire_writer(self) -> Lease:
        """The writer lease, or :class:`ConcurrentWriteError` naming its holder."""
        return Lease(self, this_process()).acquire()

    def writer(self) -> Owner | None:
        """The holder of a live writer lease on an object store, or None."""
        found = read_versioned(self.fs, self.path("writer"))
        record = None if found is None else _LeaseRecord.from_bytes(found[0])
        if record is None or not record.held(int(time.time() * 1000)):
            return None
        return record.owner

    # -- pins and intents ----------------------------------------------------------------------

    def _live(self, prefix: str) -> list[tuple[str, Owner | None]]:
        out = []
        for name in self._names():
            if name.startswith(prefix):
                owner = self._read_owner(name)
                if owner is None or self.alive(owner):
                    out.append((name, owner))
        return out

    def alive(self, owner: Owner) -> bool:
        """Whether ``owner`` may still run; a remote one is alive while it holds the lease."""
        if owner.alive():
            return True
        if owner.host == socket.gethostname():
            return False  # known exactly: it is gone
        holder = self.writer()
        return holder is not None and (holder.host, holder.pid) == (owner.host, owner.pid)

    def pin(self, checkpoint_id: int) -> str:
        """Pin checkpoint ``checkpoint_id`` for reading (see the module doc); the pin's name.

        Refused (:class:`ConcurrentWriteError`) while another process releases it. Unpin with
        :meth:`remove`.
        """
        owner = this_process()
        pin = f"read-{checkpoint_id:07d}-{owner.token}"
        hold(owner)
        create_only(self.fs, self.path(pin), owner.to_bytes())
        releasing = self._live(f"release-{checkpoint_id:07d}")
        if releasing:
            self.remove(pin)
            raise ConcurrentWriteError(
                f"checkpoint {checkpoint_id} in {redact(self.root)} is being released by "
                f"another process ({_who(releasing[0][1])})")
        return pin

    @contextmanager
    def releasing(self, checkpoint_id: int) -> Iterator[None]:
        """Mark checkpoint ``checkpoint_id`` as being deleted, refused while it is read."""
        intent = f"release-{checkpoint_id:07d}"
        with holding(this_process()) as owner:
            yield from self._releasing(checkpoint_id, intent, owner)

    def _releasing(self, checkpoint_id: int, intent: str, owner: Owner) -> Iterator[None]:
        if not create_only(self.fs, self.path(intent), owner.to_bytes()):
            other = self._read_owner(intent)
            if other is not None and self.alive(other):
                raise ConcurrentWriteError(
                    f"checkpoint {checkpoint_id} in {redact(self.root)} is being released by "
                    f"another process ({other.describe()})")
            self._delete(intent)  # its releaser died: take over
            if not create_only(self.fs, self.path(intent), owner.to_bytes()):
                raise ConcurrentWriteError(
                    f"checkpoint {checkpoint_id} in {redact(self.root)} is being released by "
                    "another process")
        try:
            readers = self._live(f"read-{checkpoint_id:07d}-")
            if readers:
                raise ConcurrentWriteError(
                    f"checkpoint {checkpoint_id} in {redact(self.root)} is being read "
                    f"({_who(readers[0][1])}); release it once that is done")
            yield
        finally:
            self._delete(intent)

    def _delete(self, name: str) -> None:
        try:
            self.fs.delete_file(self.path(name))
        except OSError:
            pass  # `snapshot prune` removes it once its owner is gone

    def stale(self) -> list[str]:
        """Pins and intents whose owners are gone (for ``snapshot prune``)."""
        out = []
        for name in self._names():
            if name.startswith(("read-", "release-")):
                owner = self._read_owner(name)
                if owner is None or not self.alive(owner):
                    out.append(name)
        return out

    def remove(self, name: str) -> None:
        """Delete a pin or intent (a pin's owner is then no longer live here)."""
        if name.startswith("read-"):
            let_go(replace(self.owner, token=name.rsplit("-", 1)[1]))
        self._delete(name)


def _holder(handle: IO[bytes]) -> Owner | None:
    """The owner written in a locked writer file, waiting a moment for it.

    The holder writes its record just after taking the ``flock``; a loser in between reads an
    empty (or half-written) file, so it reads again for up to a second before saying "another
    process".
    """
    for _ in range(100):
        handle.seek(0)
        owner = Owner.from_bytes(handle.read(1 << 16))
        if owner is not None:
            return owner
        time.sleep(0.01)
    return None


def _who(owner: Owner | None) -> str:
    return owner.describe() if owner is not None else "an unknown process"
