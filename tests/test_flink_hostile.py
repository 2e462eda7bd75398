"""Real Flink snapshots, damaged: truncated and bit-flipped files (issue 8, "Robustness").

Every file of every snapshot the fixture sets' ``expected.json`` files list (``_metadata`` and
the state files beside it; the heap and RocksDB sets, and in a test of its own the sets of the
types real jobs keep) is truncated at many points and bit-flipped at many positions, in a
copy (the fixtures are never touched). Each case opens the copy and reads everything: every
keyed state's entries and every subtask's operator state (which converts every decoded value
to Arrow). The outcome is a :class:`StatectlError` with a message or, for a bit flip, a
successful read — Flink stores no checksums, so a flip inside a string or a number is another
valid snapshot — and never another exception, never a hang (a timer turns one into a failure),
never a memory blow-up (the peak resident size may grow by at most 512 MiB over the sweep).

A truncated state file always fails (its size no longer matches its handle's). A truncated
``_metadata`` fails too, unless the cut falls inside the trailing Java-serialized checkpoint
properties, which statectl only scans for the snapshot type.

A sample of the failing cases goes through the CLI: ``statectl inspect`` exits with code 3 and
prints the message, no traceback.
"""

from __future__ import annotations

import os
import random
import resource
import shutil
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import pytest

from formats.flink.checkpoint import FlinkCheckpoint
from formats.flink.read.metadata import FlinkIncrementalHandle, parse_metadata
from formats.open import open_checkpoint
from formats.ops.diff import diff_checkpoints
from formats.ops.rescale import plan_checkpoint, rescale_checkpoint
from formats.ops.verify import verify_checkpoint
from statecore.errors import StatectlError
from tests.cli_support import run
from tests.flink_fixtures import require_fixtures, snapshot_files, snapshots

HANG_SECONDS = 10
#: cases per file in ``make test``; the slow test runs ten times as many
TRUNCATIONS, FLIPS = 8, 10
MAX_RSS_GROWTH = 512 << 20


@dataclass(frozen=True)
class Case:
    snapshot: Path
    file: str
    kind: str  # "truncate" | "flip"
    position: int  # the new length, or the flipped bit (byte * 8 + bit)

    def mutate(self, data: bytes) -> bytes:
        if self.kind == "truncate":
            return data[:self.position]
        out = bytearray(data)
        out[self.position // 8] ^= 1 << (self.position % 8)
        return bytes(out)

    def __str__(self) -> str:
        return f"{self.snapshot.name}/{self.file} {self.kind} {self.position}"


def cases(truncations: int, flips: int, seed: int,
          roots: tuple[str, ...] = ("heap", "rocksdb")) -> list[Case]:
    """Deterministic cases: cut points spread over each file (always its first and last
    bytes) plus random ones; flips at random bits."""
    rng = random.Random(seed)
    out: list[Case] = []
    for fixture_set, snap in snapshots(*roots):
        root = fixture_set / snap["path"]
        referenced = _referenced(root)
        for path in snapshot_files(root):
            if path.parent != root and path.name not in referenced:
                continue  # a shared file of an older checkpoint: this one does not read it
            size = path.stat().st_size
            if size == 0:
                continue
            cuts = {0, size - 1, *(size * i // truncations for i in range(1, truncations // 2)),
                    *(rng.randrange(size) for _ in range(truncations - truncations // 2))}
            name = path.name if path.parent == root else f"../shared/{path.name}"
            out += [Case(root, name, "truncate", c) for c in sorted(cuts)]
            out += [Case(root, name, "flip", rng.randrange(size * 8)) for _ in range(flips)]
    return out


def _referenced(snapshot: Path) -> set[str]:
    """The file names a snapshot's ``_metadata`` references (its RocksDB files among them)."""
    names = set()
    for op in parse_metadata((snapshot / "_metadata").read_bytes()).operators:
        for st in op.subtasks:
            for h in st.managed_keyed:
                streams = [h.meta, *(f for _, f in h.files)] if isinstance(
                    h, FlinkIncrementalHandle) else [h.stream]
                names |= {stream.file_name for stream in streams}
    return names


class _Hang(BaseException):
    pass


@contextmanager
def time_limit(seconds: float = HANG_SECONDS) -> Iterator[None]:
    def alarm(_signum: int, _frame: FrameType | None) -> None:
        raise _Hang

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except _Hang:
        raise AssertionError(f"reading took more than {seconds} s (a hang)") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def read_everything(location: str) -> None:
    """Open and read every entry of every state (the Arrow conversion included)."""
    checkpoint = open_checkpoint(location)
    assert isinstance(checkpoint, FlinkCheckpoint)
    for op in checkpoint.metadata.operators:
        for state in op.states:
            if state.scope == "keyed":
                for _ in checkpoint.keyed_entries(op.uid, state.name):
                    pass
        for subtask in op.subtasks:
            checkpoint.operator_entries(op.uid, subtask.index)


def properties_offset(metadata: bytes) -> int:
    """Where the Java-serialized properties start in an intact ``_metadata``."""
    return parse_metadata(metadata).properties_offset


class Copies:
    """One working copy per snapshot (hard links), with one file replaced per case."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.roots: dict[Path, Path] = {}

    def copy(self, snapshot: Path) -> Path:
        """``<base>/s<n>/<job dir>/<snapshot>``, and the job's ``shared/`` where it has one."""
        if snapshot not in self.roots:
            target = self.base / f"s{len(self.roots)}" / snapshot.parent.name / snapshot.name
            target.mkdir(parents=True)
            for p in snapshot_files(snapshot):
                linked = target / (p.name if p.parent == snapshot else f"../shared/{p.name}")
                linked.parent.mkdir(exist_ok=True)
                os.link(p, linked)
            self.roots[snapshot] = target
        return self.roots[snapshot]

    @contextmanager
    def mutated(self, case: Case) -> Iterator[Path]:
        root = self.copy(case.snapshot)
        original = case.snapshot / case.file
        target = root / case.file
        target.unlink()
        target.write_bytes(case.mutate(original.read_bytes()))
        try:
            yield root
        finally:
            target.unlink()
            os.link(original, target)


def sweep(tmp_path: Path, truncations: int, flips: int, seed: int,
          roots: tuple[str, ...] = ("heap", "rocksdb"), least: int = 1000) -> None:
    for root in roots:
        require_fixtures(root)
    all_cases = cases(truncations, flips, seed, roots)
    copies = Copies(tmp_path)
    failures: list[str] = []
    errors: list[Case] = []
    succeeded = 0
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    trailers: dict[Path, int] = {}
    for case in all_cases:
        with copies.mutated(case) as root:
            try:
                with time_limit():
                    read_everything(str(root))
            except StatectlError as exc:
                if not str(exc).strip():
                    failures.append(f"{case}: a StatectlError without a message")
                errors.append(case)
                continue
            except AssertionError as exc:
                failures.append(f"{case}: {exc}")
                continue
            except Exception as exc:  # noqa: BLE001 - the point of the test
                failures.append(f"{case}: {type(exc).__name__}: {exc}")
                continue
        succeeded += 1
        if case.kind == "truncate":
            if case.file != "_metadata":
                failures.append(f"{case}: a truncated state file was read without an error")
                continue
            if case.snapshot not in trailers:
                trailers[case.snapshot] = properties_offset(
                    (case.snapshot / "_metadata").read_bytes())
            if case.position < trailers[case.snapshot]:
                failures.append(f"{case}: truncated before the properties (at "
                                f"{trailers[case.snapshot]}) and read without an error")
    rss_growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss_before
    assert not failures, f"{len(failures)} of {len(all_cases)} cases:\n" + "\n".join(failures[:40])
    assert len(all_cases) >= least
    assert errors, "no case failed: the mutations do not reach the decoders"
    assert rss_growth <= MAX_RSS_GROWTH, f"peak memory grew by {rss_growth >> 20} MiB"

    # the CLI: exit code 3 and a message, never a traceback (a sample of the failing cases;
    # --all decodes every state: a summary reads only _metadata and the keyed headers)
    rng = random.Random(seed)
    for case in rng.sample(errors, min(25, len(errors))):
        with copies.mutated(case) as root:
            code, out, err = run("inspect", str(root), "--all")
        assert code == 3, f"{case}: exit {code}\n{out}\n{err}"
        assert "Traceback" not in out + err and err.strip(), f"{case}: {err}"
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_truncated_and_bit_flipped_fixtures(tmp_path: Path) -> None:
    sweep(tmp_path, TRUNCATIONS, FLIPS, seed=8)


@pytest.mark.slow
def test_truncated_and_bit_flipped_fixtures_more(tmp_path: Path) -> None:
    sweep(tmp_path, TRUNCATIONS * 10, FLIPS * 10, seed=88)


def test_truncated_and_bit_flipped_type_fixtures(tmp_path: Path) -> None:
    """The type fixtures (POJOs, enums, java.time, Kryo, TTL, tuple keys, windows): their
    serializer snapshots and values damaged the same way."""
    sweep(tmp_path, TRUNCATIONS, FLIPS, seed=20, roots=("types",), least=500)


@pytest.mark.slow
def test_truncated_and_bit_flipped_type_fixtures_more(tmp_path: Path) -> None:
    sweep(tmp_path, TRUNCATIONS * 10, FLIPS * 10, seed=2020, roots=("types",), least=5000)


def test_damaged_sources_are_rewritten_or_refused(tmp_path: Path) -> None:
    """The savepoint writer's inputs, hostile (issue 21): damaged snapshots of every root
    rewritten into Flink savepoints at another parallelism. Each case either fails with a
    :class:`StatectlError` leaving nothing at the output, or writes a savepoint that holds the
    state read (``diff``; unless a flip made the copies of a broadcast state differ, which
    ``verify`` warns of as ``broadcast-copies``) and whose ``verify`` finds nothing the source's
    does not (a flip in a key can leave it in another key group: read, carried over as stored,
    reported by both); never another exception, never a hang."""
    all_cases = cases(1, 2, seed=21, roots=("heap", "rocksdb", "types"))
    copies = Copies(tmp_path / "copies")
    failures: list[str] = []
    written = refused = 0
    for n, case in enumerate(all_cases):
        out = tmp_path / f"out-{n}"
        with copies.mutated(case) as root:
            try:
                with time_limit(2 * HANG_SECONDS):
                    source = open_checkpoint(str(root))
                    parallelism = source.metadata.operators[0].parallelism + 1
                    rescale_checkpoint(source, str(out), plan_checkpoint(source, parallelism))
                    # the source's own verify only where it decides (most outputs are equal and
                    # clean): it reads the whole source again
                    checked = None
                    if not diff_checkpoints(source, open_checkpoint(str(out))).equal:
                        checked = verify_checkpoint(str(root))
                        # broadcast copies that differ: the rescale gives each new subtask one
                        if not any(w.kind == "broadcast-copies" for w in checked.warnings):
                            failures.append(f"{case}: the savepoint written differs from its "
                                            f"source")
                    found = {p.kind for p in verify_checkpoint(str(out)).problems}
                    if found and checked is None:
                        checked = verify_checkpoint(str(root))
                    known = {p.kind for p in checked.problems} if checked is not None else set()
                    if not found <= known:
                        failures.append(f"{case}: the savepoint written has problems its source "
                                        f"has not: {sorted(found - known)}")
                written += 1
            except StatectlError as exc:
                refused += 1
                if not str(exc).strip():
                    failures.append(f"{case}: a StatectlError without a message")
                if out.exists():
                    failures.append(f"{case}: a refused write left {out}")
            except AssertionError as exc:
                failures.append(f"{case}: {exc}")
            except Exception as exc:  # noqa: BLE001 - the point of the test
                failures.append(f"{case}: {type(exc).__name__}: {exc}")
        shutil.rmtree(out, ignore_errors=True)
    assert not failures, f"{len(failures)} of {len(all_cases)} cases:\n" + "\n".join(failures[:40])
    assert written and refused, (written, refused)


def _allfiles_copy(tmp_path: Path) -> tuple[Path, list[str]]:
    """A copy (hard links) of a snapshot whose state lives in files beside ``_metadata``."""
    source = next((s / p["path"] for s, p in snapshots()
                   if len(list((s / p["path"]).iterdir())) > 2), None)
    assert source is not None, "no fixture snapshot keeps its state in files"
    root = tmp_path / source.name
    root.mkdir()
    for p in source.iterdir():
        os.link(p, root / p.name)
    return root, sorted(p.name for p in source.iterdir() if p.name != "_metadata")


def test_symlinks_out_of_the_snapshot_are_refused(tmp_path: Path) -> None:
    root, state_files = _allfiles_copy(tmp_path)
    open_checkpoint(str(root))  # the copy itself opens
    outside = tmp_path / "outside"
    outside.mkdir()
    # a state file that is a symlink to a file (with the same bytes) outside the snapshot
    victim = root / state_files[0]
    (outside / victim.name).write_bytes(victim.read_bytes())
    victim.unlink()
    victim.symlink_to(outside / victim.name)
    with pytest.raises(StatectlError, match="leads out of the checkpoint directory"):
        open_checkpoint(str(root))
    code, _, err = run("inspect", str(root))
    assert code == 3 and "leads out" in err
    # a symlink inside the snapshot to a file inside it is fine
    victim.unlink()
    os.link(outside / victim.name, root / "copy")
    victim.symlink_to(root / "copy")
    open_checkpoint(str(root))
    # _metadata itself a symlink out
    metadata = root / "_metadata"
    (outside / "_metadata").write_bytes(metadata.read_bytes())
    metadata.unlink()
    metadata.symlink_to(outside / "_metadata")
    with pytest.raises(StatectlError, match="leads out of the checkpoint directory"):
        open_checkpoint(str(root))


def test_a_fifo_in_place_of_a_state_file_is_an_error_not_a_hang(tmp_path: Path) -> None:
    root, state_files = _allfiles_copy(tmp_path)
    victim = root / state_files[0]
    victim.unlink()
    os.mkfifo(victim)
    with time_limit(), pytest.raises(StatectlError):
        open_checkpoint(str(root))
