"""The asynchronous half of a checkpoint: write in the background while processing goes on.

The synchronous half is the backends' ``snapshot()`` (O(buckets / 1024) per map, seeds 000 and
004); :func:`write_checkpoint_async` hands those snapshots to a writer of its own, which writes
key group by key group (:mod:`formats.statectl.writer`). Several checkpoints may be in flight at
once, each with its own writer. On failure or :meth:`PendingCheckpoint.cancel`, every snapshot
is released and the partial directory removed: nothing that looks like a checkpoint is left.

Two writers (``writer=``):

- ``"process"`` (the default on Linux when the checkpoint goes to the local disk): a forked
  child writes. The fork is the writer's copy of the state: the child sees the memory as it
  was at the fork (the kernel copies a page only when the parent writes to it), so the parent
  releases its map snapshots at once, goes on at full speed on its own core, and never shares
  its GIL with the writer. The child reports its metadata (or its error) through a pipe and
  exits with ``os._exit``. Forked from the main thread (the usual case: the processing thread
  triggers checkpoints), it dies with its parent (``PR_SET_PDEATHSIG``), so a killed job
  leaves no writer behind, only a staging directory that never looks like a checkpoint.
  When the fork fails (no memory or processes left), the thread writer takes over.
  The fork's cost is the parent's page tables; once a child has exited and no other is
  alive, the waiting thread collapses the heap's dense ranges into transparent huge pages
  (:mod:`formats.statectl.huge_pages`, ``huge_pages=False`` to leave memory as it is), so the
  next fork copies one entry per 2 MiB instead of 512.
- ``"thread"`` (other filesystems, whose client a forked child could not safely reuse; other
  systems than Linux; or on request): a worker thread writes and releases each key group's
  map snapshots as soon as it is written. It shares the GIL with the processing thread:
  gathering a row group's values and ``pa.array`` conversion hold it, so processing slows
  for the checkpoint's duration.

The benchmarks (``make bench``, section "checkpoint") measure both.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import select
import signal
import sys
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any

import pyarrow.fs as pafs

import statecore.errors as errors
from formats.statectl import huge_pages as thp
from formats.statectl.publish import METADATA_FILE
from formats.statectl.writer import close_snapshots, write_checkpoint
from formats.storage.commit import new_token, remove_staging
from formats.storage.filesystems import resolve_filesystem
from statecore.checkpoint import (
    CheckpointKind,
    CheckpointMetadata,
    OperatorSnapshot,
    metadata_from_json,
    metadata_to_json,
)
from statecore.errors import CheckpointError, InvalidArgumentError, StatectlError

__all__ = ["WRITERS", "PendingCheckpoint", "children_alive", "collapses_paused",
           "default_writer", "kill_writers", "write_checkpoint_async"]

WRITERS = ("process", "thread")
PR_SET_PDEATHSIG = 1  # linux/prctl.h

_children_lock = threading.Lock()
_children_alive = 0  # the process writers' children not yet reaped, in this process
_collapsing = threading.Lock()  # one heap collapse at a time
_in_flight: set[PendingCheckpoint] = set()  # process writers whose child may still write


def children_alive() -> int:
    """How many process writers' children of this process are running (or not yet reaped)."""
    return _children_alive


def kill_writers(timeout: float = 1.0) -> None:
    """Kill every process writer's child still writing, and wait (``timeout``) until it died.

    For the end of an interrupted process: once this returns, no checkpoint completes any
    more (a writer's child commits its checkpoint itself). Thread writers are cancelled.
    """
    with _children_lock:
        pending = list(_in_flight)
    pidfds = []
    for writer in pending:
        writer.kill()
        with writer._fds:
            if writer._pidfd is not None:
                pidfds.append(os.dup(writer._pidfd))
    deadline = time.monotonic() + timeout
    try:
        for fd in pidfds:  # a pidfd turns readable once its process has exited
            select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
    finally:
        for fd in pidfds:
            os.close(fd)


def _count_child(delta: int) -> None:
    global _children_alive
    with _children_lock:
        _children_alive += delta


@contextmanager
def collapses_paused() -> Iterator[None]:
    """While inside, no process writer collapses the heap (for a latency-critical phase).

    A collapse running on entry is waited for; writers whose child exits meanwhile skip
    theirs (their ``huge_pages`` stays ``None``).
    """
    with _collapsing:
        yield


def _collapse_heap() -> thp.Collapsed | None:
    """Collapse the heap into huge pages for the next fork, unless a child shares the pages.

    ``None`` then, or while another thread collapses already.
    """
    if not _collapsing.acquire(blocking=False):
        return None
    try:
        if children_alive():
            return None
        return thp.collapse_heap(stop=lambda: children_alive() > 0)
    except OSError as exc:  # e.g. no memory for the probe: memory stays as it is
        return thp.Collapsed(unavailable=f"collapsing failed: {exc}")
    finally:
        _collapsing.release()


class PendingCheckpoint:
    """A checkpoint being written in the background (a child process or a worker thread).

    ``result()`` waits for the metadata (it is complete only then: its ``_metadata.json`` is
    durably written) or raises what the write raised; ``cancel()`` asks the writer to stop at
    the next key group, after which ``result()`` raises
    :class:`~statecore.errors.CheckpointCancelledError`.
    """

    def __init__(self, checkpoint_id: int, location: str, writer: str = "thread") -> None:
        self.checkpoint_id = checkpoint_id
        self.location = location
        self.writer = writer
        self._cancel = threading.Event()
        self._cancel_fd: int | None = None  # the process writer's cancel pipe
        #: the process writer's child, as a pidfd: signalled safely even once it has exited
        self._pidfd: int | None = None
        self._fds = threading.Lock()  # kill() and the waiting thread's closing of the fds
        self._future: Future[CheckpointMetadata] = Future()
        self._thread: threading.Thread | None = None
        # the process writer's heap collapse after its child exited (None: not tried)
        self.huge_pages: thp.Collapsed | None = None

    def _write(self, operators: Sequence[OperatorSnapshot], kind: CheckpointKind,
               created_ms: int | None, filesystem: pafs.FileSystem | None,
               cancelled: Any, token: str | None = None) -> CheckpointMetadata:
        return write_checkpoint(self.location, self.checkpoint_id, operators, kind=kind,
                                created_ms=created_ms, filesystem=filesystem,
                                cancelled=cancelled, staging_token=token)

    def _start(self, operators: Sequence[OperatorSnapshot], kind: CheckpointKind,
               created_ms: int | None, filesystem: pafs.FileSystem | None) -> None:
        def run() -> None:
            self._future.set_running_or_notify_cancel()
            try:
                metadata = self._write(operators, kind, created_ms, filesystem,
                                       self._cancel.is_set)
            except BaseException as exc:  # handed to whoever waits on result()
                self._future.set_exception(exc)
            else:
                self._future.set_result(metadata)

        self._thread = threading.Thread(
            target=run, name=f"statectl-checkpoint-{self.checkpoint_id}", daemon=True)
        self._thread.start()

    def _start_process(self, operators: Sequence[OperatorSnapshot], kind: CheckpointKind,
                       created_ms: int | None, filesystem: pafs.FileSystem | None,
                       huge_pages: bool = True) -> None:
        token = new_token()
        result_read, result_write = os.pipe()
        cancel_read, cancel_write = os.pipe()
        forking_thread_is_main = threading.current_thread() is threading.main_thread()
        parent = os.getpid()
        forked: list[int] = []  # the child's pid, once forked
        interrupted: list[bool] = []  # a SIGINT that arrived during the fork
        ready = threading.Event()

        def wait() -> None:
            ready.wait()
            if not forked:  # the fork failed: the thread writer took over
                _count_child(-1)
                return
            (pid,) = forked
            # the child has its own copy of the state as it was: the parent's map snapshots
            # are not needed any more (releasing them ends copy-on-write in the maps); done
            # here, not on the processing thread, whose stall the fork already is
            close_snapshots(operators)
            chunks = []
            try:
                while chunk := os.read(result_read, 1 << 16):
                    chunks.append(chunk)
            finally:
                os.close(result_read)
            try:
                _, status = os.waitpid(pid, 0)
            except ChildProcessError:  # reaped elsewhere (SIGCHLD ignored): the report counts
                status = 0
            finally:
                _count_child(-1)
            self._close_cancel_fd()
            try:
                self._future.set_result(_reported(b"".join(chunks), status, self.location))
            except BaseException as exc:  # handed to whoever waits on result()
                fs, final = resolve_filesystem(self.location, filesystem)
                # a writer that died could not clean up
                remove_staging(fs, final, token, METADATA_FILE)
                self._future.set_exception(exc)
            if huge_pages:  # after the result: a checkpoint is not complete any later for it
                self.huge_pages = _collapse_heap()

        # The waiting thread starts before the fork: started after it, its stack and the
        # interpreter's thread state would be written into pages the fork just shared, a
        # copy-on-write fault each, all on the processing thread (4 ms for 500k keys).
        # Ctrl-C is held off from the waiting thread's start to the end of the set-up: a
        # KeyboardInterrupt inside Thread.start() left a thread that was never started (or one
        # waiting for a `ready` never set) for the caller's kill-and-join to trip on
        with _sigint_deferred(interrupted):
            self._thread = threading.Thread(
                target=wait, name=f"statectl-checkpoint-{self.checkpoint_id}", daemon=True)
            self._thread.start()
            _count_child(+1)  # before the fork: a collapse running elsewhere stops (the waiting
            # thread counts it off once the child is reaped, or at once if the fork fails)
            try:
                with warnings.catch_warnings():
                    # Python 3.12+ warns about forking a multi-threaded process: the child only
                    # runs the writer (pyarrow resets its thread pools in a forked child) and never
                    # returns from _child. The one lock it takes that another thread of the parent
                    # may hold (or be taking) at this instant is a map's version lock (an earlier
                    # checkpoint's waiting thread releasing its snapshots): every map renews its
                    # own in a forked child (statecore.copy_on_write_state_map)
                    warnings.filterwarnings("ignore", category=DeprecationWarning,
                                            message=".*fork.*")
                    try:
                        pid = os.fork()
                    except OSError:  # no memory or processes left for a child: write on a thread
                        for fd in (result_read, result_write, cancel_read, cancel_write):
                            os.close(fd)
                        self.writer = "thread"
                        self._start(operators, kind, created_ms, filesystem)
                        return
                if pid == 0:  # the child: write, report, exit (never returns)
                    os.close(result_read)
                    os.close(cancel_write)
                    _child(self, operators, kind, created_ms, filesystem, token, result_write,
                           cancel_read, parent, forking_thread_is_main)
                forked.append(pid)
                try:
                    self._pidfd = os.pidfd_open(pid)
                except (OSError, AttributeError):  # no pidfd (not Linux 5.3+): kill() cancels
                    self._pidfd = None
                with _children_lock:
                    _in_flight.add(self)
                os.close(result_write)
                os.close(cancel_read)
                self._cancel_fd = cancel_write
                self._future.set_running_or_notify_cancel()
            finally:
                ready.set()
        if interrupted:  # Ctrl-C during the set-up: raised now, with the child known (kill())
            raise KeyboardInterrupt

    def _close_cancel_fd(self) -> None:
        with _children_lock:
            _in_flight.discard(self)
        with self._fds:
            for name in ("_cancel_fd", "_pidfd"):
                fd = getattr(self, name)
                setattr(self, name, None)
                if fd is not None:
                    try:
                        os.close(fd)
                    except OSError:
                        pass

    def result(self, timeout: float | None = None) -> CheckpointMetadata:
        return self._future.result(timeout)

    def done(self) -> bool:
        return self._future.done()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the writer's thread, after-work included; whether it has ended.

        The process writer's thread collapses the heap after the result is set.
        """
        if self._thread is not None and self._thread.ident is not None:  # started
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    def cancel(self) -> None:
        """Ask the writer to stop; it cleans up and its result becomes a cancellation."""
        self._cancel.set()
        fd = self._cancel_fd
        if fd is not None:
            try:
                os.write(fd, b"c")
            except OSError:
                pass  # the writer has finished already

    def kill(self) -> None:
        """Stop the write at once: the process writer's child is killed (SIGKILL).

        Its waiting thread reaps it and removes what it staged, as for any writer that
        died; the result is an error. The thread writer cannot be killed: it is cancelled.
        """
        self.cancel()
        with self._fds:
            fd = self._pidfd
            if fd is not None and not self.done():
                try:
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
                except (OSError, AttributeError):
                    pass  # exited already

    def __repr__(self) -> str:
        state = "done" if self.done() else "in flight"
        return (f"PendingCheckpoint({self.checkpoint_id}, {self.location!r}, {self.writer}, "
                f"{state})")


@contextmanager
def _sigint_deferred(interrupted: list[bool]) -> Iterator[None]:
    """Hold Ctrl-C off while the process writer is set up (on the main thread; else nothing).

    From its waiting thread's start to the fork and after.

    A SIGINT handled during ``os.fork()`` runs Python's handler inside an at-fork hook
    (``logging``'s, in the parent or the copy in the child), where the ``KeyboardInterrupt``
    is printed and ignored: the build went on. It is recorded here instead, and the caller
    raises it once the child is set up.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous is not signal.default_int_handler:  # someone else's handler: leave it
        yield
        return
    signal.signal(signal.SIGINT, lambda *_: interrupted.append(True))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _child(pending: PendingCheckpoint, operators: Sequence[OperatorSnapshot],
           kind: CheckpointKind, created_ms: int | None, filesystem: pafs.FileSystem | None,
           token: str, result_fd: int, cancel_fd: int, parent: int,
           die_with_parent: bool) -> None:
    """The process writer, in the forked child: write the checkpoint, report, ``_exit``."""
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides (it cancels)
        gc.freeze()  # a collection would touch (and so copy) every page the parent had
        if die_with_parent and sys.platform.startswith("linux"):
            try:
                ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            except (OSError, AttributeError):
                pass
            if os.getppid() != parent:  # the parent died before prctl
                os._exit(1)

        def cancelled() -> bool:
            return bool(select.select([cancel_fd], [], [], 0)[0])

        try:
            metadata = pending._write(operators, kind, created_ms, filesystem, cancelled, token)
            report: dict[str, Any] = {"metadata": metadata_to_json(metadata)}
        except BaseException as exc:
            report = {"error": type(exc).__name__, "message": str(exc),
                      "statectl": isinstance(exc, StatectlError)}
        data = json.dumps(report, separators=(",", ":")).encode()
        view = memoryview(data)
        while view:
            view = view[os.write(result_fd, view):]
    except BaseException:
        code = 1
    finally:
        os._exit(code)


def _reported(data: bytes, status: int, location: str) -> CheckpointMetadata:
    """The child's report: the metadata it wrote, or its error raised here."""
    try:
        report = json.loads(data) if data else None
    except ValueError:
        report = None
    if not isinstance(report, dict):
        how = (f"was killed by signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
               else f"exited with code {os.WEXITSTATUS(status)}")
        raise CheckpointError(f"the writer of checkpoint {location} {how} before it finished; "
                              f"nothing was published")
    if "metadata" in report:
        return metadata_from_json(report["metadata"])
    name, message = str(report.get("error")), str(report.get("message"))
    error = getattr(errors, name, None)
    if report.get("statectl") and isinstance(error, type) and issubclass(error, StatectlError):
        raise error(message)
    raise CheckpointError(f"writing checkpoint {location} failed: {name}: {message}")


def default_writer(location: str, filesystem: pafs.FileSystem | None = None) -> str:
    """``"process"`` on Linux when the checkpoint goes to the local disk, else ``"thread"``.

    Not on macOS, where forking a process that has started system frameworks' threads is
    unsafe (Python's own ``multiprocessing`` stopped forking there), nor on Windows (no fork).
    """
    if not (hasattr(os, "fork") and sys.platform.startswith("linux")):
        return "thread"
    try:
        fs, _ = resolve_filesystem(location, filesystem)
    except StatectlError:
        return "thread"
    return "process" if isinstance(fs, pafs.LocalFileSystem) else "thread"


def write_checkpoint_async(
    location: str,
    checkpoint_id: int,
    operators: Sequence[OperatorSnapshot],
    *,
    kind: CheckpointKind = CheckpointKind.CHECKPOINT,
    created_ms: int | None = None,
    filesystem: pafs.FileSystem | None = None,
    writer: str | None = None,
    huge_pages: bool = True,
) -> PendingCheckpoint:
    """Start writing ``operators``' snapshots as a checkpoint and return at once.

    ``writer``: ``"process"`` or ``"thread"`` (see the module); ``None`` picks
    :func:`default_writer`. ``huge_pages`` (process writer): once the child has exited,
    collapse the heap into transparent huge pages for a shorter next fork
    (:mod:`formats.statectl.huge_pages`).
    """
    chosen = default_writer(location, filesystem) if writer is None else writer
    if chosen not in WRITERS:
        raise InvalidArgumentError(f"unknown checkpoint writer {writer!r}; use one of "
                                   f"{', '.join(WRITERS)}")
    pending = PendingCheckpoint(checkpoint_id, location, chosen)
    if chosen == "process":
        try:
            pending._start_process(operators, kind, created_ms, filesystem, huge_pages)
        except KeyboardInterrupt:
            # Ctrl-C held off during the fork, raised now: the caller never gets this write to
            # abort, so it is killed here and its staging removed before the interrupt goes on
            # (else the child would complete a checkpoint after the build said which is last)
            pending.kill()
            pending.join()
            raise
    else:
        pending._start(operators, kind, created_ms, filesystem)
    return pending
