#!/usr/bin/env python3
"""Deterministic generator of statectl's sample checkpoints (``sample_checkpoints/v1``).

Every sample is built from fixed seeds, a :class:`~statecore.ttl.ManualClock`, a fixed
``created_ms`` and Flink's hash mode for the in-memory maps (so the order of rows inside a key
group does not depend on ``PYTHONHASHSEED``), then written with format v1's
``write_checkpoint`` into ``v1/<name>/``, next to its golden ``v1/<name>.inspect.json``: the
``statectl --output json inspect`` document with ``location`` set to the sample's relative path.

Usage (from anywhere)::

    python sample_checkpoints/generate.py           # check: regenerate into a temporary
                                                    # directory and compare; exit 1 on drift
    python sample_checkpoints/generate.py --write   # regenerate and replace the samples

The check compares *logical* contents: the metadata without file sizes and checksums, the
Arrow schema of every file and every decoded entry and element. Bytes are not compared: a
Parquet footer records the pyarrow version that wrote it, so sizes and checksums change with
pyarrow while the contents do not. The goldens are compared without their ``bytes`` fields,
which must instead equal what the committed checkpoint's metadata says (sums of file sizes).

The samples are format version 1 and stay frozen: when the format version changes, this
script refuses to run, and new samples go to a new ``v<N>`` directory.
"""

from __future__ import annotations

import argparse
import difflib
import json
import random
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from click.testing import CliRunner

from cli.main import statectl
from formats.open import open_checkpoint
from formats.statectl.writer import write_checkpoint
from statecore.checkpoint import (
    FORMAT_VERSION,
    CheckpointKind,
    CheckpointMetadata,
    OperatorSnapshot,
    SubtaskSnapshot,
    metadata_to_json,
)
from statecore.copy_on_write_state_map import HashMode
from statecore.errors import StatectlError
from statecore.key_groups import (
    assign_key_to_parallel_operator,
    compute_key_group_range_for_operator_index,
)
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
    OperatorStateSnapshotEntry,
)
from statecore.serializers import VOID_NAMESPACE
from statecore.ttl import ManualClock, TtlConfig, TtlValue

__all__ = [
    "CREATED_MS",
    "GOLDEN_SUFFIX",
    "SAMPLES",
    "SAMPLES_DIR",
    "Average",
    "BuiltOperator",
    "Sample",
    "bytes_problems",
    "check",
    "golden_path",
    "inspect_document",
    "logical_contents",
    "main",
    "relative_location",
    "stored_contents",
    "without_bytes",
    "write",
    "write_sample",
]

#: The format version of the samples in ``SAMPLES_DIR``; frozen once written.
SAMPLE_FORMAT_VERSION = 1
HERE = Path(__file__).resolve().parent
SAMPLES_DIR = HERE / f"v{SAMPLE_FORMAT_VERSION}"
GOLDEN_SUFFIX = ".inspect.json"
#: ``created_ms`` of every sample (2023-11-14T22:13:20Z).
CREATED_MS = 1_700_000_000_000
MAX_PARALLELISM = 128
#: Flink's hash mode: bucket order, hence row order inside a key group, is reproducible.
HASH_MODE: HashMode = "flink"


# -- what the samples hold ---------------------------------------------------------------------


class Average:
    """An ``AggregateFunction``: the mean of int64 amounts, accumulated as ``(sum, count)``."""

    def create_accumulator(self) -> tuple[int, int]:
        return (0, 0)

    def add(self, value: int, accumulator: tuple[int, int]) -> tuple[int, int]:
        return (accumulator[0] + value, accumulator[1] + 1)

    def get_result(self, accumulator: tuple[int, int]) -> float:
        return accumulator[0] / accumulator[1]

    def merge(self, a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
        return (a[0] + b[0], a[1] + b[1])


def _add(a: int, b: int) -> int:
    return a + b


@dataclass
class BuiltOperator:
    """One operator of a sample, built in memory: its backends per subtask (or ``None``)."""

    uid: str
    name: str
    parallelism: int
    max_parallelism: int
    key_type: str | None
    descriptors: tuple[StateDescriptor, ...]
    clock: ManualClock
    keyed: list[HeapKeyedStateBackend[Any] | None] = field(default_factory=list)
    operator: list[OperatorStateBackend | None] = field(default_factory=list)

    def new_keyed_backend(self, index: int) -> HeapKeyedStateBackend[Any]:
        """An empty backend of subtask ``index`` with every state registered (for restore)."""
        assert self.key_type is not None
        backend: HeapKeyedStateBackend[Any] = HeapKeyedStateBackend(
            self.key_type, self.max_parallelism,
            compute_key_group_range_for_operator_index(self.max_parallelism, self.parallelism,
                                                       index),
            hash_mode=HASH_MODE, clock=self.clock)
        for descriptor in self.descriptors:
            backend.get_state(descriptor)
        return backend

    def snapshot(self) -> OperatorSnapshot:
        """The synchronous halves of every subtask's backends, ready for ``write_checkpoint``."""
        subtasks = []
        for index in range(self.parallelism):
            keyed = self.keyed[index] if self.keyed else None
            operator = self.operator[index] if self.operator else None
            subtasks.append(SubtaskSnapshot(
                index, None if keyed is None else keyed.snapshot(),
                None if operator is None else operator.snapshot()))
        return OperatorSnapshot(self.uid, self.name, self.parallelism, self.max_parallelism,
                                tuple(subtasks))


@dataclass(frozen=True)
class Sample:
    """A sample checkpoint: its directory name, what it shows, and how to build it."""

    name: str
    description: str
    checkpoint_id: int
    build: Callable[[], list[BuiltOperator]]
    kind: CheckpointKind = CheckpointKind.CHECKPOINT


KEYED_DESCRIPTORS: tuple[StateDescriptor, ...] = (
    value_state("last_amount", "float64"),
    list_state("recent_events", "string", ttl=TtlConfig(3_600_000)),
    map_state("count_per_channel", "string", "int32"),
    reducing_state("total_cents", _add, "int64"),
    aggregating_state("average_cents", Average(), "tuple<int64,int64>"),
    value_state("clicks_per_minute", "int64", namespace_type="int64"),
)
KEYS = tuple(f"user-{i:02d}" for i in range(36))
CHANNELS = ("web", "app", "api")


def build_keyed_all_kinds() -> list[BuiltOperator]:
    """Keyed state of every kind, parallelism 2, max parallelism 128, 36 string keys."""
    clock = ManualClock(CREATED_MS - 600_000)
    op = BuiltOperator("purchases", "Purchases per user", 2, MAX_PARALLELISM, "string",
                       KEYED_DESCRIPTORS, clock)
    op.keyed = [op.new_keyed_backend(i) for i in range(op.parallelism)]
    rng = random.Random(20240501)
    for i in range(120):
        key = KEYS[i] if i < len(KEYS) else rng.choice(KEYS)
        cents = rng.randint(1, 99_999)
        channel = rng.choice(CHANNELS)
        clock.advance(rng.randint(200, 3_000))
        backend = op.keyed[assign_key_to_parallel_operator(key, op.max_parallelism,
                                                           op.parallelism, "string")]
        assert backend is not None
        backend.set_current_key(key)
        last, events, per_channel, total, average, clicks = (
            backend.get_state(d) for d in KEYED_DESCRIPTORS)
        last.update(cents / 100)  # type: ignore[attr-defined]
        events.add(f"{channel}:{cents}")  # type: ignore[attr-defined]
        per_channel.put(channel, (per_channel.get(channel) or 0) + 1)  # type: ignore[attr-defined]
        total.add(cents)  # type: ignore[attr-defined]
        average.add(cents)  # type: ignore[attr-defined]
        now = clock()
        clicks.set_current_namespace(now - now % 60_000)
        clicks.update((clicks.value() or 0) + 1)  # type: ignore[attr-defined]
    return [op]


OFFSETS = OperatorListStateDescriptor("partition_offsets", "tuple<string,int64>")
WATERMARKS = OperatorListStateDescriptor("watermarks", "int64")
RULES = BroadcastStateDescriptor("rules", "string", "string")


def build_operator_states() -> list[BuiltOperator]:
    """Split list, union list and broadcast state at parallelism 3 (no keyed state)."""
    op = BuiltOperator("events-source", "Source: events", 3, MAX_PARALLELISM, None, (),
                       ManualClock(CREATED_MS))
    rng = random.Random(3)
    partitions = [f"events-{p}" for p in range(5)]
    rules = [("currency", "EUR"), ("max_amount", "99999"), ("mode", "strict")]
    for index in range(op.parallelism):
        backend = OperatorStateBackend()
        backend.get_list_state(OFFSETS).add_all(
            (p, rng.randint(0, 1_000_000)) for i, p in enumerate(partitions)
            if i % op.parallelism == index)
        backend.get_union_list_state(WATERMARKS).add(CREATED_MS - rng.randint(0, 60_000))
        backend.get_broadcast_state(RULES).put_all(rules)
        op.operator.append(backend)
    return [op]


def build_empty() -> list[BuiltOperator]:
    """One operator, parallelism 1, whose keyed and operator backends register nothing."""
    op = BuiltOperator("nothing", "No state yet", 1, MAX_PARALLELISM, "string", (),
                       ManualClock(CREATED_MS))
    op.keyed = [op.new_keyed_backend(0)]
    op.operator = [OperatorStateBackend()]
    return [op]


SAMPLES: dict[str, Sample] = {s.name: s for s in (
    Sample("keyed-all-kinds-p2",
           "keyed state of every kind: value (float64), list (string, TTL 1 h), map "
           "(string -> int32), reducing (int64 sum), aggregating (Average, accumulator "
           "tuple<int64,int64>), value with an int64 namespace (per-minute window); 36 string "
           "keys, parallelism 2, max parallelism 128", 1, build_keyed_all_kinds),
    Sample("operator-split-union-broadcast-p3",
           "operator state only, parallelism 3: split list (tuple<string,int64> partition "
           "offsets), union list (int64 watermarks), broadcast (string -> string rules)", 2,
           build_operator_states),
    Sample("empty",
           "one operator, parallelism 1, with no state at all: a checkpoint with no data files",
           3, build_empty),
)}


# -- writing -----------------------------------------------------------------------------------


def write_sample(sample: Sample, location: Path) -> CheckpointMetadata:
    """Build ``sample`` in memory and write it as a checkpoint directory at ``location``."""
    operators = sample.build()
    return write_checkpoint(str(location), sample.checkpoint_id,
                            [op.snapshot() for op in operators], kind=sample.kind,
                            created_ms=CREATED_MS)


def relative_location(name: str) -> str:
    """The location a golden records: the sample's path relative to the repository."""
    return f"{HERE.name}/{SAMPLES_DIR.name}/{name}"


def golden_path(sample_dir: Path) -> Path:
    """``v1/<name>.inspect.json`` for the sample directory ``v1/<name>``."""
    return sample_dir.with_name(sample_dir.name + GOLDEN_SUFFIX)


def inspect_document(location: Path, relative: str) -> dict[str, Any]:
    """``statectl --output json inspect LOCATION``, with ``location`` set to ``relative``."""
    result = CliRunner().invoke(statectl, ["--output", "json", "inspect", str(location)])
    if result.exit_code != 0:
        raise RuntimeError(f"statectl inspect {location} failed ({result.exit_code}): "
                           f"{result.stderr or result.output}")
    document: dict[str, Any] = json.loads(result.stdout)
    document["location"] = relative
    return document


def _golden_text(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def without_bytes(value: Any) -> Any:
    """``value`` with every ``bytes`` field of every object left out (they vary with pyarrow)."""
    if isinstance(value, dict):
        return {k: without_bytes(v) for k, v in value.items() if k != "bytes"}
    if isinstance(value, list):
        return [without_bytes(v) for v in value]
    return value


def bytes_problems(document: dict[str, Any], metadata: CheckpointMetadata) -> list[str]:
    """Where an inspect document's ``bytes`` differ from the file sizes in ``metadata``.

    A state's bytes are the sizes of the files its handles reference, summed over subtasks; a
    subtask's are those of its handles.
    """
    sizes = {f.path: f.size for f in metadata.files}
    problems = []
    operators = {op["operator"]["uid"]: op for op in document.get("operators", [])}
    for op in metadata.operators:
        shown = operators.get(op.uid)
        if shown is None:
            problems.append(f"operator {op.uid!r} is missing")
            continue
        state_bytes = {s.name: 0 for s in op.states}
        subtask_bytes = {}
        for subtask in op.subtasks:
            files = [(h.state, h.file) for h in subtask.keyed] + [
                (h.state, h.file) for h in subtask.operator]
            for state, path in files:
                state_bytes[state] += sizes[path]
            subtask_bytes[subtask.index] = sum(sizes[path] for _, path in files)
        for state in shown.get("states", []):
            if state.get("bytes") != state_bytes.get(state.get("state")):
                problems.append(f"{op.uid}: state {state.get('state')!r} shows "
                                f"{state.get('bytes')} bytes, the metadata "
                                f"{state_bytes.get(state.get('state'))}")
        for subtask in shown.get("subtasks", []):
            if subtask.get("bytes") != subtask_bytes.get(subtask.get("subtask")):
                problems.append(f"{op.uid}: subtask {subtask.get('subtask')} shows "
                                f"{subtask.get('bytes')} bytes, the metadata "
                                f"{subtask_bytes.get(subtask.get('subtask'))}")
    return problems


# -- logical contents ----------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A JSON value for a stored state (``TtlValue``, tuples, dicts, bytes, the void namespace)."""
    if value is VOID_NAMESPACE:
        return None
    if isinstance(value, TtlValue):
        return {"value": _plain(value.user_value), "ttl_timestamp": value.last_access_timestamp}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        pairs = [[_plain(k), _plain(v)] for k, v in value.items()]
        return sorted(pairs, key=lambda pair: json.dumps(pair[0], sort_keys=True))
    if isinstance(value, bytes):
        return {"bytes": value.hex()}
    return value


def _operator_entry(entry: OperatorStateSnapshotEntry) -> dict[str, Any]:
    return {"name": entry.name, "mode": entry.mode.name, "value_type": entry.value_type_spec,
            "key_type": entry.key_type_spec, "elements": _plain(entry.elements),
            "entries": [[_plain(k), _plain(v)] for k, v in entry.entries]}


def _type_text(data_type: pa.DataType) -> str:
    """An Arrow type without the names of list and map children (they vary with pyarrow)."""
    if pa.types.is_map(data_type):
        return f"map<{_type_text(data_type.key_type)},{_type_text(data_type.item_type)}>"
    if pa.types.is_list(data_type):
        return f"list<{_type_text(data_type.value_type)}>"
    if pa.types.is_struct(data_type):
        fields = [data_type.field(i) for i in range(data_type.num_fields)]
        return "struct<" + ",".join(f"{f.name}:{_type_text(f.type)}" for f in fields) + ">"
    return str(data_type)


def _schema_text(schema: pa.Schema) -> dict[str, Any]:
    """A file's columns (name, type, nullability) and its schema metadata."""
    return {"columns": [[f.name, _type_text(f.type), f.nullable] for f in schema],
            "metadata": {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()}}


def logical_contents(location: Path) -> dict[str, Any]:
    """What a checkpoint holds, independent of the bytes pyarrow wrote.

    The metadata without file sizes and checksums, the files present, every file's columns
    (Arrow types, child names aside) and schema metadata, and per operator every keyed entry
    (rows sorted inside their key group: their order there is not part of the format) and
    every subtask's operator state elements.
    """
    checkpoint = open_checkpoint(str(location))
    document = metadata_to_json(checkpoint.metadata)
    document["files"] = [f["path"] for f in document["files"]]
    schemas = {f.path: _schema_text(pq.read_schema(location / f.path))
               for f in checkpoint.metadata.files}
    operators: dict[str, Any] = {}
    for op in checkpoint.metadata.operators:
        keyed: dict[str, list[Any]] = {}
        for state in op.states:
            if state.scope != "keyed":
                continue
            rows = [[kg, _plain(key), _plain(ns), _plain(stored)]
                    for kg, key, ns, stored in checkpoint.keyed_entries(op.uid, state.name)]
            keyed[state.name] = sorted(
                rows, key=lambda r: (r[0], json.dumps(r[1:3], sort_keys=True)))
        operator = {str(st.index): [_operator_entry(e)
                                    for e in checkpoint.operator_entries(op.uid, st.index)]
                    for st in op.subtasks}
        operators[op.uid] = {"keyed": keyed, "operator": operator}
    on_disk = sorted(p.relative_to(location).as_posix() for p in location.rglob("*")
                     if not p.is_dir())
    return {"metadata": document, "files_on_disk": on_disk, "schemas": schemas,
            "operators": operators}


def stored_contents(backend: HeapKeyedStateBackend[Any]) -> dict[str, dict[Any, Any]]:
    """Every registered state's stored values by ``(key, namespace)`` (TTL wrappers kept)."""
    return {d.name: {(e.key, e.namespace): e.state for e in backend.table(d.name)}
            for d in backend.descriptors}


# -- check and write -----------------------------------------------------------------------------


def _diff(expected: Any, actual: Any, what: str) -> str:
    lines = difflib.unified_diff(
        json.dumps(expected, indent=1, sort_keys=True).splitlines(),
        json.dumps(actual, indent=1, sort_keys=True).splitlines(),
        f"{what} (regenerated)", f"{what} (committed)", lineterm="", n=2)
    text = list(lines)
    return "\n".join(text[:60] + ([f"... ({len(text) - 60} more diff lines)"]
                                  if len(text) > 60 else []))


def _regenerate(target: Path) -> None:
    for sample in SAMPLES.values():
        write_sample(sample, target / sample.name)
        golden_path(target / sample.name).write_text(_golden_text(
            inspect_document(target / sample.name, relative_location(sample.name))),
            encoding="utf-8")


def _extras(samples_dir: Path) -> Iterator[Path]:
    """Entries of ``samples_dir`` that no sample of this generator accounts for."""
    if not samples_dir.is_dir():
        return
    expected = set(SAMPLES) | {name + GOLDEN_SUFFIX for name in SAMPLES}
    for path in sorted(samples_dir.iterdir()):
        if path.name not in expected:
            yield path


def check(samples_dir: Path = SAMPLES_DIR) -> list[str]:
    """Regenerate into a temporary directory; the ways the committed samples differ from it."""
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="statectl-samples-") as temporary:
        fresh = Path(temporary)
        _regenerate(fresh)
        for name in SAMPLES:
            committed, golden = samples_dir / name, golden_path(samples_dir / name)
            if not committed.is_dir():
                problems.append(f"{name}: sample directory {committed} is missing")
                continue
            try:
                actual = logical_contents(committed)
                metadata = open_checkpoint(str(committed)).metadata
            except StatectlError as exc:
                problems.append(f"{name}: the committed sample cannot be read: {exc}")
                continue
            expected = logical_contents(fresh / name)
            if actual != expected:
                problems.append(f"{name}: contents differ from what the generator writes:\n"
                                + _diff(expected, actual, name))
            if not golden.is_file():
                problems.append(f"{name}: golden {golden} is missing")
                continue
            try:
                committed_golden = json.loads(golden.read_text(encoding="utf-8"))
            except ValueError as exc:
                problems.append(f"{name}: golden {golden} is not JSON: {exc}")
                continue
            expected_golden = json.loads(golden_path(fresh / name).read_text(encoding="utf-8"))
            if without_bytes(committed_golden) != without_bytes(expected_golden):
                problems.append(f"{name}: golden differs (bytes fields aside):\n" + _diff(
                    without_bytes(expected_golden), without_bytes(committed_golden),
                    golden.name))
            problems.extend(f"{name}: golden {p}"
                            for p in bytes_problems(committed_golden, metadata))
        problems.extend(f"{path}: not written by this generator" for path in
                        _extras(samples_dir))
    return problems


def write(samples_dir: Path = SAMPLES_DIR) -> list[Path]:
    """Regenerate every sample and golden and replace the ones in ``samples_dir``."""
    written = []
    samples_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="statectl-samples-") as temporary:
        fresh = Path(temporary)
        _regenerate(fresh)
        for stale in list(_extras(samples_dir)):
            shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
        for name in SAMPLES:
            target = samples_dir / name
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(fresh / name, target)
            shutil.copyfile(golden_path(fresh / name), golden_path(target))
            written += [target, golden_path(target)]
    return written


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main(argv: Sequence[str] | None = None) -> int:
    """Check the committed samples (exit 1 on drift), or rewrite them with ``--write``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true",
                        help="replace the committed samples and goldens by regenerated ones")
    args = parser.parse_args(argv)
    if FORMAT_VERSION != SAMPLE_FORMAT_VERSION:
        print(f"statectl now writes format version {FORMAT_VERSION}; the samples in "
              f"{SAMPLES_DIR} are version {SAMPLE_FORMAT_VERSION} and stay frozen. Add a "
              f"generator for v{FORMAT_VERSION}.", file=sys.stderr)
        return 2
    if args.write:
        for path in write():
            print(f"wrote {path.relative_to(HERE.parent)} ({_size(path):,} bytes)")
        return 0
    problems = check()
    if problems:
        print(f"sample checkpoints drifted from {Path(__file__).name} ({len(problems)} "
              "problem(s)); if the change is intended, run it with --write:", file=sys.stderr)
        for problem in problems:
            print(f"- {problem}", file=sys.stderr)
        return 1
    print(f"{len(SAMPLES)} sample checkpoints in {SAMPLES_DIR.relative_to(HERE.parent)} match "
          "the generator")
    return 0


if __name__ == "__main__":
    sys.exit(main())
