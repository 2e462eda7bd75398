"""Ctrl-C stops a command with exit code 130 and says what was kept (issue 32).

Before: click turned SIGINT into "Aborted!" with exit code 1, the code of "findings", and said
nothing of the checkpoints a build had completed. A real ``statectl build`` is interrupted
with SIGINT once it completed a checkpoint; it must exit within 2 s with 130 and name the
latest complete checkpoint, from which ``--resume`` finishes the build with the state of one
never interrupted.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parent.parent
ROWS = 100_000


def _input(tmp_path: Path) -> Path:
    path = tmp_path / "events.parquet"
    pq.write_table(pa.table({"user": [f"u{i % 5000}" for i in range(ROWS)],
                             "amount": list(range(ROWS))}), path, row_group_size=4096)
    return path


def _build(data: Path, state: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "cli.main", "build", str(data), "--key", "user", "--agg",
            "count", "--agg", "sum:amount", "--checkpoint-dir", str(state), *extra]


def _interrupted_build(data: Path, state: Path, delay: float) -> tuple[int, float, str]:
    """A build interrupted with SIGINT ``delay`` s after its first complete checkpoint:
    ``(exit code, seconds from the signal to the exit, stderr)``."""
    process = subprocess.Popen(_build(data, state, "--checkpoint-every", "5000", "--keep",
                                      "1000"),
                               cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    deadline = time.monotonic() + 120
    while not list(state.glob("chk-*/_metadata.json")):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "no checkpoint completed in 120 s"
        time.sleep(0.01)
    time.sleep(delay)
    process.send_signal(signal.SIGINT)
    sent = time.monotonic()
    _out, err = process.communicate(timeout=60)
    return process.returncode, time.monotonic() - sent, err


def test_ctrl_c_exits_130_and_names_the_latest_complete_checkpoint(tmp_path: Path) -> None:
    data = _input(tmp_path)
    took = []
    for trial, delay in enumerate((0.0, 0.05, 0.3)):  # also while a checkpoint forks
        state = tmp_path / f"state-{trial}"
        code, seconds, err = _interrupted_build(data, state, delay)
        assert code == 130, err
        took.append(seconds)
        assert "Aborted!" not in err and "Traceback" not in err, err
        lines = [ln for ln in err.splitlines() if ln.startswith("statectl: interrupted")]
        assert len(lines) == 1, err
        completed = sorted(int(p.parent.name[4:]) for p in state.glob("chk-*/_metadata.json"))
        assert f"the latest complete checkpoint is {completed[-1]} " in lines[0], lines[0]
    # the writers in flight are killed, not waited for (before: 1.6-2.1 s on 2 busy cores)
    assert max(took) < 5.0 and sorted(took)[1] < 2.0, took
    # resumed from it, the build ends with the state of one never interrupted
    state = tmp_path / "state-0"
    resumed = subprocess.run(_build(data, state, "--resume"), cwd=REPO, capture_output=True,
                             text=True, check=False)
    assert resumed.returncode == 0, resumed.stderr
    whole = subprocess.run(_build(data, tmp_path / "whole"), cwd=REPO, capture_output=True,
                           text=True, check=False)
    assert whole.returncode == 0, whole.stderr
    diff = subprocess.run([sys.executable, "-m", "cli.main", "--output", "json", "diff",
                           *(str(sorted(d.glob("chk-*"))[-1]) for d in (state,
                                                                          tmp_path / "whole"))],
                          cwd=REPO, capture_output=True, text=True, check=False)
    assert json.loads(diff.stdout)["equal"], diff.stdout[:2000]


#: ``statectl`` whose own clean-up after Ctrl-C never ends (a machine too busy to unwind within
#: the grace period, as seen on CI): the watchdog ends the process and names what was kept.
STUCK_CLEANUP = ("import sys, time\n"
                 "import cli.interrupt\n"
                 "cli.interrupt.report = lambda write: time.sleep(60)\n"
                 "from cli.main import main\n"
                 "sys.argv[0] = 'statectl'\n"
                 "main()\n")


def test_a_clean_up_too_slow_still_names_the_latest_complete_checkpoint(
        tmp_path: Path) -> None:
    """Before: the watchdog printed a bare "statectl: interrupted" (CI, stop 36), and a
    checkpoint writer in flight could complete a checkpoint after the line was printed."""
    data = _input(tmp_path)
    for trial, delay in enumerate((0.0, 0.2)):
        state = tmp_path / f"state-{trial}"
        command = _build(data, state, "--checkpoint-every", "5000", "--keep", "1000")
        process = subprocess.Popen([sys.executable, "-c", STUCK_CLEANUP, *command[3:]],
                                   cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
        deadline = time.monotonic() + 120
        while not list(state.glob("chk-*/_metadata.json")):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "no checkpoint completed in 120 s"
            time.sleep(0.01)
        time.sleep(delay)
        process.send_signal(signal.SIGINT)
        sent = time.monotonic()
        _out, err = process.communicate(timeout=60)
        took = time.monotonic() - sent
        assert process.returncode == 130, err
        assert took < 5.0, f"{took:.1f} s"
        lines = [ln for ln in err.splitlines() if ln.startswith("statectl: interrupted")]
        assert len(lines) == 1, err
        time.sleep(0.5)  # a writer that outlived the process would complete one by now
        completed = sorted(int(p.parent.name[4:]) for p in state.glob("chk-*/_metadata.json"))
        assert f"the latest complete checkpoint is {completed[-1]} " in lines[0], lines[0]


def _statectl(*args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in __import__("os").environ.items()
           if not k.startswith(("GOOGLE_", "CLOUDSDK_"))}
    return subprocess.Popen([sys.executable, "-m", "cli.main", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_ctrl_c_stops_a_command_blocked_in_a_store_within_2_s() -> None:
    """A Google Cloud Storage request without credentials blocks in native code, where Python
    does not see the interrupt (it used to ignore Ctrl-C for more than 400 s)."""
    process = _statectl("inspect", "gs://statectl-test-bucket/x")
    time.sleep(2.0)
    assert process.poll() is None, process.communicate()  # still blocked in the store
    process.send_signal(signal.SIGINT)
    sent = time.monotonic()
    _out, err = process.communicate(timeout=30)
    took = time.monotonic() - sent
    assert process.returncode == 130, err
    assert took < 2.0, f"{took:.1f} s after Ctrl-C"
    assert err.strip().splitlines()[-1].startswith("statectl: interrupted"), err


def test_a_store_without_credentials_fails_within_30_s_with_one_line() -> None:
    started = time.monotonic()
    process = _statectl("inspect", "gs://statectl-test-bucket/x")
    _out, err = process.communicate(timeout=60)
    took = time.monotonic() - started
    assert process.returncode == 3, err
    assert took < 30, f"{took:.0f} s"
    assert err.count("\n") == 1 and err.startswith("Error: ") and "Google Cloud" in err, err
