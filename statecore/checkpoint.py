"""The in-memory metadata model of a checkpoint, shared by statectl's format and the Flink reader.

checkpoint -> operators -> subtasks -> keyed handles (a file and, per key group, the rows that
hold it: Flink's ``KeyGroupRangeOffsets``, in rows) and operator handles (a file, a state, an
element range and the redistribution mode). statectl keeps element *ranges* where Flink keeps
per-element byte offsets (reference §7), a deliberate difference: a rescale then references
slices of old files instead of listing every element.

This module only models and validates: :func:`metadata_from_json` turns a parsed
``_metadata.json`` document into the model, checking every field (a checkpoint is untrusted
input), and :func:`metadata_to_json` does the reverse. File IO lives in ``formats``.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar

from statecore.errors import (
    CorruptCheckpointError,
    StatectlError,
    UnsafePathError,
    UnsupportedFormatError,
)
from statecore.hashing import operator_id_of_uid
from statecore.key_groups import KeyGroupRange
from statecore.operator_backend import OperatorStateMode, OperatorStateSnapshot
from statecore.serializers import parse_type

if TYPE_CHECKING:  # the snapshots a writer is handed: reading loads no backend (issue 45)
    from statecore.keyed_backend import KeyedStateSnapshot

__all__ = [
    "FORMAT_MARKER",
    "FORMAT_VERSION",
    "TTL_UNKNOWN",
    "CheckpointKind",
    "CheckpointMetadata",
    "FileInfo",
    "KeyGroupRows",
    "KeyedStateHandle",
    "OperatorIdentity",
    "OperatorMetadata",
    "OperatorSnapshot",
    "OperatorStateHandle",
    "StateMetadata",
    "SubtaskMetadata",
    "SubtaskSnapshot",
    "check_relative_path",
    "file_extents",
    "metadata_from_json",
    "metadata_to_json",
    "operator_state_segments",
    "share_of_file",
    "subtask_from_json",
    "subtask_to_json",
]

#: The ``format`` field of every statectl ``_metadata.json``.
FORMAT_MARKER = "statectl-checkpoint"
#: The major version this code writes and reads; readers refuse any other.
FORMAT_VERSION = 1

T = TypeVar("T")


class CheckpointKind(Enum):
    """A checkpoint (taken and retained automatically) or a savepoint (taken and kept by hand)."""

    CHECKPOINT = "checkpoint"
    SAVEPOINT = "savepoint"


@dataclass(frozen=True, slots=True)
class FileInfo:
    """A data file of the checkpoint: relative path, size in bytes, ``sha256:<hex>``."""

    path: str
    size: int
    checksum: str


@dataclass(frozen=True, slots=True)
class KeyGroupRows:
    """Where one key group's rows are in a keyed file (``first_row``, ``row_count``)."""

    key_group: int
    first_row: int
    row_count: int


@dataclass(frozen=True, slots=True)
class KeyedStateHandle:
    """One state's rows for a range of key groups, in one file, grouped by key group."""

    state: str
    file: str
    key_group_range: KeyGroupRange
    rows: tuple[KeyGroupRows, ...]


@dataclass(frozen=True, slots=True)
class OperatorStateHandle:
    """Elements ``[first_element, first_element + element_count)`` of one operator state file."""

    state: str
    mode: OperatorStateMode
    file: str
    first_element: int
    element_count: int


#: :attr:`StateMetadata.ttl` of a state whose values carry TTL timestamps while the TTL itself
#: is unknown: a Flink snapshot stores each value's last access, its ``StateTtlConfig`` is in
#: the job's code. Such a state has the ``ttl_timestamp`` column; its expiry cannot be computed.
#: Never stored in a statectl checkpoint (whose TTLs are positive).
TTL_UNKNOWN = -1


@dataclass(frozen=True, slots=True)
class StateMetadata:
    """A registered state: its kind and declared types (type specs), and its TTL in ms.

    ``ttl`` is ``None`` without TTL, :data:`TTL_UNKNOWN` for TTL values of an unknown TTL.
    """

    name: str
    scope: str  # "keyed" | "operator"
    kind: str  # value | list | map | reducing | aggregating | split | union | broadcast
    value_type: str
    user_key_type: str | None = None
    namespace_type: str = "void"
    ttl: int | None = None


@dataclass(frozen=True, slots=True)
class SubtaskMetadata:
    """One subtask: its key-group range (``None`` without keyed state) and its handles."""

    index: int
    key_group_range: KeyGroupRange | None
    keyed: tuple[KeyedStateHandle, ...]
    operator: tuple[OperatorStateHandle, ...]


@dataclass(frozen=True, slots=True)
class OperatorIdentity:
    """How every JSON document names an operator (docs/json.md, "Operator identity").

    ``id`` is Flink's OperatorID as 32 lowercase hex digits: as stored in a Flink snapshot, and
    for a statectl checkpoint the one Flink derives from the uid
    (:func:`statecore.hashing.operator_id_of_uid`), so a bootstrapped job's operator matches.
    ``uid`` and ``name`` are as stored, ``None`` when absent -- never one put for another.
    """

    id: str
    uid: str | None
    name: str | None
    #: where the uid came from: ``"snapshot"`` (stored in it), ``"uid"`` / ``"uid-hash"`` (given
    #: by the user for a snapshot that stores none: ``--uid``, ``--uid-hash``); ``None``: no uid
    uid_from: str | None = "snapshot"

    def to_json(self) -> dict[str, str | None]:
        """``{"id", "uid", "name", "uid_from"}``."""
        return {"id": self.id, "uid": self.uid, "name": self.name, "uid_from": self.uid_from}

    @property
    def label(self) -> str:
        """For people: the uid, else the name with the id, else the id."""
        if self.uid is not None:
            return self.uid
        return f"{self.name} ({self.id})" if self.name else self.id


@dataclass(frozen=True, slots=True)
class OperatorMetadata:
    """One operator: uid, name, parallelism, key type, declared states and subtasks.

    ``uid`` identifies the operator within the model (unique in a checkpoint): the uid the job
    set, or Flink's OperatorID where it set none. :attr:`identity` is what output shows.
    """

    uid: str
    name: str
    parallelism: int
    max_parallelism: int
    key_type: str | None
    states: tuple[StateMetadata, ...]
    subtasks: tuple[SubtaskMetadata, ...]
    #: Flink's OperatorID (32 hex digits) for an operator of a Flink snapshot; ``None`` in ours
    operator_id: str | None = None
    #: whether ``uid`` is a uid the job set (a Flink operator without one is named by its id)
    has_uid: bool = True
    #: where ``uid`` came from when ``has_uid`` (:attr:`OperatorIdentity.uid_from`)
    uid_from: str = "snapshot"
    #: the node of the SQL job's plan it comes from and the tables it feeds (``--plan``)
    plan: str | None = None

    @property
    def identity(self) -> OperatorIdentity:
        """Its OperatorID (stored, or derived from the uid), and uid and name as stored."""
        return OperatorIdentity(self.operator_id or operator_id_of_uid(self.uid),
                                self.uid if self.has_uid else None, self.name or None,
                                self.uid_from if self.has_uid else None)


@dataclass(frozen=True, slots=True)
class CheckpointMetadata:
    """Everything ``_metadata.json`` says: id, kind, creation time, operators, files."""

    checkpoint_id: int
    kind: CheckpointKind
    created_ms: int
    operators: tuple[OperatorMetadata, ...]
    files: tuple[FileInfo, ...]
    format_version: int = FORMAT_VERSION


@dataclass(frozen=True)
class SubtaskSnapshot:
    """What one subtask contributes to a checkpoint: the synchronous halves of its backends."""

    index: int
    keyed: KeyedStateSnapshot | None = None
    operator: OperatorStateSnapshot | None = None


@dataclass(frozen=True)
class OperatorSnapshot:
    """One operator to write: identity, parallelism and its subtasks' snapshots."""

    uid: str
    name: str
    parallelism: int
    max_parallelism: int
    subtasks: Sequence[SubtaskSnapshot] = field(default_factory=tuple)


_KEYED_KINDS = frozenset({"value", "list", "map", "reducing", "aggregating"})
_OPERATOR_KINDS = frozenset({"split", "union", "broadcast"})
_MODE_OF_KIND = {"split": OperatorStateMode.SPLIT_DISTRIBUTE, "union": OperatorStateMode.UNION,
                 "broadcast": OperatorStateMode.BROADCAST}


def check_relative_path(path: str) -> str:
    """A path inside the checkpoint directory: relative, ``/``-separated, no ``..``.

    Symlinks are checked where the files are opened (``formats``); this is the lexical check.
    """
    if not isinstance(path, str) or not path:
        raise UnsafePathError(f"path {path!r} is not a non-empty string")
    if "\\" in path or "\x00" in path or path.startswith("/") or posixpath.isabs(path) or (
            len(path) > 1 and path[1] == ":"):
        raise UnsafePathError(f"path {path!r} must be relative to the checkpoint directory")
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise UnsafePathError(f"path {path!r} must not contain '..', '.' or empty segments")
    return path


# -- JSON -> model (validating) ---------------------------------------------------------------


class _Reader:
    """Typed access to one JSON object, naming the place of every problem."""

    def __init__(self, value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise CorruptCheckpointError(f"{where}: expected an object, got {_kind(value)}")
        self.value: Mapping[str, Any] = value
        self.where = where

    def get(self, name: str, kind: type[T], optional: bool = False) -> T:
        if name not in self.value:
            if optional:
                return None  # type: ignore[return-value]
            raise CorruptCheckpointError(f"{self.where}: missing field {name!r}")
        value = self.value[name]
        if value is None and optional:
            return None  # type: ignore[return-value]
        if kind is int and (not isinstance(value, int) or isinstance(value, bool)):
            raise CorruptCheckpointError(f"{self.where}.{name}: expected an integer, "
                                         f"got {_kind(value)}")
        if not isinstance(value, kind):
            raise CorruptCheckpointError(f"{self.where}.{name}: expected {kind.__name__}, "
                                         f"got {_kind(value)}")
        return value

    def natural(self, name: str, optional: bool = False) -> int:
        value = self.get(name, int, optional)
        if value is not None and value < 0:
            raise CorruptCheckpointError(f"{self.where}.{name}: must be >= 0, got {value}")
        return value

    def items(self, name: str, parse: Callable[[Any, str], T]) -> tuple[T, ...]:
        values = self.get(name, list)
        return tuple(parse(v, f"{self.where}.{name}[{i}]") for i, v in enumerate(values))


def file_extents(metadata: CheckpointMetadata) -> dict[str, int]:
    """Rows (or elements) of each data file that some handle references.

    Handles may share a file (a rescaled checkpoint references parts of old files), so a
    handle's bytes are its file's bytes apportioned by rows: :func:`share_of_file`.
    """
    extent: dict[str, int] = {}
    for op in metadata.operators:
        for st in op.subtasks:
            for h in st.keyed:
                if h.rows:
                    end = h.rows[-1].first_row + h.rows[-1].row_count
                    extent[h.file] = max(extent.get(h.file, 0), end)
            for o in st.operator:
                extent[o.file] = max(extent.get(o.file, 0), o.first_element + o.element_count)
    return extent


def operator_state_segments(op: OperatorMetadata, state: str, *, distinct: bool
                            ) -> list[tuple[int, OperatorStateHandle]]:
    """``(subtask index, handle)`` of an operator state, in subtask order.

    With ``distinct``, a handle naming the same file and element range as an earlier one is
    left out: after a rescale several subtasks reference one union range, which is restored
    once, and copies of broadcast state are usually wanted once.
    """
    seen: set[tuple[str, int, int]] = set()
    out = []
    for st in sorted(op.subtasks, key=lambda s: s.index):
        for handle in st.operator:
            if handle.state != state:
                continue
            segment = (handle.file, handle.first_element, handle.element_count)
            if distinct and segment in seen:
                continue
            seen.add(segment)
            out.append((st.index, handle))
    return out


def share_of_file(size: int, part: int, whole: int) -> int:
    """The bytes of ``part`` rows of a file of ``size`` bytes holding ``whole`` rows."""
    return 0 if whole == 0 else size * part // whole


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _range(value: Any, where: str) -> KeyGroupRange:
    if (not isinstance(value, list) or len(value) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
            or not 0 <= value[0] <= value[1]):
        raise CorruptCheckpointError(f"{where}: expected [first, last] key groups, got {value!r}")
    return KeyGroupRange(value[0], value[1])


def _keyed_handle(value: Any, where: str) -> KeyedStateHandle:
    r = _Reader(value, where)
    kg_range = _range(r.get("key_groups", list), f"{where}.key_groups")
    rows: list[KeyGroupRows] = []
    next_row = 0
    for i, item in enumerate(r.get("rows", list)):
        if (not isinstance(item, list) or len(item) != 3 or not all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in item)):
            raise CorruptCheckpointError(
                f"{where}.rows[{i}]: expected [key_group, first_row, row_count], got {item!r}")
        key_group, first_row, count = item
        if key_group not in kg_range:
            raise CorruptCheckpointError(
                f"{where}.rows[{i}]: key group {key_group} outside {list(value['key_groups'])}")
        if (rows and first_row != next_row) or (rows and key_group <= rows[-1].key_group):
            raise CorruptCheckpointError(
                f"{where}.rows[{i}]: rows must be contiguous and in ascending key group order")
        next_row = first_row + count
        rows.append(KeyGroupRows(key_group, first_row, count))
    return KeyedStateHandle(r.get("state", str), check_relative_path(r.get("file", str)),
                            kg_range, tuple(rows))


def _operator_handle(value: Any, where: str) -> OperatorStateHandle:
    r = _Reader(value, where)
    mode_name = r.get("mode", str)
    try:
        mode = OperatorStateMode[mode_name]
    except KeyError:
        raise CorruptCheckpointError(f"{where}.mode: unknown mode {mode_name!r}") from None
    return OperatorStateHandle(r.get("state", str), mode,
                               check_relative_path(r.get("file", str)),
                               r.natural("first_element"), r.natural("element_count"))


def _state(value: Any, where: str) -> StateMetadata:
    r = _Reader(value, where)
    scope, kind = r.get("scope", str), r.get("kind", str)
    if (scope, kind in _KEYED_KINDS, kind in _OPERATOR_KINDS) not in (
            ("keyed", True, False), ("operator", False, True)):
        raise CorruptCheckpointError(f"{where}: unknown {scope} state kind {kind!r}")
    ttl = r.natural("ttl", optional=True)
    if ttl == 0:
        raise CorruptCheckpointError(f"{where}.ttl: TTL is expected to be positive")
    user_key_type = r.get("user_key_type", str, optional=True)
    if (kind in ("map", "broadcast")) != (user_key_type is not None):
        raise CorruptCheckpointError(
            f"{where}.user_key_type: {'required' if user_key_type is None else 'not allowed'} "
            f"for {kind} state")
    namespace_type = r.get("namespace_type", str, optional=True) or "void"
    value_type = _type_spec(r.get("value_type", str), f"{where}.value_type", hashable=False)
    if user_key_type is not None:
        user_key_type = _type_spec(user_key_type, f"{where}.user_key_type", hashable=True)
    namespace_type = _type_spec(namespace_type, f"{where}.namespace_type", hashable=True)
    return StateMetadata(r.get("name", str), scope, kind, value_type, user_key_type,
                         namespace_type, ttl)


def _type_spec(spec: str, where: str, hashable: bool) -> str:
    """A valid type spec (normalised); keys, namespaces and map keys must be hashable."""
    try:
        normalised = parse_type(spec).spec
    except StatectlError as exc:
        raise CorruptCheckpointError(f"{where}: {exc}") from None
    if hashable and ("list<" in normalised or "map<" in normalised):
        raise CorruptCheckpointError(f"{where}: {normalised} cannot be a key type")
    return normalised


def _subtask(value: Any, where: str) -> SubtaskMetadata:
    r = _Reader(value, where)
    kg = r.get("key_group_range", list, optional=True)
    return SubtaskMetadata(r.natural("index"),
                           None if kg is None else _range(kg, f"{where}.key_group_range"),
                           r.items("keyed", _keyed_handle), r.items("operator", _operator_handle))


def _operator(value: Any, where: str) -> OperatorMetadata:
    r = _Reader(value, where)
    key_type = r.get("key_type", str, optional=True)
    operator = OperatorMetadata(
        uid=r.get("uid", str), name=r.get("name", str), parallelism=r.natural("parallelism"),
        max_parallelism=r.natural("max_parallelism"),
        key_type=None if key_type is None else _type_spec(key_type, f"{where}.key_type",
                                                          hashable=True),
        states=r.items("states", _state), subtasks=r.items("subtasks", _subtask))
    _check_operator(operator, where)
    return operator


def _check_operator(op: OperatorMetadata, where: str) -> None:
    if not 0 < op.parallelism <= op.max_parallelism <= 32768:
        raise CorruptCheckpointError(
            f"{where}: needs 0 < parallelism ({op.parallelism}) <= max parallelism "
            f"({op.max_parallelism}) <= 32768")
    if sorted(s.index for s in op.subtasks) != list(range(op.parallelism)):
        raise CorruptCheckpointError(f"{where}: subtasks must be numbered 0..{op.parallelism - 1}")
    states = {s.name: s for s in op.states}
    if len(states) != len(op.states):
        raise CorruptCheckpointError(f"{where}: a state name appears twice")
    if op.key_type is None and any(s.scope == "keyed" for s in op.states):
        raise CorruptCheckpointError(f"{where}: keyed states need a key_type")
    for subtask in op.subtasks:
        kg = subtask.key_group_range
        if kg is not None and kg.end >= op.max_parallelism:
            raise CorruptCheckpointError(
                f"{where}: subtask {subtask.index}'s key groups {kg.start}-{kg.end} exceed "
                f"max parallelism {op.max_parallelism}")
    for subtask in op.subtasks:
        for handle in subtask.keyed:
            state = states.get(handle.state)
            if state is None or state.scope != "keyed":
                raise CorruptCheckpointError(
                    f"{where}: subtask {subtask.index} references unknown keyed state "
                    f"{handle.state!r}")
            if handle.key_group_range.end >= op.max_parallelism:
                raise CorruptCheckpointError(
                    f"{where}: subtask {subtask.index}: key groups beyond max parallelism")
        for op_handle in subtask.operator:
            state = states.get(op_handle.state)
            if state is None or state.scope != "operator" or (
                    _MODE_OF_KIND[state.kind] is not op_handle.mode):
                raise CorruptCheckpointError(
                    f"{where}: subtask {subtask.index} references operator state "
                    f"{op_handle.state!r} that is not declared with mode {op_handle.mode.name}")


def metadata_from_json(document: Any) -> CheckpointMetadata:
    """Validate a parsed ``_metadata.json`` document and build the model.

    Refuses another format marker or major version (:class:`UnsupportedFormatError`) and every
    malformed or inconsistent field (:class:`CorruptCheckpointError`, naming the field).
    """
    r = _Reader(document, "_metadata.json")
    if document.get("format") != FORMAT_MARKER:
        raise UnsupportedFormatError(
            f"not a statectl checkpoint (format marker {document.get('format')!r})")
    version = document.get("format_version")
    if type(version) is not int or version != FORMAT_VERSION:
        raise UnsupportedFormatError(
            f"statectl checkpoint format version {version!r} is not supported "
            f"(this statectl reads version {FORMAT_VERSION})")
    kind_name = r.get("kind", str)
    try:
        kind = CheckpointKind(kind_name)
    except ValueError:
        raise CorruptCheckpointError(f"_metadata.json.kind: unknown kind {kind_name!r}") from None
    files = r.items("files", _file_info)
    metadata = CheckpointMetadata(
        checkpoint_id=r.natural("checkpoint_id"), kind=kind, created_ms=r.natural("created_ms"),
        operators=r.items("operators", _operator), files=files)
    known = {f.path for f in files}
    if len(known) != len(files):
        raise CorruptCheckpointError("_metadata.json.files: a path appears twice")
    for op in metadata.operators:
        for subtask in op.subtasks:
            for path in [h.file for h in subtask.keyed] + [h.file for h in subtask.operator]:
                if path not in known:
                    raise CorruptCheckpointError(
                        f"operator {op.uid!r} references {path!r}, which is not in files")
    if len({op.uid for op in metadata.operators}) != len(metadata.operators):
        raise CorruptCheckpointError("_metadata.json.operators: an operator uid appears twice")
    return metadata


def _file_info(value: Any, where: str) -> FileInfo:
    r = _Reader(value, where)
    checksum = r.get("checksum", str)
    digest = checksum.removeprefix("sha256:")
    if not checksum.startswith("sha256:") or len(digest) != 64 or any(
            c not in "0123456789abcdef" for c in digest):
        raise CorruptCheckpointError(f"{where}.checksum: expected sha256:<64 hex digits>")
    return FileInfo(check_relative_path(r.get("path", str)), r.natural("size"), checksum)


# -- model -> JSON ------------------------------------------------------------------------------


def metadata_to_json(metadata: CheckpointMetadata) -> dict[str, Any]:
    """The ``_metadata.json`` document for ``metadata`` (fields sorted: byte-stable output)."""
    return {
        "format": FORMAT_MARKER,
        "format_version": metadata.format_version,
        "checkpoint_id": metadata.checkpoint_id,
        "kind": metadata.kind.value,
        "created_ms": metadata.created_ms,
        "operators": [_operator_json(op) for op in metadata.operators],
        "files": [{"path": f.path, "size": f.size, "checksum": f.checksum}
                  for f in metadata.files],
    }


def _operator_json(op: OperatorMetadata) -> dict[str, Any]:
    return {
        "uid": op.uid, "name": op.name, "parallelism": op.parallelism,
        "max_parallelism": op.max_parallelism, "key_type": op.key_type,
        "states": [{"name": s.name, "scope": s.scope, "kind": s.kind, "value_type": s.value_type,
                    "user_key_type": s.user_key_type, "namespace_type": s.namespace_type,
                    "ttl": s.ttl} for s in op.states],
        "subtasks": [subtask_to_json(st) for st in op.subtasks],
    }


def subtask_to_json(st: SubtaskMetadata) -> dict[str, Any]:
    """One subtask of ``_metadata.json`` (its key-group range and handles)."""
    return {
        "index": st.index,
        "key_group_range": (None if st.key_group_range is None
                            else [st.key_group_range.start, st.key_group_range.end]),
        "keyed": [{"state": h.state, "file": h.file,
                   "key_groups": [h.key_group_range.start, h.key_group_range.end],
                   "rows": [[r.key_group, r.first_row, r.row_count] for r in h.rows]}
                  for h in st.keyed],
        "operator": [{"state": h.state, "mode": h.mode.name, "file": h.file,
                      "first_element": h.first_element, "element_count": h.element_count}
                     for h in st.operator],
    }


def subtask_from_json(value: Any, where: str = "subtask") -> SubtaskMetadata:
    """The inverse of :func:`subtask_to_json`, validated like any metadata."""
    return _subtask(value, where)
