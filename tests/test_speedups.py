"""The compiled decoder (formats/flink/read/cdecoder.c) decodes what the Python readers decode.

``cdecoder`` takes a key group of a heap or canonical keyed stream only when it decodes it
exactly as the Python readers would (else it gives it back to them). Checked here, each
snapshot opened twice -- with the compiled decoder and with the Python readers alone -- and
everything compared: the metadata (entries and bytes per state and key group), every decoded
entry, and what could not be decoded:

* every Flink fixture snapshot (heap, RocksDB, types, versions: its full-snapshot streams);
* savepoints statectl writes of random states of every type the decoder takes (keys String,
  Integer, Long, ...; value, list and map state; non-ASCII and null Strings, which it gives
  back);
* fixture snapshots with a byte of their keyed state changed (hypothesis): a damaged key group
  is given back, and the Python readers say the same about it either way.

``make test`` runs the whole suite with the compiled decoder where it is built (``statectl
--version`` says so); ``make test-pure`` runs it with ``STATECTL_PURE_PYTHON=1``. A test here
also checks that the decoder is built in this environment, so that it is the one tested.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from flink_fixtures import expected, fixture_sets
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import REPO_ROOT

import formats.flink.read.incremental as incremental_module
import formats.flink.read.keyed as keyed_module
import formats.flink.read.rocksdb.block as block_module
import formats.flink.read.rocksdb.merge as merge_module
import formats.flink.read.rocksdb.sst as sst_module
from formats.flink.read.speedups import SPEEDUPS
from formats.open import open_checkpoint

ROOTS = ("heap", "rocksdb", "types", "versions")
SNAPSHOTS = [(s, snap) for root in ROOTS for s in fixture_sets(root)
             for snap in expected(s)["snapshots"]]


def _contents(path: str, pure: bool, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Everything a snapshot opened (and decoded) gives: metadata, entries, what was lost."""
    with monkeypatch.context() as patch:
        if pure:
            patch.setattr(keyed_module, "speedup_plans", lambda header: None)
            for module in (block_module, merge_module, sst_module):  # RocksDB's tables
                patch.setattr(module, "SPEEDUPS", None)
        checkpoint = open_checkpoint(path, partial=True)
        rows = {}
        for op in checkpoint.metadata.operators:
            for st_ in op.subtasks:
                for handle in st_.keyed:
                    rows[handle.file] = [repr(r) for r in checkpoint.decoded_rows(handle.file)]
        return {"metadata": checkpoint.metadata, "rows": rows,
                "lost": Counter(repr(p) for p in checkpoint.undecodable_parts())}


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How many key groups the compiled decoder took and gave back, per layout."""
    counts: Counter[str] = Counter()
    if SPEEDUPS is None:
        return counts
    for name in ("canonical_group", "heap_group", "pairs_run"):
        original = getattr(SPEEDUPS, name)

        def counted(*args: Any, _original: Any = original, _name: str = name) -> Any:
            runs = _original(*args)
            counts[_name + (" taken" if runs is not None else " given back")] += 1
            return runs
        monkeypatch.setattr(SPEEDUPS, name, counted)
    return counts


def test_the_compiled_decoder_is_built_where_a_compiler_is() -> None:
    """``make test`` builds it (``pip install -e .``) where Python's C compiler is found; else
    the install went on without it. ``--version`` says which, and when it is switched off."""
    if os.environ.get("STATECTL_PURE_PYTHON", "") not in ("", "0"):
        assert SPEEDUPS is None
        return
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        assert SPEEDUPS is None
        assert "the compiled decoder is not built" in subprocess.run(
            [sys.executable, "-m", "cli.main", "--version"], cwd=REPO_ROOT, capture_output=True,
            text=True, check=True).stdout
        return
    assert SPEEDUPS is not None, "formats/flink/read/cdecoder.c was not built (setup.py)"
    for env, compiled in (({}, "compiled"), ({"STATECTL_PURE_PYTHON": "1"}, "pure Python")):
        done = subprocess.run([sys.executable, "-m", "cli.main", "--version"], cwd=REPO_ROOT,
                              env={**os.environ, **env}, capture_output=True, text=True,
                              check=True)
        assert compiled in done.stdout, done.stdout


@pytest.mark.parametrize("root,snap", SNAPSHOTS,
                         ids=[f"{s.parent.name}-{s.name}-{snap['path'].replace('/', '-')}"
                              for s, snap in SNAPSHOTS])
def test_every_fixture_snapshot_decodes_alike_compiled_or_not(
        root: Path, snap: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
        taken: Counter[str]) -> None:
    path = str(root / snap["path"])
    compiled = _contents(path, False, monkeypatch)
    pure = _contents(path, True, monkeypatch)
    assert compiled["metadata"] == pure["metadata"]
    assert compiled["rows"] == pure["rows"]
    assert compiled["lost"] == pure["lost"]


def test_the_compiled_decoder_takes_the_fixtures_key_groups(
        monkeypatch: pytest.MonkeyPatch, taken: Counter[str]) -> None:
    """Not a decoder that gives everything back: the heap and canonical key groups of the
    DataStream fixture job (String, Integer, Long keys; value, list, map state, timers).
    Switched off (``make test-pure``), it is never imported."""
    for root, snap in SNAPSHOTS:
        _contents(str(root / snap["path"]), False, monkeypatch)
    if SPEEDUPS is None:  # switched off or not built: nothing compiled is even imported
        assert "formats.flink.read.cdecoder" not in sys.modules
        return
    assert taken["canonical_group taken"] > 0 and taken["heap_group taken"] > 0, taken
    assert taken["pairs_run taken"] > 0, taken  # RocksDB's pairs too


# -- savepoints statectl writes --------------------------------------------------------------

KEY_TYPES = {"string": st.text(max_size=6), "int32": st.integers(-2**31, 2**31 - 1),
             "int64": st.integers(-2**63, 2**63 - 1)}
VALUE_TYPES = {"string": st.text(max_size=5), "int32": st.integers(-2**31, 2**31 - 1),
               "int64": st.integers(-2**63, 2**63 - 1), "int16": st.integers(-2**15, 2**15 - 1),
               "int8": st.integers(-128, 127), "bool": st.booleans(),
               "float64": st.floats(allow_nan=False), "float32": st.floats(width=32,
                                                                            allow_nan=False)}


@st.composite
def keyed_states(draw: Any) -> tuple[str, list[tuple[str, str, str, dict[Any, Any]]]]:
    key_type = draw(st.sampled_from(sorted(KEY_TYPES)))
    keys = draw(st.lists(KEY_TYPES[key_type], min_size=1, max_size=12, unique=True))
    states = []
    for i in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["value", "list", "map"]))
        value_type = draw(st.sampled_from(sorted(VALUE_TYPES)))
        values = VALUE_TYPES[value_type]
        if kind == "list":
            values = st.lists(values, min_size=1, max_size=4)
        elif kind == "map":
            values = st.dictionaries(st.text(max_size=4), st.one_of(st.none(), values),
                                     min_size=1, max_size=3)
        content = draw(st.dictionaries(st.sampled_from(keys), values, min_size=1))
        states.append((f"s{i}", kind, value_type, content))
    return key_type, states


def _write(base: Path, key_type: str, states: list[tuple[str, str, str, dict[Any, Any]]]
           ) -> str:
    from formats.ops.convert import convert_checkpoint
    from formats.statectl.writer import write_checkpoint
    from statecore.checkpoint import OperatorSnapshot, SubtaskSnapshot
    from statecore.keyed_backend import HeapKeyedStateBackend
    from statecore.keyed_state import list_state, map_state, value_state

    backend: HeapKeyedStateBackend[Any] = HeapKeyedStateBackend(key_type, 128)
    for name, kind, value_type, content in states:
        if kind == "value":
            state: Any = backend.get_value_state(value_state(name, value_type))
        elif kind == "list":
            state = backend.get_list_state(list_state(name, value_type))
        else:
            state = backend.get_map_state(map_state(name, "string", value_type))
        for key, value in content.items():
            backend.set_current_key(key)
            if kind == "value":
                state.update(value)
            elif kind == "list":
                state.add_all(value)
            else:
                state.put_all(value.items())
    source = base / "statectl"
    write_checkpoint(str(source), 1, [OperatorSnapshot(
        "op", "op", 1, 128, [SubtaskSnapshot(0, backend.snapshot())])])
    out = base / "savepoint"
    convert_checkpoint(open_checkpoint(str(source)), str(out))
    return str(out)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keyed_states())
def test_random_states_written_by_statectl_decode_alike_compiled_or_not(
        tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
        drawn: tuple[str, list[tuple[str, str, str, dict[Any, Any]]]]) -> None:
    path = _write(tmp_path_factory.mktemp("random"), *drawn)
    compiled = _contents(path, False, monkeypatch)
    pure = _contents(path, True, monkeypatch)
    assert compiled == pure


# -- damaged snapshots -----------------------------------------------------------------------

#: the snapshots of the first set of each root
DAMAGED = [(s, snap) for root in ("heap", "types", "rocksdb") for s in fixture_sets(root)[:1]
           for snap in expected(s)["snapshots"]]


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(DAMAGED) if DAMAGED else st.nothing(), st.floats(0.0, 0.999),
       st.integers(0, 255))
def test_a_damaged_key_group_is_given_back_and_decoded_alike(
        monkeypatch: pytest.MonkeyPatch, case: tuple[Path, dict[str, Any]], where: float,
        byte: int) -> None:
    """One byte of every keyed stream's key groups changed (the streams may be in
    ``_metadata`` itself: changed where they are decoded, the same for both readers), and one
    of each batch of RocksDB pairs (a key's or a value's)."""
    root, snap = case
    outcomes = []
    with monkeypatch.context() as patch:  # undone after each example
        for name in ("_decode_canonical", "_decode_heap"):
            decode = getattr(keyed_module, name)

            def damaged(data: bytes, handle: Any, header: Any, *rest: Any,
                        _decode: Any = decode) -> None:
                changed = bytearray(data)
                if len(changed) > header.size:
                    changed[header.size + int(where * (len(changed) - header.size))] = byte
                _decode(bytes(changed), handle, header, *rest)
            patch.setattr(keyed_module, name, damaged)
        batches = incremental_module._decode_batches

        def damaged_pairs(pairs: Any, *rest: Any) -> None:  # RocksDB: a byte of each batch
            def changed() -> Any:
                for keys, values in pairs:
                    keys, values = list(keys), list(values)
                    i = int(where * len(keys))
                    if byte % 2 and values[i]:  # a value's byte
                        data = bytearray(values[i])
                        data[int(where * len(data))] = byte
                        values[i] = bytes(data)
                    elif len(keys[i]) > 2:  # a key's, after its key-group prefix
                        data = bytearray(keys[i])
                        data[2 + int(where * (len(data) - 2))] = byte
                        keys[i] = bytes(data)
                    yield keys, values
            batches(changed(), *rest)
        patch.setattr(incremental_module, "_decode_batches", damaged_pairs)
        for pure in (False, True):
            try:
                outcomes.append(("ok", _contents(str(root / snap["path"]), pure, patch)))
            except Exception as exc:  # the same error either way
                outcomes.append(("error", f"{type(exc).__name__}: {exc}"))
    assert outcomes[0] == outcomes[1]


def test_without_a_compiler_the_install_goes_on_and_decodes_alike(tmp_path: Path) -> None:
    """``pip`` builds statectl with no C compiler (``CC=false``): the wheel has no compiled
    decoder, and statectl from it says so and shows a Flink snapshot as with it."""
    source = tmp_path / "source"  # the sources alone: no decoder built here, no build/
    shutil.copytree(REPO_ROOT, source, ignore=shutil.ignore_patterns(
        ".venv*", ".git", "build", "*.so", "__pycache__", ".*_cache", ".hypothesis",
        "*.egg-info", "tour", "demo", "sample_checkpoints"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w",
                           str(tmp_path / "wheel"), str(source)],
                          env={**os.environ, "CC": "false"}, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = (tmp_path / "wheel").glob("statectl-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        assert "formats/flink/read/speedups.py" in names
        assert not [n for n in names if "cdecoder" in n], names
        archive.extractall(tmp_path / "installed")
    root, snap = next((s, snap) for s, snap in SNAPSHOTS
                      if snap.get("format") == "canonical" and "rocksdb" not in str(s))
    outputs = []
    for where in (tmp_path / "installed", REPO_ROOT):
        # the wheel's own say (not switched off); this checkout's as this process runs
        env = {k: v for k, v in os.environ.items()
               if k != "STATECTL_PURE_PYTHON" or where == REPO_ROOT}
        env["PYTHONPATH"] = str(where)
        version = subprocess.run([sys.executable, "-m", "cli.main", "--version"], cwd=tmp_path,
                                 env=env, capture_output=True, text=True, check=True).stdout
        shown = subprocess.run([sys.executable, "-m", "cli.main", "--output", "json", "inspect",
                                "--all", str(root / snap["path"])], cwd=tmp_path, env=env,
                               capture_output=True, text=True, check=True).stdout
        outputs.append((version, shown))
    assert "pure Python: the compiled decoder is not built" in outputs[0][0]
    assert ("compiled decoder" in outputs[1][0]) == (SPEEDUPS is not None)
    assert outputs[0][1] == outputs[1][1]
