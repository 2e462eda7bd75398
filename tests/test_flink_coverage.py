"""Every value of every state statectl decodes equals what Flink itself restored.

The coverage job (``tests/flink_coverage.py``, ``tests/flink_jobs/CoverageJob.java``) keeps one
state of each type statectl decodes, takes five kinds of snapshot on Flink 2.3 and 1.20 and
restores each in Flink, which prints every key's state in statectl's canonical JSON forms. Per
(Flink version, snapshot kind), statectl opens the snapshot and:

* every value of every state, key and namespace equals Flink's (parsed JSON compared; TTL
  values as the plain value, timers as the sorted timestamps of a key and namespace, map
  entries of non-string keys in key order);
* it finds the same (operator, state) pairs holding data as Flink;
* nothing is undecodable but the class only Kryo's ``FieldSerializer`` knows, which statectl
  reports by its class name (a marker with its bytes where the format delimits values; in the
  heap checkpoint, which does not, its values are counted as undecodable parts of that class).

Two forms are statectl's own and compared as such: a Java ``Set`` is a list in the set's
stored (iteration) order, compared as a set; a typed union (``Either``, a POJO with
subclasses) has every side's field, ``null`` where Flink's value has none.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
from flink_coverage import KINDS, VERSIONS, coverage, restored_by_flink

from formats.flink.checkpoint import FlinkCheckpoint
from formats.open import open_checkpoint
from formats.ops.convert import convert_checkpoint
from formats.ops.export import jsonable
from statecore.hashing import operator_id_of_uid
from statecore.serializers import VOID_NAMESPACE
from statecore.ttl import TtlValue
from statecore.undecodable import Undecodable

CASES = [(version, kind) for version in VERSIONS for kind in KINDS]
IDS = [f"{version}-{kind}" for version, kind in CASES]
#: The state whose values only Kryo's FieldSerializer can read (CoverageJob.Opaque).
OPAQUE = ("kryo-opaque", "opaque")
#: A POJO subclass that is not registered: Flink's snapshot of the POJO serializer describes
#: it only if that serializer instance had serialized one (its cache of subclass serializers),
#: which neither backend's meta-info snapshot has. Its values are undecodable, named: the
#: fields are not in the snapshot (as for a class only Kryo's FieldSerializer knows).
UNDESCRIBED = {("types-keyed", "sub-unregistered"): "CoverageJob$SubUnreg"}
#: States and POJO fields holding a Java ``Set`` (compared in any order).
SETS = {("kryo-keyed", "hash-set"), ("kryo-keyed", "enum-set")}
SET_FIELDS = {"ids"}
#: The snapshot kind that does not delimit values (Flink's heap full snapshot).
UNDELIMITED = "heap-checkpoint"
#: How many differences an assertion message lists.
SHOWN = 20

Entry = tuple[str, str, str, str]  # operator, state, key (JSON), namespace (JSON or "")


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def canonical(value: Any) -> Any:
    """statectl's value in its canonical JSON form (``formats.ops.export.jsonable`` for leaves).

    An :class:`Undecodable` is ``{"undecodable": class_name, "reason": ...}``; a TTL value its
    user value; a set a list sorted by JSON text; a value without a JSON form names its type
    (so that it shows in the diff instead of failing it).
    """
    if isinstance(value, Undecodable):
        return {"undecodable": value.class_name, "reason": value.reason}
    if isinstance(value, TtlValue):
        return canonical(value.user_value)
    if isinstance(value, set | frozenset):
        return sorted((canonical(v) for v in value), key=_text)
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {k: canonical(v) for k, v in value.items()}
        return [{"key": canonical(k), "value": canonical(v)} for k, v in value.items()]
    if isinstance(value, list | tuple):
        return [canonical(v) for v in value]
    plain = jsonable(value)
    if plain is None or isinstance(plain, str | int | float | bool):
        return plain
    return f"<no JSON form: {type(value).__name__} {value!r:.200}>"


def _as_flink(pair: tuple[str, str], mine: Any, theirs: Any) -> Any:
    """statectl's value in the forms Flink's printout has: sets sorted, absent sides of a
    union (``null`` in statectl's struct) dropped where Flink's object lacks them."""
    if isinstance(mine, dict) and isinstance(theirs, dict) and "undecodable" in theirs:
        return {"undecodable": mine.get("undecodable")} if "undecodable" in mine else mine
    if pair in SETS and isinstance(mine, list):
        mine = sorted(mine, key=_text)
    if isinstance(mine, dict) and isinstance(theirs, dict) and "undecodable" not in mine:
        mine = {k: (sorted(v, key=_text) if k in SET_FIELDS and isinstance(v, list) else v)
                for k, v in mine.items() if k in theirs or v is not None}
    return mine


def _undescribed(mine: Any, class_name: str) -> bool:
    """Whether statectl shows a value of an undescribed subclass as undecodable, naming it."""
    return isinstance(mine, dict) and "undecodable" in mine and class_name in mine.get(
        "reason", "")


def _normal(kind: str, value: Any) -> Any:
    """Order that carries no meaning removed: map entries of non-string keys by key."""
    if kind in ("map", "broadcast") and isinstance(value, list):
        return sorted(value, key=lambda e: _text(e.get("key")) if isinstance(e, dict) else "")
    if kind in ("timer", "operator-list") and isinstance(value, list):
        return sorted(value, key=_text)
    return value


@functools.cache
def _flink(version: str, kind: str) -> tuple[dict[Entry, Any], dict[tuple[str, str], str]]:
    """Flink's reference: the value of every entry, and the kind of every (operator, state)."""
    values: dict[Entry, Any] = {}
    kinds: dict[tuple[str, str], str] = {}
    for line in coverage(version).reference[kind]:
        entry = (line["op"], line["state"], _text(line["key"]),
                 _text(line["ns"]) if "ns" in line else "")
        kinds[line["op"], line["state"]] = line["kind"]
        if "undecodable" in line:
            values[entry] = {"undecodable": line["undecodable"]}
        elif line["kind"] == "timer":
            values.setdefault(entry, []).append(line["value"])
        else:
            values[entry] = line["value"]
    return ({e: _normal(kinds[e[:2]], v) for e, v in values.items()}, kinds)


class Reading:
    """statectl's reading of one snapshot: every entry's canonical value, the (operator, state)
    pairs holding data, the states it could not read (with the error) and its undecodable
    parts."""

    def __init__(self, path: str, uids: set[str]) -> None:
        self.values: dict[Entry, Any] = {}
        self.pairs: set[tuple[str, str]] = set()
        self.errors: dict[tuple[str, str], str] = {}
        self.undecodable: list[tuple[str, str, str, str]] = []
        self.counted: list[tuple[str, str, str, int]] = []
        self.open_error = ""
        try:
            cp = open_checkpoint(path)
        except Exception as exc:  # noqa: BLE001 - the finding every test of the case reports
            self.open_error = (f"statectl cannot open the snapshot: {type(exc).__name__}: "
                               f"{exc}"[:600])
            # what can be read all the same, compared too
            cp = open_checkpoint(path, strict=False, partial=True)
        assert isinstance(cp, FlinkCheckpoint)
        # Flink 1.x stores no uid, only the OperatorID Flink derives from it
        by_id = {operator_id_of_uid(uid): uid for uid in uids}
        for op in cp.metadata.operators:
            uid = op.uid if op.has_uid else by_id.get(op.operator_id or "", op.uid)
            for state in op.states:
                pair = (uid, state.name)
                try:
                    if state.scope == "keyed":
                        self._keyed(pair, cp.keyed_entries(op.uid, state.name))
                    else:
                        self._operator(pair, [cp.decoded_operator_state(h.file).elements
                                              for st in op.subtasks for h in st.operator
                                              if h.state == state.name], state.kind)
                except Exception as exc:  # noqa: BLE001 - reported per state, as a finding
                    self.errors[pair] = f"{type(exc).__name__}: {exc}"[:400]
                    self.pairs.add(pair)
        self.undecodable = [(by_id.get(p.operator, p.operator), p.state, p.class_name,
                             p.reason[:200]) for p in cp.undecodable_parts()]
        #: values counted as undecodable: (operator, state, class, values)
        self.counted = [(by_id.get(p.operator, p.operator), p.state, p.class_name, p.values)
                        for p in cp.undecodable_parts()]

    def _keyed(self, pair: tuple[str, str], rows: Any) -> None:
        for _key_group, key, namespace, value in rows:
            ns = "" if namespace is VOID_NAMESPACE else _text(canonical(namespace))
            self.values[(*pair, _text(canonical(key)), ns)] = canonical(value)
            self.pairs.add(pair)

    def _operator(self, pair: tuple[str, str], subtasks: list[list[Any]], kind: str) -> None:
        if not any(subtasks):
            return
        self.pairs.add(pair)
        if kind == "broadcast":  # every subtask holds the whole map: statectl's first
            self.values[(*pair, "null", "")] = canonical(dict(subtasks[0]))
        else:
            self.values[(*pair, "null", "")] = [canonical(e) for els in subtasks for e in els]


@functools.cache
def _statectl(version: str, kind: str) -> Reading:
    uids = {line["op"] for line in coverage(version).reference[kind]}
    return Reading(str(coverage(version).snapshots[kind]), uids)


def _show(value: Any) -> str:
    text = _text(value)
    return text if len(text) <= 240 else text[:240] + "..."


def _contrast(mine: Any, theirs: Any) -> str:
    """statectl's value against Flink's; of two objects only the fields that differ."""
    if isinstance(mine, dict) and isinstance(theirs, dict) and (
            "undecodable" not in mine or "undecodable" in theirs):
        fields = sorted(k for k in mine.keys() | theirs.keys() if mine.get(k, ...) != theirs.get(
            k, ...))
        return "; ".join(f"field {k!r}: statectl {_show(mine.get(k, '<absent>'))} != Flink "
                         f"{_show(theirs.get(k, '<absent>'))}" for k in fields)
    return f"statectl {_show(mine)} != Flink {_show(theirs)}"


def _differences(version: str, kind: str) -> list[str]:
    """Per (operator, state) that differs: how many entries and the first difference."""
    want, kinds = _flink(version, kind)
    got = _statectl(version, kind)
    found: dict[tuple[str, str], list[str]] = {}
    totals: dict[tuple[str, str], int] = {}
    fields_of: dict[tuple[str, str], dict[str, str]] = {}
    for entry, value in sorted(want.items()):
        pair = entry[:2]
        if pair == OPAQUE and kind == UNDELIMITED:
            continue  # counted as undecodable parts (test_only_the_field_serializer_...)
        totals[pair] = totals.get(pair, 0) + 1
        where = f"key={entry[2]}" + (f" ns={entry[3]}" if entry[3] else "")
        if pair in got.errors:
            found.setdefault(pair, []).append(f"statectl failed: {got.errors[pair]}")
        elif entry not in got.values:
            if not (kind == UNDELIMITED and pair in UNDESCRIBED and isinstance(value, dict)
                    and value.get("@class") == UNDESCRIBED[pair]):  # counted, not kept
                found.setdefault(pair, []).append(f"{where}: missing in statectl; Flink "
                                                  f"{_show(value)}")
        else:
            mine = _as_flink(pair, _normal(kinds[pair], got.values[entry]), value)
            if (pair in UNDESCRIBED and isinstance(value, dict)
                    and value.get("@class") == UNDESCRIBED[pair]):
                if _undescribed(mine, value["@class"]):  # named undecodable: accepted
                    value = mine
            if mine != value:
                found.setdefault(pair, []).append(f"{where}: {_contrast(mine, value)}")
                if isinstance(mine, dict) and isinstance(value, dict) and (
                        "undecodable" not in mine or "undecodable" in value):
                    # an object: every field that differs in any entry, with one example
                    for k in sorted(mine.keys() | value.keys()):
                        if mine.get(k, ...) != value.get(k, ...):
                            fields_of.setdefault(pair, {}).setdefault(
                                f"field {k!r}", f"{where}: statectl "
                                f"{_show(mine.get(k, '<absent>'))} != Flink "
                                f"{_show(value.get(k, '<absent>'))}")
    for entry in sorted(set(got.values) - set(want)):
        found.setdefault(entry[:2], []).append(
            f"key={entry[2]}: statectl has an entry Flink did not restore")
    out = [got.open_error] * bool(got.open_error)
    for (op, state), diffs in sorted(found.items()):
        fields = fields_of.get((op, state), {})
        example = ("; ".join(f"{k}: {v}" for k, v in sorted(fields.items())) if fields
                   else diffs[0])
        out.append(f"{op}/{state}: {len(diffs)} of {totals.get((op, state), 0)} entries "
                   f"differ, e.g. {example}")
    return out


def _fail(what: str, problems: list[str]) -> None:
    if problems:
        shown = "\n  ".join(problems[:SHOWN])
        more = f"\n  ... and {len(problems) - SHOWN} more" if len(problems) > SHOWN else ""
        pytest.fail(f"{what}: {len(problems)} findings\n  {shown}{more}", pytrace=False)


@pytest.mark.parametrize(("version", "kind"), CASES, ids=IDS)
def test_every_value_equals_flinks(version: str, kind: str) -> None:
    want, _kinds = _flink(version, kind)
    assert len(want) > 500, f"Flink printed only {len(want)} entries"
    _fail(f"Flink {version} {kind}: statectl's values vs Flink's restore",
          _differences(version, kind))


@pytest.mark.parametrize(("version", "kind"), CASES, ids=IDS)
def test_states_holding_data_equal_flinks(version: str, kind: str) -> None:
    _want, kinds = _flink(version, kind)
    reading = _statectl(version, kind)
    found = reading.pairs
    problems = [reading.open_error] * bool(reading.open_error)
    missing = kinds.keys() - found
    if kind == UNDELIMITED:  # the FieldSerializer class's values: counted, not kept
        missing -= {OPAQUE}
    problems += [f"{op}/{state}: Flink restored it, statectl found no entry"
                for op, state in sorted(missing)]
    problems += [f"{op}/{state}: statectl found entries, Flink restored none"
                 for op, state in sorted(found - kinds.keys())]
    _fail(f"Flink {version} {kind}: (operator, state) pairs", problems)


@pytest.mark.parametrize(("version", "kind"), CASES, ids=IDS)
def test_only_the_field_serializer_class_is_undecodable(version: str, kind: str) -> None:
    want, _kinds = _flink(version, kind)
    opaque = {e: v for e, v in want.items() if e[:2] == OPAQUE}
    assert opaque and all(v == {"undecodable": "CoverageJob$Opaque"} for v in opaque.values())
    got = _statectl(version, kind)
    parts: dict[tuple[str, str, str], tuple[int, str]] = {}
    for op, state, cls, why in got.undecodable:
        if (op, state) in UNDESCRIBED and UNDESCRIBED[op, state] in why:
            continue  # named: its fields are not in the snapshot (see UNDESCRIBED)
        if (op, state) != OPAQUE:
            count, _why = parts.get((op, state, cls), (0, why))
            parts[op, state, cls] = (count + 1, why)
    problems = [got.open_error] * bool(got.open_error)
    problems += [f"{op}/{state}: {count} undecodable parts of class {cls}, e.g.: {why}"
                 for (op, state, cls), (count, why) in sorted(parts.items())]
    if kind == UNDELIMITED:  # no value delimited: the blocks are counted, by their class
        counted = sum(n for op, state, cls, n in got.counted if (op, state) == OPAQUE
                      and cls == "CoverageJob$Opaque")
        if counted != len(opaque):
            problems.append(f"{OPAQUE[0]}/{OPAQUE[1]}: {counted} values counted undecodable as "
                            f"CoverageJob$Opaque, Flink restored {len(opaque)}")
        _fail(f"Flink {version} {kind}: undecodable values", problems)
        return
    wrong = [e for e in sorted(opaque)
             if not isinstance(got.values.get(e), dict)
             or got.values[e].get("undecodable") != opaque[e]["undecodable"]]
    if wrong:
        problems.append(f"{OPAQUE[0]}/{OPAQUE[1]}: {len(wrong)} of {len(opaque)} values not "
                        f"undecodable by their class name CoverageJob$Opaque, e.g. key="
                        f"{wrong[0][2]}: statectl {_show(got.values.get(wrong[0]))}")
    _fail(f"Flink {version} {kind}: undecodable values", problems)


# -- what statectl writes, restored by the same Flink ------------------------------------------

#: The snapshots rewritten: a canonical savepoint (its values re-encoded by statectl) and a
#: RocksDB incremental checkpoint (converted: every value read from SST files, re-encoded).
REWRITTEN = ("heap-savepoint-canonical", "rocksdb-checkpoint-incremental")


@pytest.mark.parametrize("version", VERSIONS)
def test_flink_restores_every_value_statectl_writes_for_it(version: str, tmp_path: Path) -> None:
    """Every type, Kryo's included (Kryo 2 for 1.x, Kryo 5 for 2.x), written back by statectl
    for the Flink that wrote it, is restored by that Flink with the values it restored from its
    own snapshot (the rows it prints are equal)."""
    cov = coverage(version)
    written = {}
    for kind in REWRITTEN:
        source = open_checkpoint(str(cov.snapshots[kind]), partial=True)
        out = tmp_path / kind
        result = convert_checkpoint(source, str(out))
        assert result.release is not None and result.release["chosen_by"] == "source"
        written[kind] = out
    restored = restored_by_flink(version, written, tmp_path / "flink")
    for kind in REWRITTEN:
        want = sorted(json.dumps(line, sort_keys=True) for line in cov.reference[kind])
        got = sorted(json.dumps(line, sort_keys=True) for line in restored[kind])
        assert len(want) > 500
        missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
        assert not missing and not extra, (kind, missing[:5], extra[:5])
