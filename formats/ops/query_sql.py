"""Reading a query before running it: DuckDB's parse tree, the tables it names, its key filters.

``statectl query`` reads only what a query names (:mod:`formats.ops.query`): :func:`mentions`
lists each table a query names with the keys its ``WHERE`` filters it on (``key = ...``,
``key IN (...)``, through aliases and joins), and :func:`lists_catalog` whether it lists the
catalog (``SHOW TABLES``, ``information_schema``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from statecore.errors import StatectlError

__all__ = ["Mention", "QueryError", "lists_catalog", "mentions", "nodes", "parse"]


class QueryError(StatectlError):
    """The SQL itself is wrong (DuckDB's message): a usage error, not bad input."""


def parse(connection: Any, sql: str) -> dict[str, Any]:
    """DuckDB's parse tree of ``sql`` (``json_serialize_sql``); a syntax error: QueryError."""
    text = connection.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()[0]
    tree: dict[str, Any] = json.loads(text)
    if tree.get("error"):
        message = str(tree.get("error_message", "cannot parse the query"))
        if "Only SELECT" in message:
            message = "give one SELECT query (statectl query reads state, it never writes)"
        raise QueryError(f"SQL: {message}")
    if len(tree.get("statements", ())) != 1:
        raise QueryError("SQL: give one query (no ';' between statements)")
    return tree



def nodes(tree: Any) -> Iterator[dict[str, Any]]:
    """Every object in the parse tree, depth first."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            yield node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def _base_tables(node: Any) -> list[dict[str, Any]]:
    """The base tables directly in a FROM clause (through joins, not into subqueries)."""
    if not isinstance(node, dict):
        return []
    if node.get("type") == "BASE_TABLE":
        return [node]
    if node.get("type") == "JOIN":
        return _base_tables(node.get("left")) + _base_tables(node.get("right"))
    return []


def _conjuncts(expression: Any) -> list[dict[str, Any]]:
    if not isinstance(expression, dict):
        return []
    if expression.get("type") == "CONJUNCTION_AND":
        return [c for child in expression.get("children", []) for c in _conjuncts(child)]
    return [expression]


def _constant(expression: Any) -> Any:
    """The value of a constant expression (a literal, or one cast), else a marker."""
    if not isinstance(expression, dict):
        return _NOT_CONSTANT
    if expression.get("class") == "CONSTANT":
        literal = expression.get("literal", {})
        kind, text = literal.get("kind"), literal.get("text")
        if kind in ("STRING", "VARCHAR"):
            return text
        if kind in ("INTEGER", "BIGINT", "HUGEINT", "SMALLINT", "TINYINT", "UBIGINT",
                    "UINTEGER", "USMALLINT", "UTINYINT") and text is not None:
            return int(text)
        return _NOT_CONSTANT
    return _NOT_CONSTANT


_NOT_CONSTANT = object()


def _key_column(expression: Any, aliases: Mapping[str, dict[str, Any]],
                only: dict[str, Any] | None) -> dict[str, Any] | None:
    """The base table whose ``key`` column ``expression`` is, if it is one."""
    if not isinstance(expression, dict) or expression.get("class") != "COLUMN_REF":
        return None
    names = [n.lower() for n in expression.get("column_names", [])]
    if not names or names[-1] != "key":
        return None
    if len(names) == 1:
        return only
    return aliases.get(names[-2])


def _key_filters(select: dict[str, Any]) -> dict[int, list[Any]]:
    """Per base table of this SELECT (by ``id``): the constants its key must equal."""
    tables = _base_tables(select.get("from_table"))
    aliases = {}
    for table in tables:
        aliases[(table.get("alias") or table.get("table_name", "")).lower()] = table
    only = tables[0] if len(tables) == 1 else None
    found: dict[int, list[Any]] = {}
    for conjunct in _conjuncts(select.get("where_clause")):
        kind = conjunct.get("type")
        values: list[Any] = []
        target: dict[str, Any] | None = None
        if kind == "COMPARE_EQUAL":
            left, right = conjunct.get("left"), conjunct.get("right")
            for column, constant in ((left, right), (right, left)):
                target = _key_column(column, aliases, only)
                value = _constant(constant)
                if target is not None and value is not _NOT_CONSTANT:
                    values = [value]
                    break
            else:
                continue
        elif kind == "COMPARE_IN":
            children = conjunct.get("children", [])
            target = _key_column(children[0] if children else None, aliases, only)
            values = [_constant(c) for c in children[1:]]
            if target is None or not values or any(v is _NOT_CONSTANT for v in values):
                continue
        else:
            continue
        assert target is not None
        previous = found.get(id(target))
        # two filters on one key: both hold, so the intersection would do; the union is safe
        found[id(target)] = values if previous is None else previous + values
    return found


@dataclass(frozen=True)
class Mention:
    """A table a query names, and the keys its ``WHERE`` filters it on (``None``: all)."""

    database: str
    schema: str
    table: str
    keys: tuple[Any, ...] | None  # None: every key


def mentions(tree: dict[str, Any], default_database: str) -> list[Mention]:
    filters: dict[int, list[Any]] = {}
    for node in nodes(tree):
        if node.get("type") == "SELECT_NODE":
            filters.update(_key_filters(node))
    mentions = []
    for node in nodes(tree):
        if node.get("type") == "BASE_TABLE":
            keys = filters.get(id(node))
            mentions.append(Mention((node.get("catalog_name") or default_database).lower(),
                                     (node.get("schema_name") or "main").lower(),
                                     (node.get("table_name") or "").lower(),
                                     None if keys is None else tuple(keys)))
    return mentions


# -- the tables ------------------------------------------------------------------------------


#: what lists the catalog: DuckDB's catalog functions and schemas
_CATALOG_FUNCTIONS = ("duckdb_tables", "duckdb_columns", "duckdb_views", "duckdb_schemas",
                      "duckdb_databases")
_CATALOG_SCHEMAS = ("information_schema", "pg_catalog")


def lists_catalog(tree: dict[str, Any]) -> bool:
    """Whether a query lists tables or columns.

    ``SHOW TABLES``, ``SHOW ALL TABLES``, ``information_schema``, ``pg_catalog``,
    ``duckdb_tables()`` and the like.
    """
    for node in nodes(tree):
        kind = node.get("type")
        if kind == "SHOW_REF" and node.get("show_type") == "SHOW_SPECIAL":
            return True
        if kind == "BASE_TABLE" and (node.get("schema_name") or "").lower() in _CATALOG_SCHEMAS:
            return True
        if kind == "TABLE_FUNCTION" and str(node.get("function", {}).get(
                "function_name", "")).lower() in _CATALOG_FUNCTIONS:
            return True
    return False
