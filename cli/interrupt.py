"""Ctrl-C: exit code 130 within a bounded time, and one line saying what was kept.

Two paths end an interrupted command. Usually the command's ``KeyboardInterrupt`` unwinds
(its clean-up runs) and :func:`report` prints the line. When it does not unwind in time (a call
blocked in native code, or a machine so busy that the clean-up takes longer than the grace
period), a watchdog thread ends the process itself: it kills the checkpoint writers still in
flight (so that no checkpoint completes after the line names the latest one), asks the
command's note for what was kept, prints the same line and exits. Whichever path comes first
prints; the line is printed once.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable

__all__ = ["EXIT_INTERRUPTED", "GRACE_SECONDS", "install_watchdog", "keep_note", "kill_writers",
           "report"]

#: Exit code of a command interrupted by Ctrl-C (SIGINT), as shells report it (128 + 2).
EXIT_INTERRUPTED = 130
#: After Ctrl-C, how long a command has to stop by itself before the watchdog ends it.
GRACE_SECONDS = 1.2
#: How long the watchdog waits for the command's note (it may list a remote directory).
NOTE_SECONDS = 1.0
#: The module of the checkpoint writers that may be in flight when Ctrl-C comes.
WRITERS = "formats.statectl.async_writer"

_lock = threading.Lock()
_reported = False
_note: Callable[[], str] | None = None


def keep_note(note: Callable[[], str] | None) -> None:
    """Register what an interrupted command says it kept (``build``: its latest checkpoint).

    The callable is asked after the checkpoint writers were stopped; ``None`` forgets it.
    """
    global _note
    _note = note


def kill_writers() -> None:
    """Kill the checkpoint writers still in flight (``formats.statectl.async_writer``).

    None was started unless a command imported their module: it is not imported here (an
    interrupted ``trace`` or ``inspect`` never loads it; statectl starts without it).
    """
    writers = sys.modules.get(WRITERS)
    if writers is not None:
        writers.kill_writers()


def _line(note: str | None) -> str:
    return f"statectl: interrupted{f'; {note}' if note else ''}"


def _ask_note(timeout: float | None) -> str | None:
    """The registered note, or ``None`` when there is none or it fails or takes too long."""
    provider = _note
    if provider is None:
        return None
    answer: list[str] = []

    def ask() -> None:
        try:
            answer.append(provider())
        except Exception:  # noqa: BLE001 - the line is printed without it
            pass

    if timeout is None:
        ask()
    else:
        asking = threading.Thread(target=ask, name="statectl-interrupt-note", daemon=True)
        asking.start()
        asking.join(timeout)
    return answer[0] if answer else None


def _print_once(line: str, write: Callable[[str], object], wait: float) -> None:
    """Print the line unless either path printed it (``wait``: at most this long for the lock)."""
    global _reported
    if not _lock.acquire(timeout=wait):
        return
    try:
        if not _reported:
            _reported = True
            write(line)
    finally:
        _lock.release()


def report(write: Callable[[str], object]) -> None:
    """Stop the checkpoint writers and print the interrupted line with ``write`` (once)."""
    kill_writers()
    _print_once(_line(_ask_note(None)), write, -1)


def install_watchdog() -> None:
    """Make Ctrl-C end the process within :data:`GRACE_SECONDS`, whatever it does.

    Python's handler runs only between bytecodes; the wakeup fd is written by the C-level
    handler at once, so a thread sees every SIGINT. Only on the main thread (the wakeup fd is
    per process and set from there).
    """
    if threading.current_thread() is not threading.main_thread():
        return
    read, write = os.pipe()
    os.set_blocking(write, False)
    try:
        signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    except ValueError:
        os.close(read)
        os.close(write)
        return

    def watch() -> None:
        while data := os.read(read, 512):
            if signal.SIGINT in data:
                time.sleep(GRACE_SECONDS)
                if not _reported:
                    kill_writers()
                    line = _line(_ask_note(NOTE_SECONDS)) + "\n"
                    _print_once(line, lambda text: os.write(2, text.encode()), NOTE_SECONDS)
                os._exit(EXIT_INTERRUPTED)

    threading.Thread(target=watch, name="statectl-interrupt", daemon=True).start()
