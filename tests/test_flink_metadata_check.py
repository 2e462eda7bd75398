"""``verify`` parses every byte of a Flink ``_metadata`` as Flink does (issue 32).

Differential: every truncation and two byte flips at every offset of a real ``_metadata`` are
loaded by Flink's own ``Checkpoints.loadCheckpointMetadata`` (and each source coordinator's
state by FileSource's own serializer, ``tests/flink_jobs/MetadataCheck.java``); nothing Flink
refuses may pass statectl's check (:mod:`formats.flink.read.metadata_check`) without a problem.
Then ``verify`` itself on damaged copies: the check is what it reports, under the documented
kinds and names.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from flink_fixtures import VERSION_SETS, fixture_sets, release_fixtures, snapshots
from flink_restore import FlinkUnavailable
from flink_versions import FLINK_1X, load_metadata, load_mutations

from formats.flink.read.metadata import parse_metadata
from formats.flink.read.metadata_check import check_metadata_bytes
from formats.ops.verify import PROBLEM_KINDS, WARNING_KINDS, verify_checkpoint

FLINK_2X = "2.3.0"


def _smallest_checkpoint(paths: list[Path]) -> Path:
    """The smallest ``_metadata`` among snapshots that have a coordinator state."""
    with_coordinators = [p for p in paths if any(
        op.coordinator_state is not None for op in parse_metadata(p.read_bytes()).operators)]
    if not with_coordinators:
        pytest.fail(f"no fixture _metadata with a coordinator state among {len(paths)}")
    return min(with_coordinators, key=lambda p: p.stat().st_size)


def _heap_metadata() -> Path:
    paths = [set_dir / snap["path"] / "_metadata" for set_dir, snap in snapshots("heap")]
    if not paths:
        pytest.fail("no heap fixtures (set STATECTL_FLINK_FIXTURES)")
    return _smallest_checkpoint(paths)


def _release_metadata() -> Path:
    """The smallest ``_metadata`` a Flink 1.x release wrote (Flink 1.20 loads each of them)."""
    ours = [r for r in release_fixtures() if r.name.startswith("1.")]
    if not ours:
        pytest.fail("no Flink 1.x release fixtures (set STATECTL_FLINK_VERSIONS_FIXTURES)")
    return _smallest_checkpoint([path for release in ours for name in VERSION_SETS
                                 for path in (release / name).rglob("_metadata")])


def _mutations(data: bytes, masks: tuple[int, ...]) -> list[tuple[str, bytes]]:
    out = [(f"cut at {n}", data[:n]) for n in range(len(data))]
    for mask in masks:
        for i in range(len(data)):
            flipped = bytearray(data)
            flipped[i] ^= mask
            out.append((f"byte {i} ^ {mask:#04x}", bytes(flipped)))
    return out


@pytest.mark.parametrize("version", [FLINK_2X, FLINK_1X])
def test_nothing_flink_refuses_in_metadata_passes_the_check(version: str) -> None:
    """Truncation at every offset and flips of every byte: where Flink's loader (or the
    source coordinator's restore) refuses the file, statectl reports a problem."""
    source = _heap_metadata() if version == FLINK_2X else _release_metadata()
    data = source.read_bytes()
    # two flips of every byte of Flink 2.3's file, one of the (three times larger) 1.x one
    masks = (0xFF, 0x01) if version == FLINK_2X else (0xFF,)
    mutations = _mutations(data, masks)
    try:
        results = [*load_metadata(version, [source]), *load_mutations(version, source, masks)]
    except FlinkUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    mutations.insert(0, ("unchanged", data))
    assert results[0] == (True, results[0][1]) and "coordinators=ok" in results[0][1], (
        results[0])  # the file as Flink wrote it loads
    missed, refused_by_flink, stricter = [], 0, 0
    for (what, mutated), (loaded, said) in zip(mutations, results, strict=True):
        flink_refuses = not loaded or "coordinators=ok" not in said
        problems = [f for f in check_metadata_bytes(mutated) if f[0] in PROBLEM_KINDS]
        refused_by_flink += flink_refuses
        if flink_refuses and not problems:
            missed.append(f"{what}: Flink says {said[-300:]}")
        stricter += bool(problems) and not flink_refuses
    assert not missed, f"{len(missed)} of {refused_by_flink} refused by Flink pass: {missed[:5]}"
    assert refused_by_flink > len(data)  # every truncation, and flips besides
    # statectl is stricter only where documented (field names, flags, coordinator content
    # that Flink's loader leaves to the restore); say how often, to keep it in view
    print(f"{source}: {len(mutations)} mutations, {refused_by_flink} refused by Flink, "
          f"{stricter} refused by statectl alone")


def test_the_fixtures_metadata_is_clean() -> None:
    """Every fixture ``_metadata`` of every kind and release passes the check unchanged."""
    paths = [p for root in ("heap", "rocksdb", "types", "versions") for s in (
        fixture_sets(root) if root != "versions" else release_fixtures())
        for p in s.rglob("_metadata")]
    assert paths
    for path in paths:
        findings = check_metadata_bytes(path.read_bytes())
        assert findings == [], (path, findings)


def _copy(snapshot: Path, to: Path) -> Path:
    shutil.copytree(snapshot, to)
    for path in [to, *to.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return to


def test_verify_reports_metadata_damage_flink_would_refuse(tmp_path: Path) -> None:
    source = _heap_metadata().parent
    data = (source / "_metadata").read_bytes()
    flink = parse_metadata(data)
    # cut in the checkpoint properties: opening works, Flink's loader would not
    cut = _copy(source, tmp_path / "cut")
    (cut / "_metadata").write_bytes(data[:flink.properties_offset + len(flink.properties) // 2])
    report = verify_checkpoint(str(cut))
    assert not report.clean
    assert [(p.kind, p.where) for p in report.problems] == [("metadata", "_metadata")]
    assert "checkpoint properties" in report.problems[0].message
    # a coordinator's enumerator checkpoint with a length beyond its bytes
    coordinator = next(op.coordinator_state for op in flink.operators
                       if op.coordinator_state is not None)
    assert coordinator.data is not None
    at = data.index(coordinator.data)
    flipped = bytearray(data)
    flipped[at + 11] ^= 0x40  # the low byte of the enumerator checkpoint's length
    damaged = _copy(source, tmp_path / "coordinator")
    (damaged / "_metadata").write_bytes(bytes(flipped))
    report = verify_checkpoint(str(damaged))
    assert [p.kind for p in report.problems] == ["unreadable"], report.problems
    assert report.problems[0].where.endswith("/(coordinator state)")
    # bytes after the properties: Flink leaves them unread, a warning
    trailing = _copy(source, tmp_path / "trailing")
    (trailing / "_metadata").write_bytes(data + b"\0\0\0")
    report = verify_checkpoint(str(trailing))
    assert report.clean
    assert [(w.kind, w.where) for w in report.warnings] == [("trailing-bytes", "_metadata")]
    assert "3 bytes" in report.warnings[0].message
    assert {"trailing-bytes", "unchecked"} <= set(WARNING_KINDS)


def test_verify_names_missing_and_resized_flink_files_by_kind(tmp_path: Path) -> None:
    """A missing state file is ``missing-file``, one of another size ``size``, each named by
    its path; what could not be read because of it is not reported twice."""
    candidates = [set_dir / snap["path"] for set_dir, snap in snapshots("heap")
                  if snap["kind"] == "savepoint" and snap["format"] == "canonical"]
    with_files = [c for c in candidates
                  if sum(1 for p in c.iterdir() if p.name != "_metadata") >= 2]
    if not with_files:
        pytest.fail(f"no canonical savepoint with two state files among {candidates}")
    source = with_files[0]
    files = sorted(p.name for p in source.iterdir() if p.name != "_metadata")
    snapshot = _copy(source, tmp_path / "s")
    (snapshot / files[0]).unlink()
    (snapshot / files[1]).write_bytes(b"")
    report = verify_checkpoint(str(snapshot))
    found = sorted((p.kind, p.where) for p in report.problems)
    assert found == sorted([("missing-file", files[0]), ("size", files[1])]), report.problems
    assert all("operator" in p.message for p in report.problems)


def test_what_only_verify_warns_of_never_stops_a_rescale(tmp_path: Path) -> None:
    """Trailing bytes in ``_metadata`` are a verify warning; the source still rescales."""
    from formats.open import open_checkpoint
    from formats.ops.rescale import plan_checkpoint, rescale_checkpoint

    source = _copy(_heap_metadata().parent, tmp_path / "source")
    (source / "_metadata").write_bytes((source / "_metadata").read_bytes() + b"\0\0")
    assert [w.kind for w in verify_checkpoint(str(source)).warnings] == ["trailing-bytes"]
    checkpoint = open_checkpoint(str(source))
    rescale_checkpoint(checkpoint, str(tmp_path / "out"), plan_checkpoint(checkpoint, 3))
    assert verify_checkpoint(str(tmp_path / "out")).clean
