"""Format v1 against hostile input (issue 4, acceptance "Hostile input"; DESIGN: a checkpoint is
untrusted input).

One valid sample checkpoint is written once per module; every case reads a mutated copy of it
(unchanged files are hard links, mutated ones are written fresh). Whatever the mutation, opening
and then reading everything (every file's checksum, every keyed state's entries, every
subtask's keyed and operator restore) either works or raises a :class:`StatectlError` with a
message, never another exception and never a hang (a timer turns a hang into a failure), and
the files read are never modified.

Cases: hypothesis-driven structural mutations of ``_metadata.json`` (delete a field, replace a
value at any depth, duplicate list items, copy a value from elsewhere), byte-level mutations
(truncation, bit flips, overwritten bytes, non-UTF-8 bytes), deep nesting, an oversized file;
Parquet files truncated, bit-flipped, swapped, emptied, rewritten with wrong key groups, with
the metadata's sizes and checksums both stale and fixed up (a careful forger); unsafe paths
(``..``, absolute, backslashes, drive letters, symlinks out of the directory), missing files;
unknown format markers and versions; a directory without ``_metadata.json``.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import os
import shutil
import signal
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import hypothesis.strategies as st
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings

import formats.statectl.reader as statectl_reader
import formats.statectl.writer as statectl_writer
from formats.open import open_checkpoint
from formats.statectl.publish import METADATA_FILE
from formats.statectl.writer import write_checkpoint
from statecore.checkpoint import (
    OperatorMetadata,
    OperatorSnapshot,
    SubtaskMetadata,
    SubtaskSnapshot,
)
from statecore.errors import (
    CheckpointError,
    CorruptCheckpointError,
    KeyGroupError,
    StatectlError,
    UnsafePathError,
    UnsupportedFormatError,
)
from statecore.key_groups import compute_key_group_range_for_operator_index
from statecore.keyed_backend import HeapKeyedStateBackend
from statecore.keyed_state import (
    StateDescriptor,
    aggregating_state,
    list_state,
    map_state,
    reducing_state,
    value_state,
)
from statecore.operator_backend import (
    BroadcastStateDescriptor,
    OperatorListStateDescriptor,
    OperatorStateBackend,
)
from statecore.ttl import ManualClock, TtlConfig

KEYED_UID = "keyed op/ü"
SOURCE_UID = "source"
MAX_PARALLELISM = 4  # two key groups per subtask: several row groups, few reads
#: Seconds one case may take before it counts as a hang.
HANG_SECONDS = 20.0

# -- the sample checkpoint --------------------------------------------------------------------


class Average:
    def create_accumulator(self) -> tuple[int, int]:
        return (0, 0)

    def add(self, value: int, acc: tuple[int, int]) -> tuple[int, int]:
        return (acc[0] + value, acc[1] + 1)

    def get_result(self, acc: tuple[int, int]) -> float:
        return acc[0] / max(acc[1], 1)

    def merge(self, a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
        return (a[0] + b[0], a[1] + b[1])


def descriptors() -> list[StateDescriptor]:
    return [
        value_state("count", "int64"),
        list_state("names", "string", ttl=TtlConfig(10**9)),
        map_state("per-window", "string", "float64", namespace_type="tuple<int64,int64>"),
        reducing_state("sum", lambda a, b: a + b, "int64", namespace_type="int64"),
        aggregating_state("avg", Average(), "tuple<int64,int64>"),
        map_state("tagged", "int32", "list<bytes>", ttl=TtlConfig(10**9)),
    ]


def write_sample(root: Path) -> None:
    clock = ManualClock(1_000)
    subtasks = []
    for i in range(2):
        backend: HeapKeyedStateBackend[str] = HeapKeyedStateBackend(
            "string", MAX_PARALLELISM,
            compute_key_group_range_for_operator_index(MAX_PARALLELISM, 2, i), clock=clock)
        count, names, window, total, avg, tagged = (backend.get_state(d) for d in descriptors())
        for k in range(24):
            try:
                backend.set_current_key(f"key-{k}")
            except KeyGroupError:
                continue
            clock.advance(7)
            count.update(k)  # type: ignore[attr-defined]
            names.add_all([f"n{k}", "ü"])  # type: ignore[attr-defined]
            window.set_current_namespace((k, k + 10))
            window.put("p", k / 3)  # type: ignore[attr-defined]
            total.set_current_namespace(k % 3)
            total.add(k)  # type: ignore[attr-defined]
            avg.add(k)  # type: ignore[attr-defined]
            if k % 2:
                tagged.put(k, [bytes([k]), b""])  # type: ignore[attr-defined]
        ops = OperatorStateBackend()
        ops.get_list_state(OperatorListStateDescriptor("offsets", "int64")).add_all([i, i + 10])
        ops.get_union_list_state(OperatorListStateDescriptor("watermarks", "int64")).add(i)
        ops.get_broadcast_state(BroadcastStateDescriptor("cfg", "string", "string")).put_all(
            {"mode": f"m{i}", "ü": "x"})
        subtasks.append(SubtaskSnapshot(i, backend.snapshot(), ops.snapshot()))
    source = OperatorStateBackend()
    source.get_list_state(OperatorListStateDescriptor("positions", "tuple<string,int64>")).add_all(
        [("part-0", 17), ("part-1", 4)])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(statectl_writer, "ROW_GROUP_ROWS", 2)  # several row groups per file
        write_checkpoint(str(root), 42, [
            OperatorSnapshot(KEYED_UID, "Keyed", 2, MAX_PARALLELISM, subtasks),
            OperatorSnapshot(SOURCE_UID, "Source", 1, 128,
                             [SubtaskSnapshot(0, operator=source.snapshot())]),
        ], created_ms=1_700_000_000_000)


def file_hashes(root: Path) -> dict[str, str]:
    """``{relative path: sha256}`` of everything under ``root`` (symlinks: their target)."""
    out = {}
    for dirpath, dirnames, names in os.walk(root):
        for name in dirnames + names:
            path = Path(dirpath) / name
            relative = path.relative_to(root).as_posix()
            if path.is_symlink():
                out[relative] = "symlink:" + os.readlink(path)
            elif path.is_dir():
                out[relative] = "directory"
            elif path.is_file():
                out[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                out[relative] = "special"
    return out


@dataclass(frozen=True)
class Sample:
    root: Path
    metadata: bytes
    document: dict[str, Any]
    files: dict[str, bytes]  # data files by relative path

    def keyed_files(self, uid: str = KEYED_UID) -> dict[tuple[str, int], str]:
        """``{(state, subtask): relative path}`` of one operator's keyed files."""
        op = next(o for o in self.document["operators"] if o["uid"] == uid)
        return {(h["state"], st_["index"]): h["file"] for st_ in op["subtasks"]
                for h in st_["keyed"]}

    def operator_files(self, uid: str = KEYED_UID) -> dict[tuple[str, int], str]:
        op = next(o for o in self.document["operators"] if o["uid"] == uid)
        return {(h["state"], st_["index"]): h["file"] for st_ in op["subtasks"]
                for h in st_["operator"]}


# The hypothesis tests take no pytest fixtures (with fixtures, a failing example was reported
# as FlakyStrategyDefinition instead of its error): the sample is built on first use, in a
# directory the module-scoped ``_remove_sample`` fixture deletes.
_BASE: list[Path] = []


def base_dir() -> Path:
    if not _BASE:
        _BASE.append(Path(tempfile.mkdtemp(prefix="statectl-hostile-")))
    return _BASE[0]


@functools.cache
def get_sample() -> Sample:
    root = base_dir() / "sample" / "chk-42"
    write_sample(root)
    metadata = (root / METADATA_FILE).read_bytes()
    document = json.loads(metadata)
    files = {f["path"]: (root / f["path"]).read_bytes() for f in document["files"]}
    assert len(files) == 6 * 2 + 3 * 2 + 1
    assert not exercise(root)  # the unmutated sample reads without any error
    return Sample(root, metadata, document, files)


@functools.cache
def get_workdir() -> tuple[Path, dict[str, str]]:
    """A copy of the sample whose ``_metadata.json`` examples overwrite; data files' hashes."""
    root = base_dir() / "metadata-cases" / "chk"
    materialize(get_sample(), root)
    hashes = file_hashes(root)
    del hashes[METADATA_FILE]
    return root, hashes


@pytest.fixture(scope="module", autouse=True)
def _remove_sample() -> Iterator[None]:
    yield
    get_sample.cache_clear()
    get_workdir.cache_clear()
    while _BASE:
        shutil.rmtree(_BASE.pop(), ignore_errors=True)


@pytest.fixture
def sample() -> Sample:
    return get_sample()


# -- making cases -----------------------------------------------------------------------------


def materialize(sample: Sample, target: Path, *, metadata: bytes | None = None,
                replace: dict[str, bytes | None] | None = None) -> None:
    """A copy of the sample at ``target``: ``metadata`` as ``_metadata.json``, ``replace``d
    data files (``None``: deleted); untouched data files are hard links to the sample's."""
    replace = replace or {}
    target.mkdir(parents=True)
    (target / METADATA_FILE).write_bytes(sample.metadata if metadata is None else metadata)
    for relative in sample.files:
        path = target / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if relative in replace:
            data = replace[relative]
            if data is not None:
                path.write_bytes(data)
        else:
            try:
                os.link(sample.root / relative, path)
            except OSError:
                shutil.copyfile(sample.root / relative, path)


def encode(document: Any) -> bytes:
    return json.dumps(document, indent=1).encode()


def with_files_fixed(document: dict[str, Any], changes: dict[str, bytes]) -> dict[str, Any]:
    """The document with size and checksum of changed files updated (a careful forger)."""
    document = copy.deepcopy(document)
    for entry in document["files"]:
        if entry["path"] in changes:
            data = changes[entry["path"]]
            entry["size"] = len(data)
            entry["checksum"] = "sha256:" + hashlib.sha256(data).hexdigest()
    return document


class _Hang(BaseException):
    pass


@contextmanager
def time_limit(root: Path | None = None, seconds: float = HANG_SECONDS) -> Iterator[None]:
    """Fail the test when the block runs longer than ``seconds``.

    A timer signal interrupts Python code; a watchdog thread releases a read blocked in C on a
    FIFO under ``root`` (pyarrow retries an interrupted ``open``), by opening it for writing.
    """
    hung = threading.Event()

    def alarm(_signum: int, _frame: FrameType | None) -> None:
        hung.set()
        raise _Hang

    def release_fifos() -> None:
        hung.set()
        for dirpath, _, names in os.walk(root) if root is not None else ():
            for name in names:
                path = os.path.join(dirpath, name)
                if stat.S_ISFIFO(os.lstat(path).st_mode):
                    try:
                        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
                    except OSError:
                        pass  # nobody is reading it

    watchdog = threading.Timer(seconds, release_fifos)
    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds + 1)
    watchdog.start()
    try:
        yield
    except _Hang:
        pass
    finally:
        watchdog.cancel()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    if hung.is_set():
        raise AssertionError(f"reading the checkpoint took more than {seconds} s (a hang)")


def backend_for(op: OperatorMetadata, subtask: SubtaskMetadata
                ) -> HeapKeyedStateBackend[Any] | None:
    """A backend to restore into, registered with the sample's descriptors (the functions a
    file cannot carry); ``None`` when the metadata describes one that cannot be built."""
    if op.key_type is None:
        return None
    try:
        backend: HeapKeyedStateBackend[Any] = HeapKeyedStateBackend(
            op.key_type, op.max_parallelism, subtask.key_group_range)
        for descriptor in descriptors():
            backend.get_state(descriptor)
    except StatectlError:
        return None
    return backend


def exercise(root: Path, hang_seconds: float = HANG_SECONDS,
             focus: set[str] | None = None) -> list[StatectlError]:
    """Open ``root`` and read everything it offers; the StatectlErrors raised on the way.

    With ``focus`` (the data files that differ from the sample), only the reads that touch
    them. Any other exception propagates (the test fails); so does a hang.
    """
    errors: list[StatectlError] = []

    def attempt(action: Callable[..., object], *args: Any) -> None:
        try:
            action(*args)
        except StatectlError as exc:
            assert str(exc).strip(), f"{type(exc).__name__} without a message"
            errors.append(exc)

    def touches(files: list[str]) -> bool:
        return focus is None or not focus.isdisjoint(files)

    with time_limit(root, hang_seconds):
        try:
            checkpoint = open_checkpoint(str(root))
        except StatectlError as exc:
            assert str(exc).strip(), f"{type(exc).__name__} without a message"
            return [exc]
        for info in checkpoint.metadata.files:
            if touches([info.path]):
                attempt(checkpoint.verify_checksum, info.path)
        for op in checkpoint.metadata.operators:
            for state in op.states:
                if state.scope == "keyed" and touches([
                        h.file for st_ in op.subtasks for h in st_.keyed if h.state == state.name]):
                    attempt(list, checkpoint.keyed_entries(op.uid, state.name))
            for subtask in op.subtasks:
                if touches([h.file for h in subtask.operator]):
                    attempt(checkpoint.restore_operator, op.uid, subtask.index)
                backend = backend_for(op, subtask)
                if backend is not None and touches([h.file for h in subtask.keyed]):
                    attempt(checkpoint.restore_keyed, op.uid, backend)
    return errors


def exercise_unchanged(root: Path, hang_seconds: float = HANG_SECONDS,
                       focus: set[str] | None = None,
                       expected: dict[str, str] | None = None) -> list[StatectlError]:
    """:func:`exercise`, checking that no file under ``root`` was changed, added or removed
    (against ``expected`` hashes when given, else against the state before)."""
    before = file_hashes(root) if expected is None else expected
    try:
        return exercise(root, hang_seconds, focus)
    finally:
        assert file_hashes(root) == before, "reading changed the checkpoint's files"


@contextmanager
def case_dir() -> Iterator[Path]:
    """A fresh directory for one hypothesis example, removed afterwards."""
    parent = Path(tempfile.mkdtemp(dir=base_dir()))
    try:
        yield parent / "chk"
    finally:
        shutil.rmtree(parent)


# -- (a) _metadata.json: structural mutations -------------------------------------------------

Path_ = tuple[Any, ...]  # keys and indexes from the document root


def nodes(value: Any, path: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    yield path, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from nodes(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from nodes(item, (*path, i))


def field_of(path: Path_) -> str:
    """What a node is, whatever its place: ``format_version``, ``rows[]``, ``rows[][]``."""
    name = ""
    for step in path:
        name = name + "[]" if isinstance(step, int) else step
    return name


def parent_of(document: Any, path: Path_) -> Any:
    for step in path[:-1]:
        document = document[step]
    return document


SPECIAL_STRINGS = [
    "", ".", "..", "../x", "a/../b", "/etc/passwd", "C:/x", "op-0\\keyed\\0\\0.parquet",
    "op-0//keyed", "./_metadata.json", "_metadata.json", "op-0", "op-0/keyed", "\x00",
    "int8", "int32", "int64", "float32", "float64", "bool", "char", "string", "bytes", "void",
    "any", "list<int64>", "map<string,int64>", "map<list<int64>,int64>", "tuple<int64,int64>",
    "tuple<string,int64>", "list<string>", "list<", "unknown<int64>", "value", "list", "map",
    "reducing", "aggregating", "split", "union", "broadcast", "keyed", "operator",
    "SPLIT_DISTRIBUTE", "UNION", "BROADCAST", "checkpoint", "savepoint", "statectl-checkpoint",
    "sha256:" + "0" * 64, "sha256:" + "G" * 64, "ü" * 3, KEYED_UID, SOURCE_UID, "count", "cfg",
]
SPECIAL_NUMBERS = [0, 1, 2, 3, 4, 5, 127, 128, 32767, 32768, 32769, -1, -2, 2**31 - 1, 2**31,
                   2**63 - 1, 2**63, 2**64, 10**30, -(10**30), 0.0, -0.0, 1.0, 0.5,
                   float("nan"), float("inf"), -float("inf"), 1e308]
JSON_SCALARS = (
    st.none() | st.booleans() | st.sampled_from(SPECIAL_NUMBERS) | st.integers() | st.floats()
    | st.sampled_from(SPECIAL_STRINGS) | st.text(max_size=10)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=6,
)


@st.composite
def mutated_documents(draw: st.DrawFn, original: dict[str, Any]) -> Any:
    """1-3 mutations, each at a field chosen uniformly among the kinds of fields (so that a
    checkpoint id is as likely a target as one of the many row offsets)."""
    document: Any = copy.deepcopy(original)
    for _ in range(draw(st.integers(1, 3))):
        everything = list(nodes(document))
        by_field: dict[str, list[tuple[Path_, Any]]] = {}
        for path, node in everything:
            by_field.setdefault(field_of(path), []).append((path, node))
        field = draw(st.sampled_from(sorted(by_field)))
        path, node = draw(st.sampled_from(by_field[field]))
        action = draw(st.sampled_from(
            ["delete", "replace", "replace", "null", "copy", "sibling", "duplicate", "tweak"]))
        if action == "duplicate" or (action == "delete" and not path):
            lists = [(p, n) for p, n in everything if isinstance(n, list) and n]
            if not lists:
                continue
            path, node = draw(st.sampled_from(lists))
            i = draw(st.integers(0, len(node) - 1))
            if action == "delete":
                del node[i]
            else:
                node.insert(draw(st.integers(0, len(node))), copy.deepcopy(node[i]))
            continue
        if action == "delete":
            del parent_of(document, path)[path[-1]]
            continue
        if action == "null":
            value: Any = None
        elif action == "copy":  # any value from elsewhere: valid, in the wrong place
            value = copy.deepcopy(draw(st.sampled_from(everything))[1])
        elif action == "sibling":  # the same field's value from another place
            value = copy.deepcopy(draw(st.sampled_from(by_field[field]))[1])
        elif action == "tweak" and isinstance(node, int) and not isinstance(node, bool):
            value = draw(st.sampled_from([node + 1, node - 1, -node, node * 2, node + 2**32]))
        else:
            value = draw(JSON_VALUES)
        if not path:
            document = value
        else:
            parent_of(document, path)[path[-1]] = value
    return document


def check_metadata_case(raw: bytes) -> None:
    root, data_hashes = get_workdir()
    (root / METADATA_FILE).write_bytes(raw)
    expected = {**data_hashes, METADATA_FILE: hashlib.sha256(raw).hexdigest()}
    exercise_unchanged(root, expected=expected)


@settings(max_examples=900, deadline=None, suppress_health_check=list(HealthCheck))
@given(document=st.deferred(lambda: mutated_documents(get_sample().document)))
def test_metadata_structure_mutations(document: Any) -> None:
    check_metadata_case(encode(document))


# -- (a) _metadata.json: byte-level mutations -------------------------------------------------


@st.composite
def mutated_bytes(draw: st.DrawFn, original: bytes) -> bytes:
    data = bytearray(original)
    action = draw(st.sampled_from(["truncate", "flip", "overwrite", "insert"]))
    if action == "truncate":
        return bytes(data[:draw(st.integers(0, len(data) - 1))])
    if action == "flip":
        for _ in range(draw(st.integers(1, 8))):
            position = draw(st.integers(0, len(data) - 1))
            data[position] ^= 1 << draw(st.integers(0, 7))
        return bytes(data)
    position = draw(st.integers(0, len(data)))
    chunk = draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\xef\xbb\xbf",
                                  b"\x80\x80", b'"', b"{", b"]", b"NaN", b"-"]) | st.binary(
        min_size=1, max_size=6))
    if action == "overwrite":
        data[position:position + len(chunk)] = chunk
    else:
        data[position:position] = chunk
    return bytes(data)


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(raw=st.deferred(lambda: mutated_bytes(get_sample().metadata)))
def test_metadata_byte_mutations(raw: bytes) -> None:
    check_metadata_case(raw)


@pytest.mark.parametrize("raw", [
    b"", b"\xff\xfe", b"\xef\xbb\xbf{}", b"null", b"[]", b"42", b'"text"', b"{", b"{}",
    b"NaN", b"\x00" * 100,
    b"[" * 10_000 + b"]" * 10_000,
    b'{"a":' * 10_000 + b"1" + b"}" * 10_000,
    b"[" * 200_000,
], ids=lambda raw: repr(raw[:12]) + f"..{len(raw)}")
def test_metadata_that_is_not_a_document(sample: Sample, tmp_path: Path, raw: bytes) -> None:
    materialize(sample, tmp_path / "chk", metadata=raw)
    errors = exercise_unchanged(tmp_path / "chk")
    assert len(errors) == 1 and isinstance(errors[0], CheckpointError)


def test_deeply_nested_value_inside_a_valid_document(sample: Sample, tmp_path: Path) -> None:
    document = copy.deepcopy(sample.document)
    document["operators"][0]["name"] = "@@deep@@"
    raw = encode(document).replace(b'"@@deep@@"', b"[" * 10_000 + b"]" * 10_000)
    materialize(sample, tmp_path / "chk", metadata=raw)
    (error,) = exercise_unchanged(tmp_path / "chk")
    assert isinstance(error, CorruptCheckpointError)


def test_deeply_nested_type_spec(sample: Sample, tmp_path: Path) -> None:
    """A type spec is untrusted text too: deep nesting is refused, not a RecursionError."""
    document = copy.deepcopy(sample.document)
    op = document["operators"][0]
    state = next(s for s in op["states"] if s["name"] == "count")
    state["value_type"] = "list<" * 5_000 + "int64" + ">" * 5_000
    materialize(sample, tmp_path / "chk", metadata=encode(document))
    errors = exercise_unchanged(tmp_path / "chk")
    assert errors and all(isinstance(e, StatectlError) for e in errors)


def test_oversized_metadata_is_refused_before_parsing(sample: Sample, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    materialize(sample, tmp_path / "chk")
    monkeypatch.setattr(statectl_reader, "MAX_METADATA_BYTES", len(sample.metadata))
    assert not exercise_unchanged(tmp_path / "chk")  # at the limit: fine
    monkeypatch.setattr(statectl_reader, "MAX_METADATA_BYTES", len(sample.metadata) - 1)
    parsed: list[Any] = []
    monkeypatch.setattr(json, "loads", lambda *a, **k: parsed.append(a))
    (error,) = exercise_unchanged(tmp_path / "chk")
    assert isinstance(error, CorruptCheckpointError)
    assert str(len(sample.metadata)) in str(error) and not parsed


def test_metadata_that_is_not_a_regular_file_does_not_hang(sample: Sample,
                                                           tmp_path: Path) -> None:
    root = tmp_path / "chk"
    materialize(sample, root)
    (root / METADATA_FILE).unlink()
    os.mkfifo(root / METADATA_FILE)  # opening a FIFO for reading blocks until a writer comes
    (error,) = exercise_unchanged(root, hang_seconds=3)
    assert isinstance(error, CheckpointError)


def _state_named(document: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in document["operators"][0]["states"] if s["name"] == name)


#: (mutation, what the error must say, or None where the checkpoint stays readable)
HAND_EDITS: list[Any] = [
    pytest.param(lambda d: d["operators"][0].update(key_type=None), "",
                 id="keyed op key_type null"),
    pytest.param(lambda d: _state_named(d, "cfg").update(user_key_type=None), "",
                 id="broadcast user_key_type null"),
    pytest.param(lambda d: _state_named(d, "tagged").update(user_key_type=None), "",
                 id="map user_key_type null"),
    pytest.param(lambda d: _state_named(d, "count").update(value_type="any"), "",
                 id="value type any"),
    pytest.param(lambda d: _state_named(d, "count").update(namespace_type="list<"), "",
                 id="malformed namespace type"),
    pytest.param(lambda d: d["operators"][0]["subtasks"][0].update(key_group_range=None), None,
                 id="subtask key_group_range null"),
    pytest.param(lambda d: d["operators"][0]["subtasks"][1]["keyed"][0].update(rows=[]), None,
                 id="keyed handle without rows"),
    pytest.param(lambda d: d["operators"][0]["subtasks"][0]["operator"][0].update(
        element_count=10**30), "beyond", id="huge element count"),
    pytest.param(lambda d: d["operators"][0]["subtasks"][0]["operator"][0].update(
        first_element=10**30), "beyond", id="huge first element"),
    pytest.param(lambda d: d["operators"][0]["subtasks"][0]["keyed"][0]["rows"][0].__setitem__(
        2, 10**30), "contiguous", id="huge row count"),
    pytest.param(lambda d: d["operators"][0].update(max_parallelism=32768), None,
                 id="max parallelism 32768"),
    pytest.param(lambda d: d["operators"][0].update(max_parallelism=32769), "32768",
                 id="max parallelism 32769"),
    pytest.param(lambda d: d["operators"][0]["states"].append(
        dict(d["operators"][0]["states"][0])), "twice", id="state declared twice"),
    pytest.param(lambda d: d["operators"].append(copy.deepcopy(d["operators"][0])), "twice",
                 id="operator twice"),
    pytest.param(lambda d: d["files"].append(dict(d["files"][0])), "twice",
                 id="file listed twice"),
    pytest.param(lambda d: d["files"].pop(0), "not in files", id="file not listed"),
    pytest.param(lambda d: d["files"][0].update(checksum="sha256:" + "0" * 64),
                 "checksum mismatch", id="checksum of another content"),
    pytest.param(lambda d: d["files"][0].update(size=d["files"][0]["size"] + 1), "bytes",
                 id="size off by one"),
]


@pytest.mark.parametrize(("mutate", "says"), HAND_EDITS)
def test_hand_edited_metadata(sample: Sample, tmp_path: Path,
                              mutate: Callable[[dict[str, Any]], Any], says: str | None) -> None:
    document = copy.deepcopy(sample.document)
    mutate(document)
    materialize(sample, tmp_path / "chk", metadata=encode(document))
    errors = exercise_unchanged(tmp_path / "chk")
    if says is None:
        assert not errors, errors
    else:
        assert any(isinstance(e, CheckpointError) and says in str(e) for e in errors), errors


# -- (b) Parquet files ------------------------------------------------------------------------


@st.composite
def damaged_files(draw: st.DrawFn, files: dict[str, bytes]) -> tuple[str, bytes]:
    """A data file truncated, bit-flipped or overwritten; flips half the time in the footer
    (the Thrift metadata: schema, row counts, offsets), where they do the most harm."""
    relative = draw(st.sampled_from(sorted(files)))
    original = files[relative]
    data = bytearray(original)
    action = draw(st.sampled_from(["truncate", "flip", "flip", "overwrite"]))
    if action == "truncate":
        return relative, bytes(data[:draw(st.integers(0, len(data) - 1))])
    footer = int.from_bytes(original[-8:-4], "little")
    low = draw(st.sampled_from([0, max(0, len(data) - 8 - footer)]))
    if action == "flip":
        for _ in range(draw(st.integers(1, 4))):
            position = draw(st.integers(low, len(data) - 1))
            data[position] ^= 1 << draw(st.integers(0, 7))
    else:
        position = draw(st.integers(low, len(data) - 1))
        chunk = bytes(draw(st.lists(st.integers(0, 255), min_size=1, max_size=16)))
        data[position:position + len(chunk)] = chunk
        del data[len(original):]
    if data == original:
        data[-1] ^= 0xFF
    return relative, bytes(data)


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(damage=st.deferred(lambda: damaged_files(get_sample().files)), forged=st.booleans())
def test_damaged_parquet_files(damage: tuple[str, bytes], forged: bool) -> None:
    sample = get_sample()
    relative, damaged = damage
    document = with_files_fixed(sample.document, {relative: damaged}) if forged else (
        sample.document)
    with case_dir() as root:
        materialize(sample, root, metadata=encode(document), replace={relative: damaged})
        errors = exercise_unchanged(root, focus={relative})
        checksum_errors = [e for e in errors if "checksum" in str(e) and relative in str(e)]
        if forged:
            assert not checksum_errors
        else:  # the damage is always detected: by the size or by verify_checksum
            assert checksum_errors or any(relative in str(e) for e in errors)


def test_truncated_and_emptied_files(sample: Sample, tmp_path: Path) -> None:
    for i, relative in enumerate(sorted(sample.files)):
        original = sample.files[relative]
        for cut in (0, 4, len(original) // 2, len(original) - 8, len(original) - 1):
            damaged = original[:cut]
            for forged in (False, True):
                document = with_files_fixed(sample.document, {relative: damaged}) if forged \
                    else sample.document
                root = tmp_path / f"{i}-{cut}-{forged}" / "chk"
                materialize(sample, root, metadata=encode(document),
                            replace={relative: damaged})
                errors = exercise_unchanged(root, focus={relative})
                assert any(isinstance(e, CorruptCheckpointError) and relative in str(e)
                           for e in errors), (relative, cut, forged, errors)


def test_same_size_other_content_fails_the_checksum(sample: Sample, tmp_path: Path) -> None:
    relative = sample.keyed_files()[("count", 0)]
    original = sample.files[relative]
    middle = len(original) // 2
    damaged = original[:middle] + bytes([original[middle] ^ 0x01]) + original[middle + 1:]
    materialize(sample, tmp_path / "chk", replace={relative: damaged})
    checkpoint = open_checkpoint(str(tmp_path / "chk"))
    with pytest.raises(CorruptCheckpointError, match="checksum mismatch") as info:
        checkpoint.verify_checksum(relative)
    assert relative in str(info.value)
    for other in sample.files:
        if other != relative:
            checkpoint.verify_checksum(other)


@pytest.mark.parametrize("forged", [False, True], ids=["stale metadata", "metadata fixed up"])
def test_file_replaced_by_another_states_file(sample: Sample, tmp_path: Path,
                                             forged: bool) -> None:
    keyed, operator = sample.keyed_files(), sample.operator_files()
    swaps = [(keyed[("count", 0)], keyed[("names", 0)]),  # int64 value <- list<string> + ttl
             (keyed[("sum", 1)], keyed[("count", 1)]),  # namespace column missing
             (keyed[("tagged", 0)], keyed[("per-window", 0)]),
             (operator[("cfg", 0)], operator[("offsets", 0)]),  # broadcast <- list
             (operator[("offsets", 1)], keyed[("count", 1)]),
             (keyed[("count", 0)], operator[("watermarks", 0)])]
    for i, (target, source) in enumerate(swaps):
        data = sample.files[source]
        document = with_files_fixed(sample.document, {target: data}) if forged \
            else sample.document
        root = tmp_path / str(i) / "chk"
        materialize(sample, root, metadata=encode(document), replace={target: data})
        errors = exercise_unchanged(root)
        assert any(isinstance(e, CorruptCheckpointError) and target in str(e)
                   for e in errors), (target, errors)
        if forged:
            assert any("differ from the declared" in str(e) for e in errors), errors


def rewrite(data: bytes, change: Callable[[pa.Table], pa.Table]) -> bytes:
    """A Parquet file with the same schema and ``change``d rows."""
    table = pq.read_table(pa.BufferReader(data))
    sink = pa.BufferOutputStream()
    pq.write_table(change(table), sink, row_group_size=2)
    return bytes(sink.getvalue().to_pybytes())


def set_column(name: str, values: Callable[[list[Any]], list[Any]]
               ) -> Callable[[pa.Table], pa.Table]:
    def change(table: pa.Table) -> pa.Table:
        i = table.schema.get_field_index(name)
        column = pa.array(values(table.column(name).to_pylist()), type=table.schema.field(i).type)
        return table.set_column(i, table.schema.field(i), column)
    return change


@pytest.mark.parametrize("change", [
    pytest.param(set_column("key_group", lambda groups: [g + 1 for g in groups]), id="shifted"),
    pytest.param(set_column("key_group", lambda groups: groups[::-1]), id="reversed"),
    pytest.param(set_column("key_group", lambda groups: [groups[0]] * len(groups)), id="one"),
    pytest.param(set_column("key_group", lambda groups: [-5] * len(groups)), id="negative"),
    pytest.param(lambda table: table.slice(1), id="first row dropped"),
    pytest.param(lambda table: table.take([i // 2 for i in range(2 * table.num_rows)]),
                 id="every row twice"),
])
def test_key_group_column_disagrees_with_metadata(sample: Sample, tmp_path: Path,
                                                  change: Callable[[pa.Table], pa.Table]) -> None:
    relative = sample.keyed_files()[("count", 1)]
    data = rewrite(sample.files[relative], change)
    materialize(sample, tmp_path / "chk",
                metadata=encode(with_files_fixed(sample.document, {relative: data})),
                replace={relative: data})
    errors = exercise_unchanged(tmp_path / "chk")
    assert errors and all(isinstance(e, CorruptCheckpointError) and relative in str(e)
                          for e in errors), errors


def test_metadata_rows_disagree_with_key_group_column(sample: Sample, tmp_path: Path) -> None:
    document = copy.deepcopy(sample.document)
    handle = document["operators"][0]["subtasks"][0]["keyed"][0]
    rows = handle["rows"]
    assert len(rows) >= 2
    # same total, same ascending key groups, rows moved from the first group to the second
    rows[0][2], rows[1][1], rows[1][2] = rows[0][2] - 1, rows[1][1] - 1, rows[1][2] + 1
    materialize(sample, tmp_path / "chk", metadata=encode(document))
    errors = exercise_unchanged(tmp_path / "chk")
    assert any(isinstance(e, CorruptCheckpointError) and "key group" in str(e) for e in errors)


def forge_state_file(sample: Sample, tmp_path: Path, state_name: str,
                     table: pa.Table, **declared: Any) -> list[StatectlError]:
    """Replace subtask 0's file of a keyed state by ``table``, declare the state's types as
    ``declared`` and fix up sizes and checksums: a file consistent with hand-edited types."""
    keyed = state_name in {s for s, _ in sample.keyed_files()}
    relative = (sample.keyed_files() if keyed else sample.operator_files())[(state_name, 0)]
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    data = sink.getvalue().to_pybytes()
    document = with_files_fixed(sample.document, {relative: data})
    op = document["operators"][0]
    next(s for s in op["states"] if s["name"] == state_name).update(declared)
    for subtask in op["subtasks"]:
        for handle in subtask["keyed"] + subtask["operator"]:
            if handle["file"] == relative:
                if keyed:
                    handle["rows"] = [[g, i, 1] for i, g in enumerate(
                        table.column("key_group").to_pylist())]
                else:
                    handle["element_count"] = table.num_rows
    materialize(sample, tmp_path / "chk", metadata=encode(document), replace={relative: data})
    return exercise_unchanged(tmp_path / "chk")


def test_invalid_utf8_in_a_string_column(sample: Sample, tmp_path: Path) -> None:
    bad = pa.array([b"ok", b"\xff\xfe"], type=pa.binary()).view(pa.string())
    groups = sorted(g for g in range(MAX_PARALLELISM)
                    if g in compute_key_group_range_for_operator_index(MAX_PARALLELISM, 2, 0))
    table = pa.table({
        "key_group": pa.array(groups[:2], pa.int32()),
        "key": bad,
        "value": pa.array([1, 2], pa.int64()),
    }, schema=pa.schema([pa.field("key_group", pa.int32(), nullable=False),
                         pa.field("key", pa.string(), nullable=False),
                         pa.field("value", pa.int64())]))
    errors = forge_state_file(sample, tmp_path, "count", table)
    assert any(isinstance(e, CorruptCheckpointError) for e in errors), errors


def test_unhashable_declared_key_types(sample: Sample, tmp_path: Path) -> None:
    """Map keys of type list<...> cannot be dict keys in Python: refused, not a TypeError."""
    schema = pa.schema([pa.field("key_group", pa.int32(), nullable=False),
                        pa.field("key", pa.string(), nullable=False),
                        pa.field("value", pa.map_(pa.list_(pa.int64()), pa.list_(pa.binary()))),
                        pa.field("ttl_timestamp", pa.map_(pa.list_(pa.int64()), pa.int64()))])
    table = pa.table({"key_group": [0], "key": ["k"], "value": [[([1, 2], [b"x"])]],
                      "ttl_timestamp": [[([1, 2], 5)]]}, schema=schema)
    errors = forge_state_file(sample, tmp_path, "tagged", table, user_key_type="list<int64>")
    assert any(isinstance(e, CorruptCheckpointError) for e in errors), errors


def test_null_map_value_with_ttl(sample: Sample, tmp_path: Path) -> None:
    schema = pa.schema([pa.field("key_group", pa.int32(), nullable=False),
                        pa.field("key", pa.string(), nullable=False),
                        pa.field("value", pa.map_(pa.int32(), pa.list_(pa.binary()))),
                        pa.field("ttl_timestamp", pa.map_(pa.int32(), pa.int64()))])
    table = pa.table({"key_group": [0], "key": ["k"], "value": [None],
                      "ttl_timestamp": [None]}, schema=schema)
    errors = forge_state_file(sample, tmp_path, "tagged", table)
    assert any(isinstance(e, CorruptCheckpointError) for e in errors), errors


def test_null_broadcast_key(sample: Sample, tmp_path: Path) -> None:
    # the key column is nullable in this file (and holds a null): not the declared schema
    schema = pa.schema([pa.field("key", pa.string()), pa.field("value", pa.string())])
    table = pa.Table.from_arrays([pa.array(["a", None]), pa.array(["x", "y"])], schema=schema)
    errors = forge_state_file(sample, tmp_path, "cfg", table)
    assert errors and all(isinstance(e, CheckpointError) for e in errors), errors


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def test_footer_claims_more_rows_than_the_row_group_holds(sample: Sample,
                                                          tmp_path: Path) -> None:
    """The footer's row count of a row group, edited (Thrift compact: field header 0x16, then
    the zigzag varint): the reader must not trust it over the rows it decodes."""
    relative = sample.keyed_files()[("count", 0)]
    data = sample.files[relative]
    group = pq.ParquetFile(pa.BufferReader(data)).metadata.row_group(0)
    size, rows = _varint(2 * group.total_byte_size), _varint(2 * group.num_rows)
    pattern = b"\x16" + size + b"\x16" + rows
    # row groups of equal size repeat the pattern: edit the footer's first, row group 0's
    footer = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    at = data.index(pattern, footer)
    forged = data[:at] + b"\x16" + size + b"\x16" + _varint(2 * group.num_rows + 2) + data[
        at + len(pattern):]
    assert len(forged) == len(data)
    assert pq.ParquetFile(pa.BufferReader(forged)).metadata.row_group(0).num_rows == (
        group.num_rows + 1)
    materialize(sample, tmp_path / "chk",
                metadata=encode(with_files_fixed(sample.document, {relative: forged})),
                replace={relative: forged})
    errors = exercise_unchanged(tmp_path / "chk", focus={relative})
    assert any(isinstance(e, CorruptCheckpointError) and relative in str(e) for e in errors)


def test_column_name_that_is_not_utf8(sample: Sample, tmp_path: Path) -> None:
    relative = sample.keyed_files()[("count", 0)]
    data = sample.files[relative]
    assert b"key_group" in data
    forged = data.replace(b"key_group", b"\xffey_group")  # Parquet schema and column paths
    materialize(sample, tmp_path / "chk",
                metadata=encode(with_files_fixed(sample.document, {relative: forged})),
                replace={relative: forged})
    errors = exercise_unchanged(tmp_path / "chk", focus={relative})
    assert errors and all(isinstance(e, CorruptCheckpointError) and relative in str(e)
                          for e in errors), errors


# -- (c) paths --------------------------------------------------------------------------------

UNSAFE_PATHS = ["../outside.parquet", "op-0/../../outside.parquet", "op-0/keyed/../../../x",
                "/etc/passwd", "//server/share/x", "op-0\\keyed\\0\\0.parquet",
                "..\\..\\x", "C:/Windows/x", "c:x", "op-0/./keyed", "op-0//keyed", "",
                "op-0/keyed/0/0.parquet\x00.txt", "..", "."]


@pytest.mark.parametrize("bad", UNSAFE_PATHS)
@pytest.mark.parametrize("where", ["files", "keyed handle", "operator handle", "both"])
def test_unsafe_paths_in_metadata(sample: Sample, tmp_path: Path, bad: str, where: str) -> None:
    document = copy.deepcopy(sample.document)
    subtask = document["operators"][0]["subtasks"][0]
    handle = subtask["operator"][0] if where == "operator handle" else subtask["keyed"][0]
    if where in ("files", "both"):
        entry = next(f for f in document["files"] if f["path"] == handle["file"])
        entry["path"] = bad
    if where != "files":
        handle["file"] = bad
    (tmp_path / "outside.parquet").write_bytes(sample.files[handle["file"]]
                                               if where == "files" else b"secret")
    materialize(sample, tmp_path / "chk", metadata=encode(document))
    (error,) = exercise_unchanged(tmp_path / "chk")
    assert isinstance(error, UnsafePathError), error
    assert repr(bad) in str(error) or bad in str(error)


@pytest.mark.parametrize("what", ["file", "directory"])
def test_symlink_out_of_the_checkpoint(sample: Sample, tmp_path: Path, what: str) -> None:
    """A symlink to an identical copy outside: sizes and checksums match, still refused."""
    root = tmp_path / "chk"
    materialize(sample, root)
    relative = sample.keyed_files()[("names", 1)]
    outside = tmp_path / "outside"
    if what == "file":
        outside.mkdir()
        shutil.copyfile(root / relative, outside / "copy.parquet")
        (root / relative).unlink()
        os.symlink(outside / "copy.parquet", root / relative)
        affected = [relative]
    else:
        shutil.copytree(root / "op-0", outside)
        shutil.rmtree(root / "op-0")
        os.symlink(outside, root / "op-0", target_is_directory=True)
        affected = [f for f in sample.files if f.startswith("op-0/")]
    errors = exercise_unchanged(root)
    unsafe = [e for e in errors if isinstance(e, UnsafePathError)]
    assert unsafe and len(unsafe) == len(errors), errors
    checkpoint = open_checkpoint(str(root))
    for path in affected:
        with pytest.raises(UnsafePathError, match="out of the checkpoint"):
            checkpoint.verify_checksum(path)


def test_symlinked_checkpoint_directory_and_inner_links_are_fine(sample: Sample,
                                                                 tmp_path: Path) -> None:
    """Symlinks that stay inside are no escape: a linked root, a link to a sibling file."""
    materialize(sample, tmp_path / "real")
    os.symlink(tmp_path / "real", tmp_path / "link", target_is_directory=True)
    assert not exercise_unchanged(tmp_path / "link")


def test_missing_data_file(sample: Sample, tmp_path: Path) -> None:
    for i, relative in enumerate(sorted(sample.files)):
        root = tmp_path / str(i) / "chk"
        materialize(sample, root, replace={relative: None})
        errors = exercise_unchanged(root)
        assert errors and all(isinstance(e, CorruptCheckpointError) and relative in str(e)
                              for e in errors), errors


def test_data_file_replaced_by_a_directory_or_fifo(sample: Sample, tmp_path: Path) -> None:
    relative = sample.keyed_files()[("count", 0)]
    for kind in ("directory", "fifo"):
        root = tmp_path / kind / "chk"
        materialize(sample, root, replace={relative: None})
        if kind == "directory":
            (root / relative).mkdir()
        else:
            os.mkfifo(root / relative)
        errors = exercise_unchanged(root, hang_seconds=3)
        assert errors and all(isinstance(e, CorruptCheckpointError) and relative in str(e)
                              for e in errors), errors


# -- (d) format marker and version ------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 2, 3, 99, 2**70, -1, "1", "2", None, 1.5, [1]])
def test_unknown_format_version(sample: Sample, tmp_path: Path, version: Any) -> None:
    document = copy.deepcopy(sample.document)
    document["format_version"] = version
    materialize(sample, tmp_path / "chk", metadata=encode(document))
    with time_limit(), pytest.raises(UnsupportedFormatError) as info:
        open_checkpoint(str(tmp_path / "chk"))
    assert repr(version) in str(info.value) and "version" in str(info.value)


@pytest.mark.parametrize("version", [True, 1.0])
def test_version_that_only_equals_one_in_python(sample: Sample, tmp_path: Path,
                                                version: Any) -> None:
    """``true == 1`` and ``1.0 == 1`` in Python, but neither is format version 1."""
    document = copy.deepcopy(sample.document)
    document["format_version"] = version
    materialize(sample, tmp_path / "chk", metadata=encode(document))
    with pytest.raises((UnsupportedFormatError, CorruptCheckpointError)):
        open_checkpoint(str(tmp_path / "chk"))


def test_missing_format_version(sample: Sample, tmp_path: Path) -> None:
    document = copy.deepcopy(sample.document)
    del document["format_version"]
    materialize(sample, tmp_path / "chk", metadata=encode(document))
    with pytest.raises(UnsupportedFormatError, match="version"):
        open_checkpoint(str(tmp_path / "chk"))


@pytest.mark.parametrize("marker", ["flink", "statectl-checkpoint-v2", "", None, 1, ["x"]])
def test_unknown_format_marker(sample: Sample, tmp_path: Path, marker: Any) -> None:
    document = copy.deepcopy(sample.document)
    document["format"] = marker
    materialize(sample, tmp_path / "chk", metadata=encode(document))
    with pytest.raises(UnsupportedFormatError, match="not a statectl checkpoint") as info:
        open_checkpoint(str(tmp_path / "chk"))
    assert repr(marker) in str(info.value)


def test_missing_format_marker(sample: Sample, tmp_path: Path) -> None:
    document = copy.deepcopy(sample.document)
    del document["format"]
    materialize(sample, tmp_path / "chk", metadata=encode(document))
    with pytest.raises(UnsupportedFormatError, match="not a statectl checkpoint"):
        open_checkpoint(str(tmp_path / "chk"))


# -- (f) not a checkpoint ---------------------------------------------------------------------


def test_directory_without_metadata_is_not_a_checkpoint(sample: Sample, tmp_path: Path) -> None:
    root = tmp_path / "chk"
    materialize(sample, root)
    (root / METADATA_FILE).unlink()
    before = file_hashes(root)
    with pytest.raises(CheckpointError, match="not a checkpoint") as info:
        open_checkpoint(str(root))
    assert METADATA_FILE in str(info.value)
    assert file_hashes(root) == before


def test_in_progress_write_is_not_a_checkpoint(sample: Sample, tmp_path: Path) -> None:
    """What a writer killed before the rename leaves: a staging directory, a temp metadata."""
    staging = tmp_path / "chk-42.inprogress-0123456789ab"
    materialize(sample, staging)
    (staging / METADATA_FILE).rename(staging / f"{METADATA_FILE}.tmp")
    for location in (staging, tmp_path / "chk-42"):
        with pytest.raises(CheckpointError, match="not a checkpoint"):
            open_checkpoint(str(location))


@pytest.mark.parametrize("what", ["empty directory", "metadata is a directory", "a file",
                                  "missing"])
def test_other_non_checkpoints(sample: Sample, tmp_path: Path, what: str) -> None:
    root = tmp_path / "chk"
    if what == "empty directory":
        root.mkdir()
    elif what == "metadata is a directory":
        (root / METADATA_FILE).mkdir(parents=True)
    elif what == "a file":
        root.write_bytes(sample.metadata)
    with pytest.raises(CheckpointError, match="not a checkpoint"):
        open_checkpoint(str(root))
