"""One state directory, many processes; and faults in the middle of checkpoint writes.

Real processes race on a local directory and on S3: two ``build --resume`` (one wins, the
other exits 3 naming the holder), ``snapshot prune``/``release`` while a build checkpoints,
two ``snapshot take`` at once. Afterwards no completed checkpoint is lost or damaged, no id
was issued twice, and the build's final state is an uninterrupted build's.

Faults: a build on S3 SIGKILLed at random moments and resumed (exactly once, as
``test_build_kill.py`` does on disk); the S3 server killed or hung at random moments of a
build's checkpoint writes. After each: every completed checkpoint verifies clean, nothing
incomplete is listed, ``snapshot prune`` removes what the failed writes left, and a resume
reaches the uninterrupted state. ``make test-slow`` runs more trials.
"""

from __future__ import annotations

import json
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from s3_server import S3Place, S3Server, start_server
from s3_support import (
    state_of,
    statectl,
    statectl_process,
    verify_all,
    write_events,
)

from formats.ops.build import build_state
from formats.statectl.storage import DirectoryCheckpointStorage
from statecore.errors import StatectlError

AGGREGATIONS = ["count", "sum:amount", "list:amount", "last:page"]
INPUTS = 4


def build_args(data: list[Path], state: str, *extra: str) -> list[str]:
    args = ["build", *map(str, data), "--key", "user", "--parallelism", "2"]
    for spec in AGGREGATIONS:
        args += ["--agg", spec]
    return [*args, "--checkpoint-dir", state, *extra]


@pytest.fixture(scope="module")
def references(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Path, dict[str, Any]]]:
    """Inputs and the state an uninterrupted local build reaches on each."""
    root = tmp_path_factory.mktemp("inputs")
    out = []
    for i in range(INPUTS):
        data = write_events(root / f"events-{i}.parquet", i, rows=4000, users=300)
        summary = build_state([str(data)], key="user", aggregations=AGGREGATIONS,
                              checkpoint_dir=str(root / f"reference-{i}"), parallelism=2)
        out.append((data, state_of(summary.final_location)))
    return out


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Path, dict[str, Any]]]:
    """Smaller inputs for the fault trials, and their uninterrupted states."""
    root = tmp_path_factory.mktemp("small")
    out = []
    for i in range(INPUTS):
        data = write_events(root / f"events-{i}.parquet", 100 + i, rows=2000, users=200)
        summary = build_state([str(data)], key="user", aggregations=AGGREGATIONS,
                              checkpoint_dir=str(root / f"reference-{i}"), parallelism=2)
        out.append((data, state_of(summary.final_location)))
    return out


@pytest.fixture(params=["local", "s3"])
def state_dir(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "local":
        return str(tmp_path / "state")
    s3: S3Place = request.getfixturevalue("s3")
    return s3.uri("state")


def final_state(state: str) -> dict[str, Any]:
    storage = DirectoryCheckpointStorage(state, create=False)
    latest = [c for c in storage.completed() if c.kind.value == "checkpoint"][-1]
    return state_of(latest.location)


# --- processes racing -------------------------------------------------------------------------

def test_two_builds_on_one_state_directory(
        state_dir: str, references: list[tuple[Path, dict[str, Any]]], tmp_path: Path) -> None:
    first, second = references[0][0], references[1][0]
    assert statectl(*build_args([first], state_dir)).returncode == 0
    big = [first, second] + [write_events(tmp_path / f"more-{i}.parquet", 10 + i, rows=8_000,
                                          users=300) for i in range(2)]
    racers = [statectl_process(*build_args(big, state_dir, "--resume",
                                           "--checkpoint-every", "2000")) for _ in range(2)]
    results = [(p.wait(180), *p.communicate()) for p in racers]
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 3], results
    (loser,) = [err for code, _, err in results if code == 3]
    assert loser.startswith("Error: another build is writing to ") and "pid " in loser
    assert len(loser.strip().splitlines()) == 1
    reference = build_state([str(p) for p in big], key="user", aggregations=AGGREGATIONS,
                            checkpoint_dir=str(tmp_path / "reference"), parallelism=2)
    assert final_state(state_dir) == state_of(reference.final_location)
    verify_all(state_dir)


def test_prune_and_release_while_a_build_checkpoints(
        state_dir: str, references: list[tuple[Path, dict[str, Any]]], tmp_path: Path) -> None:
    data = [references[0][0], write_events(tmp_path / "more.parquet", 20, rows=10_000)]
    build = statectl_process(*build_args(data, state_dir, "--checkpoint-every", "1000",
                                         "--keep", "50"))
    seen: set[int] = set()
    rounds = 0
    while build.poll() is None or rounds < 2:
        rounds += 1
        pruned = statectl("--output", "json", "snapshot", "prune", state_dir, "--keep", "2")
        assert pruned.returncode in (0, 2, 3), pruned.stderr  # 2: not created yet
        if pruned.returncode == 3:
            assert pruned.stderr.startswith("Error: ") and "Traceback" not in pruned.stderr
        listed = statectl("--output", "json", "snapshot", "list", state_dir)
        if listed.returncode == 0:
            ids = [s["checkpoint_id"] for s in json.loads(listed.stdout)["snapshots"]]
            seen.update(ids)
            if len(ids) > 1:
                released = statectl("snapshot", "release", state_dir, str(ids[0]))
                assert released.returncode in (0, 3), released.stderr
                if released.returncode == 3:
                    assert "Traceback" not in released.stderr
    out, err = build.communicate()
    assert build.returncode == 0, err
    reference = build_state([str(p) for p in data], key="user", aggregations=AGGREGATIONS,
                            checkpoint_dir=str(tmp_path / "reference"), parallelism=2)
    assert final_state(state_dir) == state_of(reference.final_location)
    remaining = verify_all(state_dir)
    assert remaining and max(remaining) >= max(seen)
    assert "failed" not in out, out  # no checkpoint of the build failed under the races


def test_two_savepoints_taken_at_once(
        state_dir: str, references: list[tuple[Path, dict[str, Any]]]) -> None:
    assert statectl(*build_args([references[0][0]], state_dir, "--checkpoint-every",
                                "1000")).returncode == 0
    takers = [statectl_process("--output", "json", "snapshot", "take", state_dir)
              for _ in range(3)]
    results = [(p.wait(120), *p.communicate()) for p in takers]
    taken = [json.loads(out)["snapshots"][0]["checkpoint_id"] for code, out, _ in results
             if code == 0]
    for code, _, err in results:
        assert code == 0 or (code == 3 and err.startswith("Error: ")), err
    assert taken and len(set(taken)) == len(taken)  # no id issued twice
    ids = verify_all(state_dir)
    assert set(taken) <= set(ids)
    assert final_state(state_dir) == references[0][1]


# --- faults -----------------------------------------------------------------------------------

KILL_TRIALS = 12
SERVER_TRIALS = 12


def kill_trial(trial: int, bucket_uri: Callable[[str], str],
               references: list[tuple[Path, dict[str, Any]]]) -> None:
    rng = random.Random(5000 + trial)
    data, expected = references[trial % INPUTS]
    state = bucket_uri(f"kill-{trial}")
    for _ in range(rng.randint(1, 2)):
        resume = ["--resume"] if _completed(state) else []
        process = statectl_process(*build_args([data], state, "--checkpoint-every", "200",
                                               "--keep", "2", *resume))
        time.sleep(rng.uniform(0.5, 1.8))
        process.send_signal(signal.SIGKILL)
        process.wait(60)
        process.communicate()
        check_after_fault(state)
    build_state([str(data)], key="user", aggregations=AGGREGATIONS, checkpoint_dir=state,
                parallelism=2, checkpoint_every=200, keep=2,
                resume="latest" if _completed(state) else None)
    assert final_state(state) == expected


def _completed(state: str) -> bool:
    try:
        return bool(DirectoryCheckpointStorage(state, create=False).completed())
    except StatectlError:
        return False


def settled(state: str) -> None:
    """Wait until the completed checkpoints stop changing: a server that hung answers the
    requests it had queued once it runs again (a commit its writer timed out on lands late:
    a complete, valid checkpoint)."""
    before = None
    for _ in range(50):
        now = [c.checkpoint_id for c in DirectoryCheckpointStorage(state, create=False)
               .completed()]
        if now == before:
            return
        before = now
        time.sleep(0.3)


def check_after_fault(state: str) -> None:
    """Every complete checkpoint verifies, `snapshot list` shows only those, prune cleans."""
    if not _completed(state):
        return
    settled(state)
    ids = verify_all(state)
    storage = DirectoryCheckpointStorage(state, create=False)
    assert [s.checkpoint_id for s in storage.list()] == ids  # what `snapshot list` shows
    storage.prune(keep=len(ids) or 1)
    assert not [leftover for leftover in storage.leftovers() if not leftover.alive]


@pytest.mark.parametrize("trial", range(KILL_TRIALS))
def test_a_build_on_s3_killed_and_resumed_reaches_the_uninterrupted_state(
        trial: int, s3: S3Place, small: list[tuple[Path, dict[str, Any]]]) -> None:
    kill_trial(trial, s3.uri, small)


@pytest.mark.slow
@pytest.mark.parametrize("trial", range(KILL_TRIALS, KILL_TRIALS + 60))
def test_many_more_killed_builds_on_s3(trial: int, s3: S3Place,
                                       small: list[tuple[Path, dict[str, Any]]]) -> None:
    kill_trial(trial, s3.uri, small)


@pytest.fixture(scope="module")
def faulty_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """A private server the fault trials kill, hang and restart."""
    from s3_server import require_weed
    server = start_server(tmp_path_factory, "s3faults", require_weed())
    try:
        yield server
    finally:
        server.kill()


def server_trial(trial: int, server: S3Server, monkeypatch: pytest.MonkeyPatch,
                 references: list[tuple[Path, dict[str, Any]]]) -> None:
    from s3_server import credentials_env
    credentials_env(monkeypatch)
    rng = random.Random(7000 + trial)
    data, expected = references[trial % INPUTS]
    if not server.running:
        server.start()
    bucket = f"faults-{trial}-{rng.randrange(10**6)}"
    server.create_bucket(bucket)
    # fail fast while the server is away: one attempt, a second without an answer
    state = server.uri(bucket, "state", max_attempts="1", request_timeout="1")
    hang = trial % 2 == 1
    outcome: list[BaseException | None] = []

    def build() -> None:
        try:
            build_state([str(data)], key="user", aggregations=AGGREGATIONS,
                        checkpoint_dir=state, parallelism=2, checkpoint_every=200, keep=3)
        except StatectlError as exc:
            outcome.append(exc)
        else:
            outcome.append(None)

    runner = threading.Thread(target=build)
    runner.start()
    time.sleep(rng.uniform(0.2, 1.5))
    if hang:
        server.pause()
        time.sleep(rng.uniform(0.5, 2.0))
        server.resume()
    else:
        server.stop()  # SIGKILL: the store crashes mid-write
    runner.join(120)
    assert not runner.is_alive()
    if not hang:
        server.start()
    check_after_fault(state)
    build_state([str(data)], key="user", aggregations=AGGREGATIONS, checkpoint_dir=state,
                parallelism=2, checkpoint_every=200, keep=3,
                resume="latest" if _completed(state) else None)
    assert final_state(state) == expected
    check_after_fault(state)


@pytest.mark.parametrize("trial", range(SERVER_TRIALS))
def test_the_server_dying_or_hanging_mid_checkpoint_loses_nothing(
        trial: int, faulty_server: S3Server, monkeypatch: pytest.MonkeyPatch,
        small: list[tuple[Path, dict[str, Any]]]) -> None:
    server_trial(trial, faulty_server, monkeypatch, small)


@pytest.mark.slow
@pytest.mark.parametrize("trial", range(SERVER_TRIALS, SERVER_TRIALS + 60))
def test_many_more_server_faults(trial: int, faulty_server: S3Server,
                                 monkeypatch: pytest.MonkeyPatch,
                                 small: list[tuple[Path, dict[str, Any]]]) -> None:
    server_trial(trial, faulty_server, monkeypatch, small)
