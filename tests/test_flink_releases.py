"""Savepoints for the Flink release the user runs (issue 31), without a Flink job.

- Which ``_metadata`` each release reads and writes (:mod:`formats.flink.write.versions`), written
by
  :func:`formats.flink.write.metadata_out.savepoint_metadata` and read back by statectl and by each
  release's own ``Checkpoints.loadCheckpointMetadata`` (Flink 1.20 and 2.3 here; every release
  from 1.15 with ``make test-flink-versions``).
- The snapshots of every release in the versions root are read: each equals the same job's
  2.3 snapshot of the same input (which ``test_flink_fixtures`` checks against its
  ``expected.json``); a rescale writes the source's ``_metadata`` version by default, another
  with ``--flink-version``, and refuses a release that cannot hold the state, with one line.
- Operators without uids (Flink 1.x) are named by the job's uids (``--uid``, ``--uid-hash``, a
  uid file), and a savepoint written for Flink 2.x from them stores the uids.

Flink restoring what statectl writes, per release: ``test_flink_release_restore.py``.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from flink_fixtures import (
    VERSION_SETS,
    expected,
    fixture_sets,
    release_checkpoint,
    release_fixtures,
)
from flink_restore import FixtureInput, FlinkUnavailable
from flink_versions import FLINK_1X, load_metadata

from formats.flink.read.metadata import parse_metadata
from formats.flink.write.metadata_out import OperatorOut, savepoint_metadata
from formats.flink.write.versions import (
    LATEST,
    OLDEST,
    FlinkRelease,
    check_target_holds,
    infer_release,
    parse_release,
    target_release,
)
from formats.model.operator_names import OperatorNames
from formats.open import open_checkpoint
from formats.ops.diff import diff_checkpoints
from statecore.errors import InvalidArgumentError, UnsupportedFormatError
from statecore.hashing import operator_id_of_uid

REPO = Path(__file__).resolve().parent.parent
RELEASES = release_fixtures()
#: Flink releases whose jars ``make test`` installs (the Flink venv's and the newest 1.x).
IN_MAKE_TEST = ("2.3.0", FLINK_1X)
#: The java job's uids (the fixture jobs' README): Flink derives the OperatorIDs from them.
JAVA_UIDS = ("file-source", "parse", "op-state-map", "str-keyed", "long-keyed", "int-keyed",
             "rules-source", "rules-parse", "broadcast-fn", "print-sink")


def _statectl(*args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=REPO,
                          capture_output=True, text=True, check=False)
    assert done.returncode == code, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    return done


def _metadata_version(snapshot: Path) -> int:
    version: int = struct.unpack(">i", (snapshot / "_metadata").read_bytes()[4:8])[0]
    return version


def test_there_are_release_fixtures() -> None:
    assert RELEASES, "no release folders in the versions root ($STATECTL_FLINK_VERSIONS_FIXTURES)"
    assert {r.name.split(".")[0] for r in RELEASES} == {"1", "2"}


# -- what each release reads and writes --------------------------------------------------------

@pytest.mark.parametrize(("text", "metadata", "kryo", "operator_proxy"), [
    ("1.15", 3, 2, 5), ("1.16", 4, 2, 5), ("1.17.2", 4, 2, 5), ("1.18", 4, 2, 6),
    ("1.20", 4, 2, 6), ("2.0", 5, 5, 6), ("2.1", 6, 5, 6), ("2.3", 6, 5, 6)])
def test_a_release_writes_its_metadata_version_and_kryo(text: str, metadata: int, kryo: int,
                                                        operator_proxy: int,
                                                        tmp_path: Path) -> None:
    release = parse_release(text)
    assert (release.metadata_version, release.kryo_major) == (metadata, kryo)
    assert release.stores_uids == (metadata >= 5)
    assert release.operator_proxy_version == operator_proxy
    out = tmp_path / "out"
    _statectl("rescale", str(release_checkpoint(RELEASES[0], "java-heap")), "-p", "2",
              "--flink-version", text, "--out", str(out))
    written = open_checkpoint(str(out))  # statectl reads back both operator proxy versions
    files = {h.stream.path for op in written.flink.operators for st in op.subtasks
             for h in st.managed_operator if h.stream.kind == "relative"}
    assert files and {struct.unpack(">i", (out / f).read_bytes()[:4])[0]
                      for f in files} == {operator_proxy}


@pytest.mark.parametrize("text", ["1.14", "3.0", "2.4", "1", "x.y", "", "1.20-SNAPSHOT"])
def test_a_release_statectl_does_not_write_for_is_refused(text: str) -> None:
    with pytest.raises(InvalidArgumentError, match="--flink-version"):
        parse_release(text)


def test_the_default_target_is_the_oldest_release_that_writes_the_source_metadata() -> None:
    assert infer_release(4).release == FlinkRelease(1, 16)
    assert infer_release(4).releases == "Flink 1.16 to 1.20"
    assert infer_release(3).release == OLDEST  # written by 1.11 to 1.15: 1.15 is the oldest
    assert infer_release(5).release == FlinkRelease(2, 0)
    assert infer_release(6).release == FlinkRelease(2, 1)
    assert infer_release(None).release == LATEST and infer_release(None).chosen_by == "default"
    chosen = target_release("1.18", 6)
    assert chosen.release == FlinkRelease(1, 18) and not chosen.inferred


def _operator(uid: str) -> OperatorOut:
    return OperatorOut(operator_id_of_uid(uid), f"name-{uid}", uid, 2, 128)


@pytest.mark.parametrize("version", [3, 4, 5, 6])
def test_each_metadata_version_reads_back(version: int) -> None:
    data = savepoint_metadata(7, [_operator("a"), _operator("b")], version)
    parsed = parse_metadata(data, "_metadata")
    assert parsed.version == version and parsed.checkpoint_id == 7
    stored = [(op.operator_id, op.uid, op.name) for op in parsed.operators]
    if version >= 5:
        assert stored == [(operator_id_of_uid(u), u, f"name-{u}") for u in "ab"]
    else:  # Flink 1.x stores neither uid nor name
        assert stored == [(operator_id_of_uid(u), None, None) for u in "ab"]
    assert parsed.is_savepoint is (True if version >= 4 else None)


def test_an_unknown_metadata_version_is_refused() -> None:
    with pytest.raises(InvalidArgumentError):
        savepoint_metadata(1, [], 7)


#: Releases whose loader ``make test-flink-versions`` runs too.
OTHER_LOADERS = ("1.15.4", "1.16.3", *os.environ.get(
    "STATECTL_FLINK_RELEASES", "1.17.2,1.18.1,1.19.3,2.0.2,2.1.3,2.2.1").split(","))


@pytest.mark.parametrize("version", [*IN_MAKE_TEST, *(
    pytest.param(v, marks=pytest.mark.flink_versions) for v in OTHER_LOADERS)])
def test_flink_loads_the_metadata_of_its_release(version: str, tmp_path: Path) -> None:
    """Flink's own loader reads what statectl writes for it, and refuses what is newer."""
    major, minor = (int(x) for x in version.split(".")[:2])
    release = FlinkRelease(major, minor)
    paths = []
    for v in (3, 4, 5, 6):
        path = tmp_path / f"v{v}" / "_metadata"
        path.parent.mkdir()
        path.write_bytes(savepoint_metadata(3, [_operator("a")], v))
        paths.append(path)
    try:
        results = load_metadata(version, paths)
    except FlinkUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    for v, (loaded, what) in zip((3, 4, 5, 6), results, strict=True):
        assert loaded == (v <= release.metadata_version), (v, what)
        if loaded:
            assert "trailing=0" in what and "operators=1" in what
            assert ("formatType=CANONICAL" in what) == (v >= 4), what
        else:
            assert f"version number: {v}" in what


@pytest.mark.parametrize("version", [*IN_MAKE_TEST, *(
    pytest.param(v, marks=pytest.mark.flink_versions) for v in OTHER_LOADERS)])
def test_the_serializer_classes_table_matches_the_release_jars(version: str) -> None:
    """SNAPSHOT_CLASSES says which releases have a class: exactly those whose jars do."""
    from flink_restore import FLINK_VERSION
    from flink_restore import pyflink_lib as venv_lib
    from flink_versions import pyflink_lib

    from formats.flink.write.versions import SNAPSHOT_CLASSES

    try:
        lib = venv_lib() if version == FLINK_VERSION else pyflink_lib(version)
    except FlinkUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    names = {name[:-6].replace("/", ".") for jar in lib.glob("*.jar")
             for name in zipfile.ZipFile(jar).namelist() if name.endswith(".class")}
    assert len(names) > 10_000
    release = FlinkRelease(*(int(x) for x in version.split(".")[:2]))
    wrong = [(prefix, first.label, last.label) for prefix, first, last in SNAPSHOT_CLASSES
             if any(n.startswith(prefix) for n in names) != (first <= release <= last)]
    assert wrong == []


# -- reading every release's snapshots ---------------------------------------------------------

def _same_job_23(kind: str, max_parallelism: int) -> Path:
    """The 2.3 fixture set of the same job and input (the versions README: the same jobs, the
    default input), by what its expected.json says."""
    for fixture_set in fixture_sets("heap"):
        document = expected(fixture_set)
        if document["job"] == kind and int(document["max_parallelism"]) == max_parallelism \
                and FixtureInput.from_expected(document) == FixtureInput():
            snap = next(s for s in document["snapshots"]
                        if s["format"] == "canonical" and "rescaled_from" not in s)
            return fixture_set / snap["path"]
    pytest.fail(f"no 2.3 fixture set of the {kind} job with max parallelism {max_parallelism}")


CASES = [(r, name) for r in RELEASES for name in VERSION_SETS]


@pytest.mark.parametrize(("release", "name"), CASES, ids=[f"{r.name}-{n}" for r, n in CASES])
def test_every_release_snapshot_holds_the_expected_state(release: Path, name: str) -> None:
    """Every value equals the 2.3 snapshot's of the same job and input (``diff``)."""
    source = open_checkpoint(str(release_checkpoint(release, name)))
    max_p = source.metadata.operators[0].max_parallelism
    reference = open_checkpoint(str(_same_job_23(VERSION_SETS[name][0], max_p)))
    report = diff_checkpoints(source, reference)
    assert report.equal and report.compared > 100, report.differences[:3]
    assert not source.undecodable_parts()


@pytest.mark.parametrize("release", RELEASES, ids=[r.name for r in RELEASES])
def test_a_rescale_writes_the_source_release_unless_told(release: Path, tmp_path: Path) -> None:
    chk = release_checkpoint(release, "java-heap")
    source_version = _metadata_version(chk)
    out = tmp_path / "same"
    done = _statectl("--output", "json", "rescale", str(chk), "-p", "3", "--max-parallelism",
                     "256", "--out", str(out))
    result = json.loads(done.stdout)["result"]
    assert _metadata_version(out) == source_version
    assert result["flink_release"]["metadata_version"] == source_version
    assert result["flink_release"]["chosen_by"] == "source"
    assert diff_checkpoints(open_checkpoint(str(chk)), open_checkpoint(str(out))).equal
    for target, version in (("1.15", 3), ("1.20", 4), ("2.0", 5), ("2.3", 6)):
        if FlinkRelease(*map(int, target.split("."))).major < int(release.name[0]):
            continue  # a 2.x snapshot for 1.x: refused unless its serializers allow it (below)
        out = tmp_path / f"for-{target}"
        done = _statectl("rescale", str(chk), "-p", "2", "--flink-version", target, "--out",
                         str(out))
        assert _metadata_version(out) == version
        assert f"for Flink {target} (_metadata version {version}; --flink-version" in done.stdout
        assert diff_checkpoints(open_checkpoint(str(chk)), open_checkpoint(str(out))).equal


@pytest.mark.parametrize("option", ["3.1", "1.14", "twenty", "2.4"])
def test_an_unsupported_flink_version_is_one_line_exit_3(option: str, tmp_path: Path) -> None:
    chk = release_checkpoint(RELEASES[0], "java-heap")
    for command in (["rescale", str(chk), "-p", "3"], ["convert", str(chk)]):
        done = _statectl(*command, "--flink-version", option, "--out", str(tmp_path / "o"),
                         code=3)
        assert done.stderr.count("\n") == 1 and done.stderr.startswith("Error: --flink-version")
        assert not (tmp_path / "o").exists()


def _types_snapshot_with_kryo() -> Path:
    for fixture_set in fixture_sets("types"):
        for snap in expected(fixture_set)["snapshots"]:
            if snap["format"] == "canonical":
                return fixture_set / snap["path"]
    pytest.fail("no types fixture set")


def test_kryo_state_is_not_written_for_another_major(tmp_path: Path) -> None:
    """A 2.3 snapshot with a Kryo value (the types job): Flink 1.x cannot read Kryo 5."""
    snapshot = _types_snapshot_with_kryo()
    done = _statectl("rescale", str(snapshot), "-p", "2", "--flink-version", "1.20", "--out",
                     str(tmp_path / "o"), code=3)
    assert done.stderr.count("\n") == 1 and "Kryo" in done.stderr, done.stderr
    assert not (tmp_path / "o").exists()
    _statectl("rescale", str(snapshot), "-p", "2", "--flink-version", "2.1", "--out",
              str(tmp_path / "ok"))
    assert _metadata_version(tmp_path / "ok") == 6


def test_the_checks_name_what_a_release_cannot_hold() -> None:
    from formats.flink.types.snapshots import SerializerSnapshot

    flink = "org.apache.flink.api."
    scala = SerializerSnapshot(f"{flink}scala.typeutils.ScalaCaseClassSerializerSnapshot", 3)
    kryo = SerializerSnapshot(f"{flink}common.typeutils.base.ListSerializerSnapshot", 1,
                              nested=(SerializerSnapshot(
                                  f"{flink}java.typeutils.runtime.kryo.KryoSerializerSnapshot",
                                  2),))
    long = SerializerSnapshot(
        "org.apache.flink.api.common.typeutils.base.LongSerializer$LongSerializerSnapshot", 3)
    pojo = SerializerSnapshot(
        "org.apache.flink.api.java.typeutils.runtime.PojoSerializerSnapshot", 2)
    for_2x, for_1x = target_release("2.3", 4), target_release("1.20", 6)
    with pytest.raises(UnsupportedFormatError, match="ScalaCaseClassSerializerSnapshot"):
        check_target_holds(for_2x, 4, [("state 's'", scala)])
    with pytest.raises(UnsupportedFormatError, match="Kryo 2"):
        check_target_holds(for_2x, 4, [("state 'k'", kryo)])
    with pytest.raises(UnsupportedFormatError, match="Kryo 5"):
        check_target_holds(for_1x, 6, [("state 'k'", kryo)])
    with pytest.raises(UnsupportedFormatError, match="PojoSerializerSnapshot"):
        check_target_holds(for_1x, 6, [("state 'p'", pojo)])
    check_target_holds(for_1x, 6, [("state 'l'", long)])  # downgrade-safe
    check_target_holds(target_release("1.18", 4), 4, [("s", scala), ("k", kryo), ("p", pojo)])
    check_target_holds(for_2x, None, [("s", scala)])  # statectl's own: nothing carried over


# -- operators without uids ---------------------------------------------------------------------

def _release_1x() -> Path:
    for release in RELEASES:
        if release.name.startswith("1."):
            return release
    pytest.fail("no Flink 1.x release folder")


def test_uids_name_the_operators_of_a_1x_snapshot(tmp_path: Path) -> None:
    release = _release_1x()
    chk = release_checkpoint(release, "java-heap")
    plain = json.loads(_statectl("--output", "json", "inspect", str(chk)).stdout)
    assert all(op["operator"]["uid"] is None and op["operator"]["uid_from"] is None
               for op in plain["operators"])
    uid_file = tmp_path / "uids.txt"
    uid_file.write_text("# the java job's uids\nparse\nint-keyed   # a comment\n\n"
                        f"{operator_id_of_uid('print-sink')}=the-sink\n", encoding="utf-8")
    done = _statectl("--output", "json", "--uid", "str-keyed", "--uid", "long-keyed",
                     "--uid", "no-such-uid",
                     "--uid-hash", f"{operator_id_of_uid('broadcast-fn').upper()}=bcast",
                     "--uid-file", str(uid_file), "inspect", str(chk))
    named = {op["operator"]["id"]: (op["operator"]["uid"], op["operator"]["uid_from"])
             for op in json.loads(done.stdout)["operators"]}
    assert named[operator_id_of_uid("str-keyed")] == ("str-keyed", "uid")
    assert named[operator_id_of_uid("int-keyed")] == ("int-keyed", "uid")
    assert named[operator_id_of_uid("broadcast-fn")] == ("bcast", "uid-hash")
    assert named[operator_id_of_uid("print-sink")] == ("the-sink", "uid-hash")
    assert named[operator_id_of_uid("rules-source")] == (None, None)
    assert "no operator has the OperatorID of no-such-uid" in done.stderr
    assert "operators named by the uids given" in done.stderr
    # the text output and a plan use them too
    text = _statectl("--uid", "str-keyed", "rescale", str(chk), "-p", "3", "--plan").stdout
    assert "str-keyed" in text


def test_a_1x_snapshot_written_for_2x_stores_the_given_uids(tmp_path: Path) -> None:
    release = _release_1x()
    chk = release_checkpoint(release, "java-heap")
    out = tmp_path / "for-2.3"
    args = [a for uid in JAVA_UIDS for a in ("--uid", uid)]
    _statectl(*args, "rescale", str(chk), "-p", "2", "--flink-version", "2.3", "--out", str(out))
    written = open_checkpoint(str(out))
    stored = {op.identity.id: (op.identity.uid, op.identity.uid_from)
              for op in written.metadata.operators}
    assert stored == {operator_id_of_uid(u): (u, "snapshot") for u in JAVA_UIDS}
    out_1x = tmp_path / "for-1.20"
    _statectl(*args, "rescale", str(chk), "-p", "2", "--out", str(out_1x))
    assert all(op.identity.uid is None for op in open_checkpoint(str(out_1x)).metadata.operators)


@pytest.mark.parametrize("args", [("--uid-hash", "1234=x"), ("--uid-hash", "abc"),
                                  ("--uid", "a", "--uid-hash", f"{operator_id_of_uid('a')}=b"),
                                  ("--uid", "")])
def test_bad_uid_options_are_one_line_exit_3(args: tuple[str, ...]) -> None:
    chk = release_checkpoint(RELEASES[0], "java-heap")
    done = _statectl(*args, "inspect", str(chk), code=3)
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("Error: --uid")


def test_operator_names_parse() -> None:
    names = OperatorNames.parse(["a"], [f"{'AB' * 16}=b"], ["c", "# x", f"{'cd' * 16} = d "])
    assert names.uid_of(operator_id_of_uid("a")) == ("a", "uid")
    assert names.uid_of("ab" * 16) == ("b", "uid-hash")
    assert names.uid_of(operator_id_of_uid("c")) == ("c", "uid")
    assert names.uid_of("cd" * 16) == ("d", "uid-hash")
    assert names.unmatched([operator_id_of_uid("a")]) == ["b", "c", "d"]
    with pytest.raises(InvalidArgumentError, match="line 1"):
        OperatorNames.parse(lines=["x=y"])
    assert not OperatorNames.parse()
