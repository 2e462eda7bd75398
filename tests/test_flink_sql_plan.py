"""SQL state named by the job's plan (issue 44, item 3): ``--plan FILE``.

The SQL coverage job (``tests/flink_sql_coverage.py``) compiles each statement set's plan with
Flink (``StatementSet.compilePlan()``, COMPILE PLAN's JSON) beside the snapshots of the
generation that ran it. With that plan every SQL operator of the snapshot (named ``Kind[N]`` by
Flink, with keyed state) is named, and its names are the plan's: this test reads the plan's JSON
itself, simply (node types, key columns, aggregate calls, input columns), and compares.
"""

from __future__ import annotations

import functools
import html
import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from flink_coverage import FLINK_VERSION
from flink_sql_coverage import VARIANTS, SqlCoverage, sql_coverage

from cli.main import statectl
from formats.flink.sql_plan import load_plan, named_by_plan
from formats.model.arrow_types import arrow_type
from formats.open import open_checkpoint
from statecore.checkpoint import OperatorMetadata

#: the plan's fields holding each node type's key columns (indices into its first input)
KEY_FIELDS = {
    "group-aggregate": ("grouping",), "global-group-aggregate": ("grouping",),
    "incremental-group-aggregate": ("partialAggGrouping",),
    "window-aggregate": ("grouping",), "global-window-aggregate": ("grouping",),
    "group-window-aggregate": ("grouping",), "rank": ("partition", "fields"),
    "window-rank": ("partitionSpec", "fields"), "deduplicate": ("uniqueKeys",),
    "window-deduplicate": ("partitionKeys",), "changelog-normalize": ("uniqueKeys",),
    "join": ("joinSpec", "leftKeys"), "temporal-join": ("joinSpec", "leftKeys"),
    "window-join": ("joinSpec", "leftKeys"),
    "interval-join": ("intervalJoinSpec", "joinSpec", "leftKeys"),
    "over-aggregate": ("overSpec", "partition", "fields"),
    "match": ("matchSpec", "partition", "fields"), "sink": ("inputUpsertKey",)}
#: states holding the rows of the node's input (of the side their name says, for joins)
RECORDS = ("left-records", "right-records", "IntervalJoinLeftCache", "IntervalJoinRightCache",
           "left", "right", "deduplicate-state", "data-state", "data-state-with-append",
           "data-state-with-update", "window_rank", "window_deduplicate", "inputState",
           "eventQueuesStateName", "values")


@functools.cache
def _coverage() -> SqlCoverage:
    return sql_coverage(FLINK_VERSION)


def _plan_file(variant: str, backend: str = "heap") -> Path:
    return _coverage().root / "out" / f"gen-{backend}-{variant}" / "plan.json"


def _snapshot(variant: str, kind: str = "heap-savepoint-canonical") -> str:
    return str(_coverage().snapshots[f"{variant}/{kind}"])


# -- the plan, read here ---------------------------------------------------------------------


def _columns(row_type: Any) -> list[str]:
    if isinstance(row_type, dict):
        return [f["name"] for f in row_type["fields"]]
    return [m.replace("``", "`") for m in re.findall(r"`((?:[^`]|``)*)`", row_type)]


@functools.cache
def _plan(variant: str, backend: str = "heap"
          ) -> tuple[dict[int, dict[str, Any]], dict[int, list[list[str]]]]:
    """``{id: node}`` and each node's inputs' column names."""
    doc = json.loads(_plan_file(variant, backend).read_text())
    nodes = {n["id"]: n for n in doc["nodes"]}
    inputs: dict[int, list[list[str]]] = {i: [] for i in nodes}
    for edge in doc["edges"]:
        inputs[edge["target"]].append(_columns(nodes[edge["source"]]["outputType"]))
    return nodes, inputs


def _node_type(node: dict[str, Any]) -> str:
    return str(node["type"]).removeprefix("stream-exec-").rsplit("_", 1)[0]


def _camel(node_type: str) -> str:
    return "".join(p.capitalize() for p in node_type.split("-"))


def _get(node: dict[str, Any], path: tuple[str, ...]) -> Any:
    for part in path:
        node = node[part]
    return node


def _calls(node: dict[str, Any], row: list[str]) -> set[str]:
    """The node's aggregate calls as the plan writes them: ``max(price)``."""
    calls = node.get("aggCalls") or [c for g in node.get("overSpec", {}).get("groups", [])
                                     for c in g["aggCalls"]]
    out = set()
    for c in calls:
        args = ", ".join(row[i] for i in c["argList"]) or "*"
        text = f"{c['internalName'].strip('$').split('$')[0].lower()}(" \
               f"{'distinct ' if c['distinct'] else ''}{args})"
        if c["filterArg"] >= 0:
            text += f" filter {row[c['filterArg']]}"
        out.add(text)
    return out


# -- what statectl names ---------------------------------------------------------------------


def _sql_operators(operators: tuple[OperatorMetadata, ...]) -> list[OperatorMetadata]:
    return [op for op in operators if re.fullmatch(r"[A-Za-z]+\[\d+\]", op.name or "")
            and any(s.scope == "keyed" for s in op.states)]


def _structs(data_type: pa.DataType) -> list[list[str]]:
    """The field names of every struct in ``data_type``, outermost first."""
    if pa.types.is_struct(data_type):
        fields = [data_type.field(i) for i in range(data_type.num_fields)]
        return [[f.name for f in fields], *(s for f in fields for s in _structs(f.type))]
    if pa.types.is_map(data_type):
        return _structs(data_type.key_type) + _structs(data_type.item_type)
    if pa.types.is_list(data_type):
        return _structs(data_type.value_type)
    return []


def _positional(names: list[str]) -> bool:
    return names == [f"f{i}" for i in range(len(names))]


@pytest.mark.parametrize("kind", ["heap-savepoint-canonical", "rocksdb-savepoint-native"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_every_sql_operator_is_named_by_the_plans_names(variant: str, kind: str) -> None:
    """Each generation's job (one per backend, planned in one JVM) with the plan compiled
    beside it: other node ids each (the plain heap job's plan from 1, the others later)."""
    backend = kind.split("-")[0]
    checkpoint = open_checkpoint(_snapshot(variant, kind))
    plan = load_plan(_plan_file(variant, backend).read_text(), "plan.json")
    metadata, report = named_by_plan(checkpoint.metadata, plan)
    nodes, inputs = _plan(variant, backend)
    sql = _sql_operators(metadata.operators)
    assert sql and not report.unnamed, report.unnamed
    problems: list[str] = []
    for op in sql:
        kind, number = re.fullmatch(r"([A-Za-z]+)\[(\d+)\]", op.name).groups()  # type: ignore[union-attr]
        node = nodes.get(int(number) - report.offset)
        assert node is not None and op.plan is not None, op.name
        node_type = _node_type(node)
        assert _camel(node_type) == kind or kind == "SinkMaterializer", (op.name, node_type)
        rows = inputs[node["id"]] or [_columns(node["outputType"])]
        row = rows[0] if node_type != "sink" else _columns(node["outputType"])
        # the key: the plan's key columns of the node's input
        key = arrow_type(op.key_type or "json")
        if pa.types.is_struct(key):
            expected = [row[i] for i in _get(node, KEY_FIELDS[node_type])]
            if _structs(key)[0] != expected:
                problems.append(f"{op.name} key {_structs(key)[0]} != plan's {expected}")
        for state in op.states:
            if state.scope != "keyed":
                continue
            value = arrow_type(state.value_type)
            if node_type in ("rank", "window-rank") and state.kind == "map" or \
                    state.name == "sorted-map":
                # a Top-N's maps are keyed by its sort key, an update-fast one's by the unique key
                strategy = node.get("rankStrategy", {})
                columns = (strategy["primaryKeys"] if state.name == "data-state-with-update"
                           else [f["index"] for f in (node.get("orderBy")
                                                      or node["sortSpec"])["fields"]])
                keys = arrow_type(state.user_key_type or state.value_type)
                keys = keys if state.user_key_type else keys.key_type
                if _structs(keys)[0] != [row[i] for i in columns]:
                    problems.append(f"{op.name}/{state.name}: keys {_structs(keys)[0]}, not "
                                    f"the plan's {[row[i] for i in columns]}")
            if state.name in ("accState", "window-aggs"):
                local = node.get("localAggInputRowType")
                calls = _calls(node, _columns(local) if local is not None else row)
                names = _structs(value)[0]
                bases = {re.sub(r"\.(sum|count|acc|delimiter)$", "", n) for n in names}
                extra = {b for b in bases - calls
                         if b != "count(*)" and not b.startswith("distinct(")}
                if extra or not calls <= bases:
                    problems.append(f"{op.name}/{state.name} {names}: not the plan's calls "
                                    f"{sorted(calls)}")
            elif state.name in RECORDS:
                side = rows[1] if "right" in state.name.lower() and len(rows) == 2 else rows[0]
                types = [value] + ([arrow_type(state.user_key_type)]
                                   if state.user_key_type else [])
                if not any(_structs(t) for t in types):
                    continue  # no rows kept (keep-first deduplication on processing time)
                named = [s for t in types for s in _structs(t) if not _positional(s)]
                records = [s for s in named if s == side]
                if not records or any(s != side and len(s) == len(side) for s in named):
                    problems.append(f"{op.name}/{state.name} {named}: not the input's {side}")
    assert not problems, "\n".join(problems)


def _unnamed(value: Any) -> Any:
    """``value`` with every struct's field names dropped (a list of its values)."""
    if isinstance(value, dict):
        return [_unnamed(v) for v in value.values()]
    if isinstance(value, list | tuple):
        return [_unnamed(v) for v in value]
    return value


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(statectl, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_query_inspect_and_export_show_the_names(tmp_path: Path) -> None:
    snapshot, plan = _snapshot("plain"), str(_plan_file("plain"))
    nodes, _ = _plan("plain")
    aggregate = next(n for n in nodes.values() if n["type"].startswith("stream-exec-group-agg")
                     and "AVG(price)" in n["description"] and "MAX(price)" in n["description"])
    code, out, err = _run("--output", "json", "inspect", snapshot, "--plan", plan)
    assert code == 0, err
    operators = json.loads(out)["operators"]
    named = [op for op in operators if op.get("plan", "").startswith(f"node {aggregate['id']}:")]
    assert len(named) == 1 and named[0]["key_type"] == "tuple<auction:int64>", named
    assert "named by the plan" in err
    operator = named[0]["operator"]["name"]
    code, out, err = _run("--output", "json", "query", snapshot, "--plan", plan,
                          f'SELECT key_auction, value."max(price)" AS mx, value."avg(price).sum" '
                          f'AS s FROM "{operator}".accState ORDER BY key_auction LIMIT 1')
    assert code == 0, err
    row = json.loads(out)["rows"][0]
    assert set(row) == {"key_auction", "mx", "s"} and row["mx"] >= 1, row
    code, out, err = _run("export", snapshot, "--plan", plan, "--out", str(tmp_path / "x"))
    assert code == 0, err
    uid = named[0]["operator"]["id"]
    table = pq.read_table(tmp_path / "x" / uid / "accState.parquet")
    assert table.schema.field("key").type.field(0).name == "auction"
    assert "max(price)" in [f.name for f in table.schema.field("value").type]
    # the names change nothing else: every file holds what it holds without a plan
    code, out, err = _run("export", snapshot, "--out", str(tmp_path / "y"))
    assert code == 0, err
    files = sorted(p.relative_to(tmp_path / "y") for p in (tmp_path / "y").rglob("*.parquet"))
    assert files and files == sorted(p.relative_to(tmp_path / "x")
                                     for p in (tmp_path / "x").rglob("*.parquet"))
    changed = [str(f) for f in files if _unnamed(pq.read_table(tmp_path / "x" / f).to_pylist())
               != _unnamed(pq.read_table(tmp_path / "y" / f).to_pylist())]
    assert not changed, changed
    code, out, err = _run("inspect", snapshot, "--plan", plan, "--key", str(row["key_auction"]))
    assert code == 0 and '"max(price)": ' + str(row["mx"]) in out, out[-2000:] + err
    svg = tmp_path / "screen.svg"  # browse: the first state's page (the operator's accState)
    code, _, err = _run("browse", snapshot, "--plan", plan, "--svg", str(svg), "--press",
                        "down enter", "--size", "120x30")
    assert code == 0, err
    assert "max(price)" in html.unescape(svg.read_text()), "browse shows no plan's names"


def test_without_a_plan_the_names_are_positional() -> None:
    code, out, err = _run("--output", "json", "inspect", _snapshot("plain"))
    assert code == 0, err
    doc = json.loads(out)
    assert all("plan" not in op and ":" not in (op["key_type"] or "")
               for op in doc["operators"])


#: the stream graph's JSON (EXPLAIN JSON_EXECUTION_PLAN), as Flink's ``JSONGenerator`` writes it
STREAM_GRAPH = json.dumps({"nodes": [{
    "id": 7, "type": "GroupAggregate[6]", "pact": "Operator", "parallelism": 2,
    "contents": "[6]:GroupAggregate(groupBy=[auction], select=[auction, COUNT(*) AS c])",
    "predecessors": [{"id": 5, "ship_strategy": "HASH", "side": "second"}]}]})


@pytest.mark.parametrize(("text", "message"), [
    ("{not json", "not JSON"),
    ('{"nodes": 3}', "not a compiled plan of Flink"),
    (STREAM_GRAPH, "give the JSON of COMPILE PLAN"),
])
def test_an_unreadable_plan_is_a_clear_error(tmp_path: Path, text: str, message: str) -> None:
    bad = tmp_path / "plan.json"
    bad.write_text(text)
    code, _, err = _run("inspect", _snapshot("plain"), "--plan", str(bad))
    assert code == 3 and message in err and "Traceback" not in err, (code, err)
    code, _, err = _run("inspect", _snapshot("plain"), "--plan", str(tmp_path / "none.json"))
    assert code == 3 and "cannot read it" in err, (code, err)


def test_another_jobs_plan_is_refused() -> None:
    code, _, err = _run("inspect", _snapshot("plain"), "--plan", str(_plan_file("minibatch")))
    assert code == 3 and "not this job's plan" in err, (code, err)
