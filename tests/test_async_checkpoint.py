"""Asynchronous checkpoints: processing goes on while a writer (a forked process or a thread)
writes; cancel, failure and a killed writer leave nothing that looks like a checkpoint, and
every map snapshot is released; the process writer collapses the heap into huge pages only
once no child shares it."""

from __future__ import annotations

import copy
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest

from formats.open import open_checkpoint
from formats.statectl import async_writer
from formats.statectl import huge_pages as thp
from formats.statectl.async_writer import (
    PendingCheckpoint,
    children_alive,
    default_writer,
    write_checkpoint_async,
)
from formats.statectl.storage import DirectoryCheckpointStorage
from statecore.checkpoint import CheckpointKind, OperatorSnapshot, SubtaskSnapshot
from statecore.errors import (
    CheckpointCancelledError,
    CheckpointError,
    InvalidArgumentError,
    UnsupportedFormatError,
)
from statecore.keyed_backend import HeapKeyedStateBackend, KeyedStateSnapshot
from statecore.keyed_state import list_state, value_state

KEYS = [f"key-{i}" for i in range(3000)]
WRITERS = pytest.mark.parametrize("writer", ["process", "thread"])


def make_backend() -> HeapKeyedStateBackend[str]:
    backend: HeapKeyedStateBackend[str] = HeapKeyedStateBackend("string", 128)
    value = backend.get_value_state(value_state("count", "int64"))
    items = backend.get_list_state(list_state("items", "int64"))
    for i, key in enumerate(KEYS):
        backend.set_current_key(key)
        value.update(i)
        items.add_all([i, i + 1])
    return backend


def stored(backend: HeapKeyedStateBackend[str]) -> dict[str, dict[Any, Any]]:
    return {d.name: {(e.key, e.namespace): e.state for e in backend.table(d.name)}
            for d in backend.descriptors}


def restored_state(location: Path) -> dict[str, dict[Any, Any]]:
    """What a checkpoint written from :func:`make_backend`'s states restores."""
    restored: HeapKeyedStateBackend[str] = HeapKeyedStateBackend("string", 128)
    restored.get_value_state(value_state("count", "int64"))
    restored.get_list_state(list_state("items", "int64"))
    open_checkpoint(str(location)).restore_keyed("op", restored)
    return stored(restored)


def pinned_versions(backend: HeapKeyedStateBackend[str]) -> set[int]:
    return {v for d in backend.descriptors
            for _, m in backend.table(d.name).items_by_key_group()
            for v in m.snapshot_versions}  # type: ignore[attr-defined]


def operator(snapshot: Any) -> list[OperatorSnapshot]:
    return [OperatorSnapshot("op", "op", 1, 128, [SubtaskSnapshot(0, snapshot)])]


@WRITERS
def test_processing_continues_and_the_checkpoint_holds_the_trigger_point(
        tmp_path: Path, writer: str) -> None:
    backend = make_backend()
    # a deep copy: once the writer has released a key group, the owner's appends mutate the
    # live lists in place (nothing shares them any more)
    expected = copy.deepcopy(stored(backend))
    pending = write_checkpoint_async(str(tmp_path / "chk-1"), 1, operator(backend.snapshot()),
                                     writer=writer)
    if writer == "process":  # the child has its copy: the parent's snapshots are released
        # (by the thread that waits for the child, right after the fork)
        deadline = time.monotonic() + 10
        while pinned_versions(backend) and time.monotonic() < deadline:
            time.sleep(0.001)
        assert pinned_versions(backend) == set()
    value = backend.get_value_state(value_state("count", "int64"))
    items = backend.get_list_state(list_state("items", "int64"))
    rounds = 0
    while not pending.done() or rounds == 0:  # write on the owner thread meanwhile
        for key in KEYS[rounds % 10::10]:
            backend.set_current_key(key)
            value.update(-1)
            items.add(-1)
        rounds += 1
    metadata = pending.result(timeout=60)
    assert metadata.checkpoint_id == 1
    assert restored_state(tmp_path / "chk-1") == expected
    assert stored(backend) != expected  # the owner really kept writing
    assert pinned_versions(backend) == set()


class GatedSnapshot(KeyedStateSnapshot):
    """Stops after two key groups until the test opens the gate.

    The signals are files, so that they cross from a forked writer to the test.
    """

    def __init__(self, inner: KeyedStateSnapshot, signals: Path) -> None:
        self.__dict__.update(inner.__dict__)
        self.first_written = signals / "first-written"
        self.gate = signals / "gate"

    def __iter__(self) -> Iterator[Any]:
        for i, block in enumerate(super().__iter__()):
            if i == 2:
                self.first_written.write_text(str(os.getpid()))
                assert wait_for(self.gate.exists)
            yield block


def wait_for(condition: Any, seconds: float = 30) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


@WRITERS
def test_cancel_mid_write_removes_everything_and_releases_snapshots(
        tmp_path: Path, writer: str) -> None:
    backend = make_backend()
    (tmp_path / "signals").mkdir()
    (tmp_path / "out").mkdir()
    snapshot = GatedSnapshot(backend.snapshot(), tmp_path / "signals")
    pending = write_checkpoint_async(str(tmp_path / "out" / "chk-2"), 2, operator(snapshot),
                                     writer=writer)
    assert wait_for(snapshot.first_written.exists)
    assert len(list((tmp_path / "out").iterdir())) == 1  # the staging directory
    pending.cancel()
    snapshot.gate.write_text("open")
    with pytest.raises(CheckpointCancelledError):
        pending.result(timeout=60)
    assert list((tmp_path / "out").iterdir()) == []  # no checkpoint, no staging directory
    assert pinned_versions(backend) == set()


def test_a_killed_writer_process_publishes_nothing_and_leaves_nothing(tmp_path: Path) -> None:
    backend = make_backend()
    (tmp_path / "signals").mkdir()
    (tmp_path / "out").mkdir()
    snapshot = GatedSnapshot(backend.snapshot(), tmp_path / "signals")
    pending = write_checkpoint_async(str(tmp_path / "out" / "chk-4"), 4, operator(snapshot),
                                     writer="process")
    assert wait_for(snapshot.first_written.exists)
    child = int(snapshot.first_written.read_text())
    assert child != os.getpid()
    os.kill(child, signal.SIGKILL)  # it cannot clean up: the parent does
    with pytest.raises(CheckpointError, match="killed by signal 9"):
        pending.result(timeout=60)
    assert list((tmp_path / "out").iterdir()) == []
    assert pinned_versions(backend) == set()


@WRITERS
def test_a_failed_write_leaves_nothing(tmp_path: Path, writer: str) -> None:
    backend = make_backend()
    anything = backend.get_value_state(value_state("anything"))
    backend.set_current_key(KEYS[0])
    anything.update(object())
    pending = write_checkpoint_async(str(tmp_path / "chk-3"), 3, operator(backend.snapshot()),
                                     writer=writer)
    with pytest.raises(UnsupportedFormatError, match="cannot be stored"):  # its own error
        pending.result(timeout=60)
    assert list(tmp_path.iterdir()) == []
    assert pinned_versions(backend) == set()


@WRITERS
def test_several_checkpoints_in_flight(tmp_path: Path, writer: str) -> None:
    backend = make_backend()
    value = backend.get_value_state(value_state("count", "int64"))
    pendings, expectations = [], []
    for n in range(3):
        expectations.append(copy.deepcopy(stored(backend)))
        pendings.append(write_checkpoint_async(str(tmp_path / f"chk-{n}"), n,
                                               operator(backend.snapshot()), writer=writer))
        backend.set_current_key(KEYS[n])
        value.update(1000 + n)
    for n, pending in enumerate(pendings):
        pending.result(timeout=60)
        restored: HeapKeyedStateBackend[str] = HeapKeyedStateBackend("string", 128)
        restored.get_value_state(value_state("count", "int64"))
        restored.get_list_state(list_state("items", "int64"))
        open_checkpoint(str(tmp_path / f"chk-{n}")).restore_keyed("op", restored)
        assert stored(restored) == expectations[n]
    assert pinned_versions(backend) == set()


def test_the_writer_is_a_process_on_the_local_disk_else_a_thread(tmp_path: Path) -> None:
    assert default_writer(str(tmp_path / "chk-1")) == (
        "process" if sys.platform.startswith("linux") else "thread")
    # another filesystem (here the local one wrapped): a forked child must not reuse its client
    wrapped = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    assert default_writer("chk-1", wrapped) == "thread"
    backend = make_backend()
    pending = write_checkpoint_async("chk-1", 1, operator(backend.snapshot()),
                                     filesystem=wrapped)
    assert pending.writer == "thread"
    assert pending.result(timeout=60).checkpoint_id == 1
    assert open_checkpoint(str(tmp_path / "chk-1")).metadata.checkpoint_id == 1
    with pytest.raises(InvalidArgumentError, match="unknown checkpoint writer"):
        write_checkpoint_async(str(tmp_path / "chk-2"), 2, [], writer="fibre")


def test_a_failed_fork_falls_back_to_the_thread_writer(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    def no_fork() -> int:
        raise BlockingIOError("Resource temporarily unavailable")
    monkeypatch.setattr(os, "fork", no_fork)
    backend = make_backend()
    expected = copy.deepcopy(stored(backend))
    pending = write_checkpoint_async(str(tmp_path / "chk-5"), 5, operator(backend.snapshot()),
                                     writer="process")
    assert pending.writer == "thread"
    assert pending.result(timeout=60).checkpoint_id == 5
    restored: HeapKeyedStateBackend[str] = HeapKeyedStateBackend("string", 128)
    restored.get_value_state(value_state("count", "int64"))
    restored.get_list_state(list_state("items", "int64"))
    open_checkpoint(str(tmp_path / "chk-5")).restore_keyed("op", restored)
    assert stored(restored) == expected
    assert pinned_versions(backend) == set()


@pytest.fixture
def collapses(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, bool]]:
    """Heap collapses the process writer asks for: (children alive, ``stop()``) at the call."""
    calls: list[tuple[int, bool]] = []

    def collapse_heap(*, stop: Any) -> thp.Collapsed:
        calls.append((children_alive(), stop()))
        return thp.Collapsed(ranges=1, bytes=thp.HUGE_PAGE)

    monkeypatch.setattr(async_writer.thp, "collapse_heap", collapse_heap)
    return calls


def settled(pending: PendingCheckpoint) -> PendingCheckpoint:
    """``pending`` once its waiting thread (which collapses after the result) has ended."""
    pending.result(timeout=60)
    assert pending.join(timeout=60)
    return pending


def test_after_its_child_the_process_writer_collapses_the_heap(
        tmp_path: Path, collapses: list[tuple[int, bool]]) -> None:
    backend = make_backend()
    done = settled(write_checkpoint_async(str(tmp_path / "chk-1"), 1,
                                          operator(backend.snapshot()), writer="process"))
    assert collapses == [(0, False)]  # no child alive: the pages are the parent's alone
    assert done.huge_pages == thp.Collapsed(ranges=1, bytes=thp.HUGE_PAGE)
    off = settled(write_checkpoint_async(str(tmp_path / "chk-2"), 2,
                                         operator(backend.snapshot()), writer="process",
                                         huge_pages=False))
    thread = settled(write_checkpoint_async(str(tmp_path / "chk-3"), 3,
                                            operator(backend.snapshot()), writer="thread"))
    storage = DirectoryCheckpointStorage(str(tmp_path / "state"), huge_pages=False)
    stored_off = settled(storage.begin(storage.claim(1), CheckpointKind.CHECKPOINT,
                                       operator(backend.snapshot())))
    assert collapses == [(0, False)]
    assert off.huge_pages is thread.huge_pages is stored_off.huge_pages is None
    assert pinned_versions(backend) == set()


def test_the_real_collapse_reports_what_it_did(tmp_path: Path) -> None:
    backend = make_backend()
    done = settled(write_checkpoint_async(str(tmp_path / "chk-1"), 1,
                                          operator(backend.snapshot()), writer="process"))
    assert done.huge_pages is not None
    assert done.huge_pages.unavailable == thp.available()
    assert done.huge_pages.bytes == done.huge_pages.ranges * thp.HUGE_PAGE
    assert children_alive() == 0


def test_no_collapse_while_another_writer_child_shares_the_pages(
        tmp_path: Path, collapses: list[tuple[int, bool]]) -> None:
    backend = make_backend()
    (tmp_path / "signals").mkdir()
    gated = GatedSnapshot(backend.snapshot(), tmp_path / "signals")
    slow = write_checkpoint_async(str(tmp_path / "chk-1"), 1, operator(gated),
                                  writer="process")
    assert wait_for(gated.first_written.exists)
    quick = settled(write_checkpoint_async(str(tmp_path / "chk-2"), 2,
                                           operator(backend.snapshot()), writer="process"))
    assert children_alive() == 1  # the slow writer's child shares the heap still
    assert quick.huge_pages is None and collapses == []
    gated.gate.write_text("open")
    assert settled(slow).huge_pages == thp.Collapsed(ranges=1, bytes=thp.HUGE_PAGE)
    assert collapses == [(0, False)]
    assert children_alive() == 0


def test_a_failing_collapse_is_reported_not_raised(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    def collapse_heap(*, stop: Any) -> thp.Collapsed:
        raise OSError(12, "Cannot allocate memory")

    monkeypatch.setattr(async_writer.thp, "collapse_heap", collapse_heap)
    backend = make_backend()
    done = settled(write_checkpoint_async(str(tmp_path / "chk-1"), 1,
                                          operator(backend.snapshot()), writer="process"))
    assert done.result().checkpoint_id == 1
    assert done.huge_pages is not None
    assert done.huge_pages.unavailable.startswith("collapsing failed")
    assert done.huge_pages.ranges == 0


def test_no_collapse_while_collapses_are_paused(tmp_path: Path,
                                                collapses: list[tuple[int, bool]]) -> None:
    backend = make_backend()
    with async_writer.collapses_paused():
        paused = settled(write_checkpoint_async(str(tmp_path / "chk-1"), 1,
                                                operator(backend.snapshot()), writer="process"))
    assert paused.huge_pages is None and collapses == []
    after = settled(write_checkpoint_async(str(tmp_path / "chk-2"), 2,
                                           operator(backend.snapshot()), writer="process"))
    assert after.huge_pages == thp.Collapsed(ranges=1, bytes=thp.HUGE_PAGE)
    assert collapses == [(0, False)]


def test_a_map_lock_held_by_another_thread_at_the_fork_does_not_stop_the_writer(
        tmp_path: Path) -> None:
    """Regression: a build hung in ``test_build_kill`` (a writer child waited for ever).

    Another thread of the parent (the waiting thread of an earlier checkpoint, releasing its
    map snapshots) can hold a map's version lock at the instant of the fork; the child
    inherited it locked, and blocked the first time it released its own snapshot of that map,
    as it does after writing each key group.
    """
    backend = make_backend()
    snapshot = backend.snapshot()
    maps = [m for d in backend.descriptors for _, m in backend.table(d.name).items_by_key_group()]
    held = maps[0]._versions_lock  # the lock such a thread holds
    taken, leave = threading.Event(), threading.Event()

    def hold() -> None:
        with held:
            taken.set()
            leave.wait(60)

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    assert taken.wait(10)
    try:
        pending = write_checkpoint_async(str(tmp_path / "chk-1"), 1, operator(snapshot),
                                         writer="process", huge_pages=False)
    finally:
        # the parent's own waiting thread needs the lock too (it releases the parent's
        # snapshots); the child's copy of it stays as it was at the fork
        leave.set()
        holder.join()
    metadata = pending.result(timeout=60)
    assert metadata.checkpoint_id == 1
    assert restored_state(tmp_path / "chk-1") == stored(backend)
    assert pinned_versions(backend) == set()


def test_a_thread_waiting_for_a_map_lock_at_the_fork_does_not_leave_it_taken_in_the_child(
        ) -> None:
    """Regression: the same hang, when the other thread was *waiting* for the lock.

    A thread blocked on a held ``threading.Lock`` takes it as soon as it is released, but
    marks it as locked only once it has the GIL again. A fork in between (the thread that
    released it goes on holding the GIL) gives the child a lock that is taken and says it is
    not (``locked()`` is False): renewing only the locks that said so left this one taken.
    """
    backend = make_backend()
    backend.snapshot()
    maps = [m for d in backend.descriptors for _, m in backend.table(d.name).items_by_key_group()]
    lock = maps[0]._versions_lock
    lock.acquire()
    waiter = threading.Thread(target=lambda: (lock.acquire(), lock.release()), daemon=True)
    waiter.start()
    time.sleep(0.2)  # the waiter blocks in the lock's semaphore, without the GIL
    lock.release()
    deadline = time.monotonic() + 5
    while lock.acquire(blocking=False) and time.monotonic() < deadline:
        lock.release()  # not taken by the waiter yet (this thread keeps the GIL meanwhile)
    pid = os.fork()  # at once: the waiter took the semaphore and waits for the GIL
    if pid == 0:
        signal.alarm(10)  # a child that blocks dies of SIGALRM
        try:
            versions = maps[0].snapshot_versions  # takes the version lock
            os._exit(0 if versions else 2)
        finally:
            os._exit(3)
    waiter.join(10)
    _, status = os.waitpid(pid, 0)
    assert not os.WIFSIGNALED(status), f"the child blocked (signal {os.WTERMSIG(status)})"
    assert os.WEXITSTATUS(status) == 0


def _interrupted_write_leaves_nothing(location: Path, tmp_path: Path) -> None:
    """A process write at ``location`` raises KeyboardInterrupt and leaves no file behind."""
    with pytest.raises(KeyboardInterrupt):
        write_checkpoint_async(str(location), 1, operator(make_backend().snapshot()),
                               writer="process")
    time.sleep(1.0)  # a child left alive would have written by now (or be writing)
    assert not (location / "_metadata.json").exists()
    assert not [p for p in tmp_path.rglob("*") if p.is_file()], list(tmp_path.rglob("*"))


def test_ctrl_c_during_the_fork_kills_the_write_it_started(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A SIGINT held off during the fork is raised once the child exists; the caller never
    gets the write to abort, so it must not go on to complete a checkpoint after the build
    said which checkpoint is the latest (seen under load: chk-10 appearing after "is 1")."""
    import contextlib

    import formats.statectl.async_writer as async_writer

    @contextlib.contextmanager
    def interrupted_during_fork(interrupted: list[bool]) -> Any:
        yield
        interrupted.append(True)

    monkeypatch.setattr(async_writer, "_sigint_deferred", interrupted_during_fork)
    location = tmp_path / "chk-1"
    _interrupted_write_leaves_nothing(location, tmp_path)


def test_ctrl_c_while_the_waiting_thread_starts_kills_the_write_cleanly(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real SIGINT arriving inside ``Thread.start()`` of the process writer's waiting thread
    (CI, under load: the KeyboardInterrupt left a thread never started, and the kill-and-join
    of the caller ended in "cannot join thread before it is started"). It is held off to the
    end of the set-up and raised then, with the write killed and nothing left behind."""
    assert threading.current_thread() is threading.main_thread()
    started = threading.Thread.start

    def start_interrupted(thread: threading.Thread) -> None:
        if thread.name.startswith("statectl-checkpoint-"):
            os.kill(os.getpid(), signal.SIGINT)  # handled at the next bytecode, in here
        started(thread)

    monkeypatch.setattr(threading.Thread, "start", start_interrupted)
    location = tmp_path / "chk-1"
    _interrupted_write_leaves_nothing(location, tmp_path)
