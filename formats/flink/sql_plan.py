"""A Flink SQL job's plan names its operators' state (``--plan FILE``).

The plan is the JSON of Flink's ``COMPILE PLAN`` (``StatementSet.compilePlan()``,
``CompiledPlan.asJsonString()``): ``{"flinkVersion", "nodes", "edges"}``, as Flink's
``JsonPlanGraph`` serde writes it (``flink-table-planner``, ``plan/nodes/exec/serde``). Each node
has an ``id``, a ``type`` (``stream-exec-group-aggregate_1``: ``ExecNodeMetadata.name`` and
version), its node-specific fields (``grouping`` and ``aggCalls`` of an aggregate,
``partitionSpec`` of a rank, ``joinSpec`` of a join, ...), ``outputType`` (a ``ROW<`name` TYPE,
...>``, as a string or as ``{"type": "ROW", "fields": [{"name", "fieldType"}]}``) and
``description``; an edge is ``{"source", "target", ...}``.

How a node meets an operator of a snapshot: Flink names the operator of exec node ``N`` of kind
``StreamExecGroupAggregate`` ``GroupAggregate[N]``
(``ExecNodeBase.createFormattedTransformationName`` with
``table.exec.simplify-operator-name-enabled``, the default; the sink upsert materializer of
sink node ``N`` is ``SinkMaterializer[N]``), and Flink 2.x stores operator names in ``_metadata``.
Node ids come from one counter per JVM (``ExecNodeContext.newNodeId``) that every planning
draws from (compiling a plan too), so a job planned apart from its compiled plan has the plan's
ids plus a constant (the nodes planned in between; the coverage job's: 196 and 92); run from the
plan (``EXECUTE PLAN``), the same ids. statectl takes the one constant under which
the most operators meet a node of their own kind (a tie, or fewer than half of them, is an
error: not this job's plan).

What is named, by the plan's column names and aggregate calls: the fields of each matched
operator's key (``auction``: the grouping, partition, unique or join-key columns of the node's
input), of its accumulators (``accState``, ``window-aggs``: one field per aggregate call,
``count(*)``, ``max(price)``, ``avg(price).sum``/``avg(price).count`` where an accumulator has
several, ``distinct(bidder)`` per distinct view) and of its records (a row of the width of one
of the node's inputs or of its output: that one's columns). Nothing else changes: an operator
or a row the plan does not name keeps its positional names (``f0``, ``f1``), and
:attr:`PlanNames.unnamed` says which.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from formats.model.arrow_types import spec_arguments
from statecore.checkpoint import CheckpointMetadata, OperatorMetadata, StateMetadata
from statecore.errors import InvalidArgumentError

__all__ = ["PlanNames", "SqlPlan", "accumulator_names", "key_names", "load_plan", "named_by_plan",
           "quote_name", "tuple_names_of"]

#: operator names Flink gives SQL operators: ``GroupAggregate[12]``
_OPERATOR_NAME = re.compile(r"([A-Za-z]+)\[(\d+)\]")
#: the plan's node kind of operators named otherwise than their node
#: operators a node adds besides its own, named by the node's id (any node's: a sink's
#: materializer and constraint enforcer, the rowtime inserter of a sink or ``Match``)
_HELPERS = ("SinkMaterializer", "ConstraintEnforcer", "StreamRecordTimestampInserter")
#: states of no rows of the node's input (windows, views, timers, counts)
_NOT_RECORDS = ("_timer_state/", "distinctAcc", "session-window-mapping", "agg", "timer",
                "next-index", "lastTriggeringTsState", "cleanupTsState", "processedCountState",
                "sorted-map", "nfaStateName", "sharedBuffer-entries", "sharedBuffer-events-count")
#: states whose value is the row of an aggregate's accumulators
_ACCUMULATORS = ("accState", "window-aggs")
#: accumulator fields of the aggregate functions that keep more than one
#: (``AvgAggFunction``: sum, count; ``ListAggFunction``: acc, delimiter; a ``SUM`` with
#: retraction, ``SumWithRetractAggFunction``: sum, count)
_BUFFERS = {"AVG": ("sum", "count"), "LISTAGG": ("acc", "delimiter")}
_RETRACT_BUFFERS = {"SUM": ("sum", "count")}
#: where a node's key columns are, per field path, and which input they index
_KEY_PATHS: tuple[tuple[tuple[str, ...], int], ...] = (
    (("grouping",), 0), (("partialAggGrouping",), 0), (("partitionSpec", "fields"), 0),
    (("partition", "fields"), 0),
    (("partitionKeys",), 0), (("uniqueKeys",), 0), (("joinSpec", "leftKeys"), 0),
    (("intervalJoinSpec", "joinSpec", "leftKeys"), 0), (("overSpec", "partition", "fields"), 0),
    (("matchSpec", "partition", "fields"), 0), (("inputUpsertKey",), 0))
_NAME_CHARS = re.compile(r"[\s<>,:%]")


def quote_name(name: str) -> str:
    """A field name as a type spec holds it (``%XX`` for space, ``<>,:%``)."""
    return _NAME_CHARS.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode()), name)


@dataclass(frozen=True)
class PlanNode:
    """One exec node: id, kind (``GroupAggregate``), its JSON, column names, sink tables fed."""

    id: int
    kind: str
    raw: dict[str, Any]
    output: tuple[str, ...]
    inputs: tuple[tuple[str, ...], ...]
    tables: tuple[str, ...]

    @property
    def label(self) -> str:
        fed = f" -> {', '.join(self.tables)}" if self.tables else ""
        return f"{self.raw.get('description', self.kind)}{fed}"


@dataclass(frozen=True)
class SqlPlan:
    """A parsed plan: its nodes by id."""

    source: str
    nodes: dict[int, PlanNode]


@dataclass(frozen=True)
class PlanNames:
    """What a plan named in a snapshot.

    ``matched``: ``{operator uid: node id}``; ``offset``: the job's node ids less the plan's;
    ``unnamed``: the SQL operators (``Kind[N]``) or rows it left unnamed, with why.
    """

    offset: int
    matched: dict[str, int] = field(default_factory=dict)
    unnamed: list[str] = field(default_factory=list)


def _kind(node_type: str) -> str:
    base = re.sub(r"^(stream|batch)-exec-", "", node_type.rsplit("_", 1)[0])
    return "".join(part.capitalize() for part in base.split("-"))


def _split_top(text: str) -> list[str]:
    """A ``ROW<...>``'s fields: split at commas outside ``<>``, ``()`` and backquotes."""
    parts: list[str] = []
    depth, current, quoted = 0, list[str](), False
    for ch in text:
        if ch == "`":
            quoted = not quoted
        elif not quoted:
            depth += ch in "<("
            depth -= ch in ">)"
            if ch == "," and depth == 0:
                parts.append("".join(current).strip())
                current = []
                continue
        current.append(ch)
    if current:
        parts.append("".join(current).strip())
    return parts


def _row_names(row_type: Any, where: str) -> tuple[str, ...]:
    """The field names of a ``LogicalType`` of the plan (a ``ROW``); ``()`` for other types."""
    if isinstance(row_type, dict):
        if row_type.get("type") != "ROW":
            return ()
        return tuple(str(f["name"]) for f in row_type.get("fields", []))
    if not isinstance(row_type, str):
        raise InvalidArgumentError(f"{where}: outputType is neither a type string nor an object")
    text = row_type.strip()
    match = re.fullmatch(r"ROW<(.*)>(\s+NOT NULL)?", text, re.S)
    if match is None:
        return ()
    names = []
    for part in _split_top(match.group(1)):
        quoted = re.match(r"`((?:[^`]|``)*)`", part)
        names.append(quoted.group(1).replace("``", "`") if quoted else part.split()[0])
    return tuple(names)


def load_plan(text: str, source: str) -> SqlPlan:
    """Parse a plan's JSON (``source`` names it in messages); an error if it is not one."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise InvalidArgumentError(f"--plan {source}: not JSON ({exc})") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list) or \
            not isinstance(doc.get("edges", []), list):
        raise InvalidArgumentError(f"--plan {source}: not a compiled plan of Flink (COMPILE "
                                   f"PLAN's JSON: an object with \"nodes\" and \"edges\")")
    if any(isinstance(n, dict) and "pact" in n and "contents" in n for n in doc["nodes"]):
        # JSONGenerator's stream graph: operator names and descriptions, no columns as data
        raise InvalidArgumentError(
            f"--plan {source}: this is EXPLAIN JSON_EXECUTION_PLAN's JSON (the stream graph: "
            f"operators and their descriptions, no columns or aggregate calls as data); give "
            f"the JSON of COMPILE PLAN for the job's statements")
    raw: dict[int, dict[str, Any]] = {}
    for node in doc["nodes"]:
        if not isinstance(node, dict) or not isinstance(node.get("id"), int) or \
                not isinstance(node.get("type"), str):
            raise InvalidArgumentError(f"--plan {source}: a node without an integer \"id\" "
                                       f"and a \"type\": {str(node)[:200]}")
        raw[node["id"]] = node
    sources: dict[int, list[int]] = {i: [] for i in raw}
    targets: dict[int, list[int]] = {i: [] for i in raw}
    for edge in doc.get("edges", []):
        try:
            s, t = int(edge["source"]), int(edge["target"])
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidArgumentError(f"--plan {source}: an edge without source and target: "
                                       f"{str(edge)[:200]}") from exc
        if s in raw and t in raw:
            sources[t].append(s)
            targets[s].append(t)
    outputs = {i: _row_names(n.get("outputType"), f"--plan {source}, node {i}")
               for i, n in raw.items()}

    def tables(i: int, seen: set[int]) -> list[str]:
        out: list[str] = []
        for t in targets[i]:
            if t in seen:
                continue
            seen.add(t)
            node = raw[t]
            if _kind(node["type"]) == "Sink":
                out.append(_table_of(node))
            out.extend(tables(t, seen))
        return out

    nodes = {}
    for i, n in raw.items():
        fed = [_table_of(n)] if _kind(n["type"]) == "Sink" else tables(i, set())
        nodes[i] = PlanNode(i, _kind(n["type"]), n, outputs[i],
                            tuple(outputs[s] for s in sources[i]),
                            tuple(dict.fromkeys(fed)))
    return SqlPlan(source, nodes)


def _table_of(sink: dict[str, Any]) -> str:
    table = (sink.get("dynamicTableSink") or {}).get("table") or {}
    identifier = table.get("identifier")
    if isinstance(identifier, str):
        return identifier
    match = re.search(r"table=\[([^\]]*)\]", str(sink.get("description", "")))
    return match.group(1) if match else f"sink {sink.get('id')}"


# -- names ------------------------------------------------------------------------------------


def _at(node: dict[str, Any], path: Sequence[str]) -> Any:
    value: Any = node
    for part in path:
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def key_names(node: PlanNode) -> list[str] | None:
    """The names of the node's key columns (its input's), if the plan says them."""
    for path, side in _KEY_PATHS:
        indices = _at(node.raw, path)
        if isinstance(indices, list) and all(isinstance(i, int) for i in indices):
            row = node.inputs[side] if side < len(node.inputs) else node.output
            if node.kind == "Sink":
                row = node.output
            if all(0 <= i < len(row) for i in indices):
                return [row[i] for i in indices]
    return None


def _agg_call_name(call: dict[str, Any], row: Sequence[str]) -> str:
    internal = str(call.get("internalName") or call.get("name") or "agg")
    function = re.sub(r"^\$+|\$\d+$", "", internal).lower()
    args = [row[i] if 0 <= i < len(row) else f"${i}" for i in call.get("argList", [])]
    inner = ", ".join(args) if args else "*"
    if call.get("distinct"):
        inner = f"distinct {inner}"
    text = f"{function}({inner})"
    filter_arg = call.get("filterArg", -1)
    if isinstance(filter_arg, int) and filter_arg >= 0:
        text += f" filter {row[filter_arg] if filter_arg < len(row) else f'${filter_arg}'}"
    return text


def accumulator_names(node: PlanNode) -> list[str] | None:
    """One name per accumulator field of an aggregate node, in Flink's order.

    Each call's fields, the input count a retracting aggregate adds when it has no
    ``COUNT(*)``, then one field per distinct view (calls with ``DISTINCT`` over the same
    arguments share one).
    """
    calls = node.raw.get("aggCalls")
    if calls is None:
        groups = _at(node.raw, ("overSpec", "groups"))
        if isinstance(groups, list):
            calls = [c for g in groups for c in g.get("aggCalls", [])]
    if not isinstance(calls, list) or not calls:
        return None
    row = node.inputs[0] if node.inputs else ()
    local = node.raw.get("localAggInputRowType")
    if local is not None:  # a global aggregate's calls index its local aggregate's input
        row = _row_names(local, f"node {node.id}")
    bounded = any((g.get("lowerBound") or {}).get("kind") == "BOUNDED_WINDOW"
                  for g in _at(node.raw, ("overSpec", "groups")) or [])
    retract = node.raw.get("aggCallNeedRetractions") or [
        bool(node.raw.get("needRetraction")) or bounded] * len(calls)
    names: list[str] = []
    distinct: dict[tuple[int, ...], str] = {}
    for call, retracts in zip(calls, retract, strict=False):
        name = _agg_call_name(call, row)
        function = re.sub(r"^\$+|\$\d+$", "", str(call.get("internalName", ""))).upper()
        buffers = (_RETRACT_BUFFERS if retracts else {}).get(function) or _BUFFERS.get(function)
        names.extend(f"{name}.{b}" for b in buffers) if buffers else names.append(name)
        if call.get("distinct"):
            key = tuple(call.get("argList", []))
            distinct.setdefault(key, "distinct(" + ", ".join(
                row[i] if 0 <= i < len(row) else f"${i}" for i in key) + ")")
    if any(retract) and not any(c.get("internalName") == "$COUNT$1" and not c.get("argList")
                                for c in calls):
        names.append("count(*)")  # the input count a retracting aggregate keeps
    names.extend(distinct.values())
    return names


def _tuple_args(spec: str) -> list[str] | None:
    """The field specs of a ``tuple<...>`` spec (``None`` for another type)."""
    if not spec.startswith("tuple<") or not spec.endswith(">"):
        return None
    return spec_arguments(spec[6:-1])


def tuple_names_of(spec: str) -> list[str] | None:
    """The field names a plan gave a ``tuple<...>`` spec (``%XX`` decoded), or ``None``."""
    args = _tuple_args(spec)
    if not args or ":" not in args[0].split("<", 1)[0]:
        return None
    return [urllib.parse.unquote(a.partition(":")[0]) for a in args]


def _named(spec: str, names: Sequence[str] | None) -> str | None:
    """``spec`` (a tuple) with its fields named ``names``; ``None`` if the widths differ."""
    args = _tuple_args(spec)
    if args is None or names is None or len(args) != len(names) or len(set(names)) != len(names):
        return None
    return "tuple<" + ",".join(f"{quote_name(n)}:{a}" for n, a in zip(names, args, strict=True)
                               ) + ">"


def _records(spec: str, rows: Sequence[tuple[str, ...]]) -> str:
    """``spec`` with every tuple as wide as exactly one of ``rows`` named by it, at any depth."""
    args = _tuple_args(spec)
    if args is not None:
        fits = {r for r in rows if r and len(r) == len(args)}
        if len(fits) == 1:
            named = _named(spec, next(iter(fits)))
            if named is not None:
                return named
        return "tuple<" + ",".join(_records(a, rows) for a in args) + ">"
    for head in ("list<", "map<"):
        if spec.startswith(head) and spec.endswith(">"):
            inner = spec_arguments(spec[len(head):-1])
            return head + ",".join(_records(a, rows) for a in inner) + ">"
    return spec


def sort_names(node: PlanNode) -> list[str] | None:
    """The names of a rank's sort key columns (the key of its ``data-state`` maps)."""
    fields = _at(node.raw, ("orderBy", "fields")) or _at(node.raw, ("sortSpec", "fields"))
    row = node.inputs[0] if node.inputs else ()
    if not isinstance(fields, list) or not all(0 <= f.get("index", -1) < len(row)
                                               for f in fields):
        return None
    return [row[f["index"]] for f in fields]


def _primary_key_names(node: PlanNode) -> list[str] | None:
    """An update-fast Top-N's unique key columns (the key of its ``data-state-with-update``)."""
    keys = _at(node.raw, ("rankStrategy", "primaryKeys"))
    row = node.inputs[0] if node.inputs else ()
    if not isinstance(keys, list) or not all(isinstance(k, int) and 0 <= k < len(row)
                                             for k in keys):
        return None
    return [row[k] for k in keys]


def _state_named(node: PlanNode, state: StateMetadata) -> StateMetadata:
    """A keyed state's types with the fields the plan names named."""
    if state.name in _ACCUMULATORS:
        return replace(state, value_type=_named(state.value_type, accumulator_names(node))
                       or state.value_type)
    if state.name == "sorted-map" and node.kind == "Rank":  # sort key -> count (retract Top-N)
        value = state.value_type
        if value.startswith("map<") and value.endswith(">"):
            key, count = spec_arguments(value[4:-1])
            value = f"map<{_named(key, sort_names(node)) or key},{count}>"
        return replace(state, value_type=value)
    if state.name.startswith(_NOT_RECORDS):
        return state
    rows = [node.inputs[0]] if node.inputs else []
    lowered = state.name.lower()
    if len(node.inputs) == 2 and ("left" in lowered or "right" in lowered):
        rows = [node.inputs[0 if "left" in lowered else 1]]
    value, user_key = state.value_type, state.user_key_type
    if user_key is not None and state.name == "data-state-with-update":
        user_key = _named(user_key, _primary_key_names(node)) or user_key
    elif user_key is not None and node.kind in ("Rank", "WindowRank"):
        user_key = _named(user_key, sort_names(node)) or user_key
    elif user_key is not None:
        user_key = _records(user_key, rows)
    if not (node.kind == "Join" and state.kind == "map"):  # a join's map values are counts
        value = _records(value, rows)
    return replace(state, value_type=value, user_key_type=user_key)


def _sql_operators(ops: Iterable[OperatorMetadata]) -> list[tuple[OperatorMetadata, str, int]]:
    out = []
    for op in ops:
        match = _OPERATOR_NAME.fullmatch(op.name or "")
        if match is not None:
            out.append((op, match.group(1), int(match.group(2))))
    return out


def named_by_plan(metadata: CheckpointMetadata, plan: SqlPlan
                  ) -> tuple[CheckpointMetadata, PlanNames]:
    """``metadata`` with its SQL operators named by ``plan``, and what was (not) named.

    An error (:class:`InvalidArgumentError`) when fewer than half of the snapshot's SQL
    operators meet a node of the plan, or two offsets of ids fit equally well: the plan is not
    this job's.
    """
    sql = _sql_operators(metadata.operators)
    by_kind: dict[str, list[int]] = {}
    for node in plan.nodes.values():
        by_kind.setdefault(node.kind, []).append(node.id)
    votes: Counter[int] = Counter()
    for _, kind, number in sql:
        for node_id in by_kind.get(kind, []):
            votes[number - node_id] += 1
    if not sql:
        raise InvalidArgumentError(
            f"--plan {plan.source}: no operator of the snapshot has a name Flink gives SQL "
            f"operators (Kind[N]); Flink 1.x stores no operator names: a plan names nothing "
            f"there")
    if not votes:
        raise InvalidArgumentError(
            f"--plan {plan.source}: no operator of the snapshot meets a node of the plan (SQL "
            f"operators named Kind[N] by Flink: {len(sql)}): not this job's plan")
    (offset, best), *rest = votes.most_common(2) + [(0, 0)]
    if rest[0][1] == best:
        raise InvalidArgumentError(
            f"--plan {plan.source}: the plan's node ids fit the snapshot's operators equally "
            f"well at two offsets ({offset}, {rest[0][0]}): not this job's plan")
    if 2 * best < len(sql):
        raise InvalidArgumentError(
            f"--plan {plan.source}: only {best} of the snapshot's {len(sql)} SQL operators meet "
            f"a node of their kind in it (at the offset of ids that fits best, {offset}): not "
            f"this job's plan")
    names = PlanNames(offset)
    operators = list(metadata.operators)
    index = {op.uid: i for i, op in enumerate(operators)}
    for op, kind, number in sql:
        found = plan.nodes.get(number - offset)
        if found is None or (found.kind != kind and kind not in _HELPERS):
            names.unnamed.append(f"{op.name}: no node {number - offset} of kind {kind} in "
                                 f"the plan")
            continue
        node = found
        names.matched[op.uid] = node.id
        key_type = op.key_type
        if key_type is not None:
            key_type = _named(key_type, key_names(node)) or key_type
        states = tuple(_state_named(node, s) if s.scope == "keyed" else s for s in op.states)
        operators[index[op.uid]] = replace(op, key_type=key_type, states=states,
                                           plan=f"node {node.id}: {node.label}")
        if key_type is not None and _tuple_args(key_type) and key_type == op.key_type:
            names.unnamed.append(f"{op.name}: the key's fields")
        names.unnamed.extend(f"{op.name}: {s.name}'s fields" for s in states
                             if s.scope == "keyed" and s.name in _ACCUMULATORS
                             and _tuple_args(s.value_type)
                             and tuple_names_of(s.value_type) is None)
    return replace(metadata, operators=tuple(operators)), names
