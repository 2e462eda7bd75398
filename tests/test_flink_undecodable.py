"""Never all-or-nothing: what cannot be decoded is reported, and everything else is read.

Real snapshots of ``flink-fixtures-types`` (heap checkpoint, canonical savepoint, RocksDB
incremental checkpoint and native savepoint), copied and changed in one place:

* **unsupported**: one state's serializer snapshot renamed to a class statectl does not know
  (the same number of bytes, so the snapshot stays intact): that state's values are
  undecodable -- markers with their bytes where the format delimits values, counted as left out
  in the heap format -- and every other state and operator is exactly as in the untouched
  snapshot; every reading command exits 0 with one line on stderr; ``verify`` names the state
  as not read (exit 1);
* **damaged**: one POJO value's flags byte set to a value no ``PojoSerializer`` writes: the
  damage is exactly that value (canonical savepoint) or that state's block in one key group
  (heap checkpoint: the next block is found again); everything else is as untouched; reading
  commands exit 3 (0 with ``--partial``), ``verify`` 1.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_support import run
from flink_fixtures import backend, expected, require_fixtures

from formats.open import open_checkpoint
from formats.ops.verify import verify_checkpoint
from statecore.errors import CorruptCheckpointError
from statecore.undecodable import Undecodable

#: The serializer snapshot class of the ``day`` state (LocalDate), and the same number of bytes
#: naming a class statectl does not know.
DAY_SNAPSHOT = b"LocalDateSerializer$LocalDateSerializerSnapshot"
UNKNOWN_SNAPSHOT = b"LocalDatXSerializer$LocalDateSerializerSnapshot"
#: A ``TypesJob$Event`` POJO's nested address ``Address{city="Krakow"}``: its flags byte (2: this
#: class), the city's null flag, the city as a StringValue. Flags 0x10 name no class.
ADDRESS = b"\x02\x00\x07Krak\xf3\x01w"
BAD_FLAGS = 0x10


def _snapshots() -> list[tuple[str, Path]]:
    """``(id, snapshot dir)`` of the snapshots every types fixture set's job took itself (not
    Flink's rescaled restores of them); ids ``SET:FORMAT-KIND [BACKEND]``, the backend as
    Flink's reading of the set found (:func:`flink_fixtures.backend`: set names may not say)."""
    out = []
    for fixture_set in require_fixtures("types"):
        for snap in expected(fixture_set)["snapshots"]:
            if "rescaled_from" not in snap:
                out.append((f"{fixture_set.name}:{snap['format']}-{snap['kind']} "
                            f"[{backend(fixture_set)}]", fixture_set / snap["path"]))
    return out


SNAPSHOTS = _snapshots()


def _copy(snapshot: Path, tmp_path: Path) -> Path:
    """The snapshot copied with its job folder (a checkpoint's shared/ files)."""
    base = snapshot.parent if snapshot.name.startswith("chk-") else snapshot
    target = tmp_path / base.name
    shutil.copytree(base, target)
    return target / snapshot.name if base != snapshot else target


def _patch(root: Path, change: Callable[[bytes], bytes | None]) -> int:
    """Apply ``change`` to every file under ``root``; how many files changed."""
    changed = 0
    for path in sorted(root.parent.rglob("*") if root.name.startswith("chk-")
                       else root.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            new = change(data)
            if new is not None and new != data:
                path.write_bytes(new)
                changed += 1
    return changed


def _states(location: Path, partial: bool = False
            ) -> dict[tuple[str, str], list[tuple[Any, ...]]]:
    """Every keyed state's entries and every operator state's elements, by (uid, state)."""
    checkpoint = open_checkpoint(str(location), partial=partial)
    out: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
    for op in checkpoint.metadata.operators:
        for state in op.states:
            if state.scope == "keyed":
                out[(op.uid, state.name)] = [tuple(e) for e in
                                             checkpoint.keyed_entries(op.uid, state.name)]
            else:
                out[(op.uid, state.name)] = [
                    (st.index, repr(entry)) for st in op.subtasks
                    for entry in checkpoint.operator_entries(op.uid, st.index)
                    if entry.name == state.name]
    return out


@pytest.mark.parametrize(("name", "snapshot"), SNAPSHOTS, ids=[s[0] for s in SNAPSHOTS])
def test_an_unknown_serializer_hides_nothing_else(name: str, snapshot: Path,
                                                               tmp_path: Path) -> None:
    copy = _copy(snapshot, tmp_path)
    assert _patch(copy, lambda data: data.replace(DAY_SNAPSHOT, UNKNOWN_SNAPSHOT)) > 0
    before, after = _states(snapshot), _states(copy)
    assert set(after) == set(before)  # every state of every operator is still there
    for key, entries in before.items():
        if key[1] != "day":
            assert after[key] == entries, key  # and exactly as in the untouched snapshot
    checkpoint = open_checkpoint(str(copy))
    parts = [p for p in checkpoint.undecodable_parts() if p.state == "day"]
    assert parts and not any(p.damaged for p in parts)
    assert all("LocalDatXSerializer" in p.serializer + p.reason for p in parts)
    day = after[("pojo-keyed", "day")]
    if ":canonical-" in name or "[rocksdb]" in name:  # delimited values: markers with the bytes
        assert len(day) == len(before[("pojo-keyed", "day")])
        assert all(type(e[3]) is Undecodable and e[3].data is not None and not e[3].damaged
                   for e in day)
        assert [e[:3] for e in day] == [e[:3] for e in before[("pojo-keyed", "day")]]
        assert sum(p.values for p in parts) == len(day)
    else:  # the heap format: the blocks are counted and left out
        assert day == []
        assert sum(p.values for p in parts) == len(before[("pojo-keyed", "day")])
    # a summary reads only _metadata and the headers: it decodes nothing, and says so
    code, out, err = run("inspect", str(copy))
    assert code == 0 and "day" in out and "keyed entries not counted" in out, err
    key = str(before[("pojo-keyed", "last-event")][0][1])  # a key the snapshot holds
    commands = (["inspect", "--all"], ["inspect", "--key", key],
                ["export", "--format", "jsonl", "--out", str(tmp_path / "x")],
                ["rescale", "--plan", "-p", "3"], ["diff", str(copy)])
    for command in commands:
        code, out, err = run(*command[:1], str(copy), *command[1:])
        assert code == 0, (command, err)
        assert "not decoded" in err and "pojo-keyed/day" in err, err
        assert ("last-event" if command[0] == "inspect" else "pojo-keyed") in out or (
            command[0] in ("export", "diff"))
    # verify: clean only when every state was read -- the day state was not (exit 1)
    code, out, err = run("--output", "json", "verify", str(copy))
    report = json.loads(out)
    assert code == 1 and not report["clean"], err
    problems = [p for p in report["problems"] if p["kind"] == "undecodable"]
    assert [p["where"] for p in problems] == ["pojo-keyed/day"], problems
    assert report["not_read"] == {"states": 1, "entries": len(before[("pojo-keyed", "day")]),
                                  "streams": 0}


@pytest.mark.parametrize(("name", "snapshot"),
                         [s for s in SNAPSHOTS if "[rocksdb]" not in s[0]
                          and ":native-savepoint " not in s[0]],
                         ids=[s[0] for s in SNAPSHOTS if "[rocksdb]" not in s[0]
                              and ":native-savepoint " not in s[0]])
def test_one_corrupt_value_is_the_only_damage_and_exits_3(name: str, snapshot: Path,
                                                          tmp_path: Path) -> None:
    copy = _copy(snapshot, tmp_path)

    def corrupt(data: bytes) -> bytes | None:
        at = data.find(ADDRESS)
        if at < 0 or b"_metadata" in data[:0]:
            return None
        return data[:at] + bytes([BAD_FLAGS]) + data[at + 1:]

    done = [False]

    def once(data: bytes) -> bytes | None:  # the first file holding an address only
        if done[0]:
            return None
        new = corrupt(data)
        done[0] = new is not None
        return new

    assert _patch(copy, once) == 1
    with pytest.raises(CorruptCheckpointError, match="POJO flags"):
        open_checkpoint(str(copy))  # a library caller is not handed damaged state silently
    before, after = _states(snapshot), _states(copy, partial=True)
    checkpoint = open_checkpoint(str(copy), partial=True)
    damaged = [p for p in checkpoint.undecodable_parts() if p.damaged]
    assert len({(p.state, p.subtask, p.key_group) for p in damaged}) == 1, damaged
    hit = damaged[0]
    assert hit.key_group is not None and hit.operator == "pojo-keyed"
    for key, entries in before.items():
        if key != (hit.operator, hit.state):
            assert after[key] == entries, key
    other = [e for e in before[(hit.operator, hit.state)] if e[0] != hit.key_group]
    assert [e for e in after[(hit.operator, hit.state)] if e[0] != hit.key_group] == other
    in_group = [e for e in after[(hit.operator, hit.state)] if e[0] == hit.key_group]
    was = [e for e in before[(hit.operator, hit.state)] if e[0] == hit.key_group]
    if ":canonical-" in name:  # exactly one value: a marker with its bytes, the rest decoded
        assert hit.values == 1 and hit.kept
        markers = [e for e in in_group if type(e[3]) is Undecodable]
        assert len(markers) == 1 and markers[0][3].damaged and markers[0][3].data
        assert [e for e in in_group if type(e[3]) is not Undecodable] == [
            e for e in was if e[:3] != markers[0][:3]]
    else:  # the state's block in that key group: what was read before the value is kept
        assert not hit.kept and hit.values >= 1
        assert len(in_group) + hit.values == len(was)
        assert in_group == was[:len(in_group)]
    code, out, err = run("inspect", str(copy), "--all")  # decodes every state
    assert code == 3 and "last-event" in out and "damaged" in err, err
    code, out, err = run("--partial", "inspect", str(copy), "--all")
    assert code == 0 and "damaged" in err, err
    report = verify_checkpoint(str(copy))
    assert not report.clean and report.counts["unreadable"] == 1
    code, out, err = run("verify", str(copy))
    assert code == 1


@pytest.mark.parametrize("max_parallelism", [None, 256])
@pytest.mark.parametrize(("name", "snapshot"), [s for s in SNAPSHOTS if ":canonical-" in s[0]],
                         ids=[s[0] for s in SNAPSHOTS if ":canonical-" in s[0]])
def test_rescale_carries_undecodable_values_as_their_bytes(name: str, snapshot: Path,
                                                           max_parallelism: int | None,
                                                           tmp_path: Path) -> None:
    """A rescale never needs to decode a value: undecodable ones keep their bytes exactly,
    also when the max parallelism changes (only the keys are hashed again)."""
    copy = _copy(snapshot, tmp_path)
    _patch(copy, lambda data: data.replace(DAY_SNAPSHOT, UNKNOWN_SNAPSHOT))
    out = tmp_path / "out"
    args = ["rescale", str(copy), "-p", "3", "--out", str(out)]
    if max_parallelism:
        args += ["--max-parallelism", str(max_parallelism)]
    code, _, err = run(*args)
    assert code == 0, err
    before, after = _states(copy), _states(out)
    assert set(after) == set(before)
    for key, entries in before.items():
        if key[0] == "pojo-keyed":  # keyed: the same entries, in other key groups maybe
            assert sorted(map(repr, (e[1:] for e in after[key]))) == sorted(
                map(repr, (e[1:] for e in entries))), key
    days = {e[1]: e[3] for e in after[("pojo-keyed", "day")]}
    assert {e[1]: e[3].data for e in before[("pojo-keyed", "day")]} == {
        k: v.data for k, v in days.items()}


def test_a_savepoint_that_would_lose_values_is_refused(tmp_path: Path) -> None:
    """A heap checkpoint's block that could not be read: writing it would lose values."""
    heap = [s for s in SNAPSHOTS if ":native-checkpoint " in s[0] and "[rocksdb]" not in s[0]]
    copy = _copy(heap[0][1], tmp_path)
    _patch(copy, lambda data: data.replace(DAY_SNAPSHOT, UNKNOWN_SNAPSHOT))
    code, _, err = run("rescale", str(copy), "-p", "3", "--out", str(tmp_path / "out"))
    assert code == 3 and "would lose" in err and "'day'" in err, err
    assert not (tmp_path / "out").exists()


def _rocksdb_incremental() -> Path:
    for fixture_set in require_fixtures("types"):
        for snap in expected(fixture_set)["snapshots"]:
            path = fixture_set / snap["path"]
            if backend(fixture_set) == "rocksdb" and snap["kind"] == "checkpoint" and (
                    "rescaled_from" not in snap):
                return path
    pytest.fail("no RocksDB checkpoint in the types fixtures")


def test_one_corrupt_rocksdb_value_is_the_only_damage(tmp_path: Path) -> None:
    """A value of an SST data block changed, its block checksum made right again (so RocksDB's
    own checks pass): the damage is that one value, kept as a damaged marker with its bytes.

    The fixture's blocks are Snappy-compressed; the byte changed is in a literal run (the raw
    block holds the pattern), so the block stays valid Snappy.
    """
    from formats.flink.read.metadata import FlinkIncrementalHandle, parse_metadata
    from formats.flink.read.rocksdb import open_sst
    from formats.flink.read.rocksdb.checksums import compute_builtin_checksum, context_modifier

    snapshot = _rocksdb_incremental()
    copy = _copy(snapshot, tmp_path)
    metadata_path = copy / "_metadata"
    metadata = metadata_path.read_bytes()
    flink = parse_metadata(metadata, "_metadata")
    done = False
    for op in flink.operators:
        for st in op.subtasks:
            for handle in st.managed_keyed:
                if done or not isinstance(handle, FlinkIncrementalHandle):
                    continue
                for _local, stream in handle.files:
                    if done or stream.kind != "inline" or stream.data is None:
                        continue
                    data = stream.data
                    try:
                        table = open_sst(data, "sst")
                    except Exception:  # noqa: BLE001 - not an SST file (MANIFEST, ...)
                        continue
                    for _key, block in table.index_entries():
                        end = block.offset + block.size
                        raw = data[block.offset:end]
                        at = raw.find(ADDRESS)
                        if at < 0:  # the pattern in the block as stored (a literal run)
                            continue
                        changed = bytearray(data)
                        changed[block.offset + at] = BAD_FLAGS
                        kind = table.footer.checksum_type
                        stored = bytes(changed[block.offset:end + 1])
                        checksum = (compute_builtin_checksum(kind, stored) + context_modifier(
                            table.footer.base_context_checksum, block.offset)) & 0xFFFFFFFF
                        changed[end + 1:end + 5] = checksum.to_bytes(4, "little")
                        assert metadata.count(data) == 1
                        metadata = metadata.replace(data, bytes(changed))
                        done = True
                        break
    assert done, "no data block holds the pattern as stored"
    metadata_path.write_bytes(metadata)
    before, after = _states(snapshot), _states(copy, partial=True)
    checkpoint = open_checkpoint(str(copy), partial=True)
    damaged = [p for p in checkpoint.undecodable_parts() if p.damaged]
    # Snappy may copy the changed literal to later values of the block: each such value is
    # damaged on its own -- one value a part, kept as a marker, nothing else touched
    assert damaged and all(p.values == 1 and p.kept for p in damaged), damaged
    hit = damaged[0]
    assert {(p.operator, p.state) for p in damaged} == {(hit.operator, hit.state)}
    for key, entries in before.items():
        if key != (hit.operator, hit.state):
            assert after[key] == entries, key
    changed_rows = [(b, a) for b, a in zip(before[(hit.operator, hit.state)],
                                           after[(hit.operator, hit.state)], strict=True)
                    if b != a]
    assert len(changed_rows) == sum(p.values for p in damaged)
    for was, now in changed_rows:  # in the same place: a marker with its bytes
        assert now[:3] == was[:3] and type(now[3]) is Undecodable and now[3].damaged
        assert now[3].data and BAD_FLAGS in now[3].data
    code, out, err = run("inspect", str(copy), "--all")
    assert code == 3 and "damaged" in err and "last-event" in out, err
