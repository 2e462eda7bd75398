"""Write the field reference of docs/json.md from the JSON Schema files beside this script.

``python docs/schema/render.py`` rewrites the part of docs/json.md between the two markers;
``--check`` only compares and exits 1 when the document is out of date (the test suite runs
it: ``tests/test_json_contract.py``). ``make json-docs`` runs the first.

Each command's schema becomes a table of its fields, nested fields by their path
(``operators[].states[].kind``); a reference into ``common.json`` is named, not expanded, and
the shared definitions have tables of their own.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DOC = HERE.parent / "json.md"
BEGIN = "<!-- generated from docs/schema/ by docs/schema/render.py: edit the schemas -->"
END = "<!-- end of generated reference -->"
#: The documents in the order the reference lists them.
ORDER = ("inspect", "query", "history", "rescale", "diff", "verify", "export", "export-manifest",
         "convert", "compat", "migrate",
         "build", "snapshot-list", "snapshot-take", "snapshot-release", "snapshot-prune",
         "trace", "trace-list-examples", "browse")


def _load() -> dict[str, dict[str, Any]]:
    schemas = {p.stem: json.loads(p.read_text()) for p in sorted(HERE.glob("*.json"))}
    missing = set(schemas) - set(ORDER) - {"common"}
    if missing:
        raise SystemExit(f"render.py: add {sorted(missing)} to ORDER")
    return schemas


def _shared_name(ref: str) -> str | None:
    """``common.json#/$defs/identity`` → ``identity``; a reference elsewhere: ``None``."""
    if ref.startswith("common.json#/$defs/"):
        return ref.rsplit("/", 1)[1]
    return None


def _resolve(schema: dict[str, Any], root: dict[str, Any], schemas: dict[str, Any]
             ) -> dict[str, Any]:
    """Follow a reference into this file or another command's file (not into common)."""
    ref = schema.get("$ref")
    if ref is None or _shared_name(ref) is not None:
        return schema
    file, _, pointer = ref.partition("#")
    target: Any = schemas[file.removesuffix(".json")] if file else root
    for part in pointer.strip("/").split("/"):
        target = target[part]
    merged = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    return _resolve(merged, root, schemas)


def _type(schema: dict[str, Any], root: dict[str, Any], schemas: dict[str, Any]) -> str:
    ref = schema.get("$ref")
    if ref is not None and (name := _shared_name(ref)) is not None:
        return f"[{name}](#{name})"
    schema = _resolve(schema, root, schemas)
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    if "oneOf" in schema:
        return " \\| ".join(_type(s, root, schemas) for s in schema["oneOf"])
    kind = schema.get("type")
    if kind == "array" and "items" in schema:
        return f"array of {_type(schema['items'], root, schemas)}"
    if kind == "object" and "additionalProperties" in schema and isinstance(
            schema["additionalProperties"], dict):
        return f"object of {_type(schema['additionalProperties'], root, schemas)}"
    if isinstance(kind, list):
        return " \\| ".join(kind)
    return kind or "any"


def _properties(schema: dict[str, Any], root: dict[str, Any], schemas: dict[str, Any]
                ) -> tuple[dict[str, Any], set[str]]:
    schema = _resolve(schema, root, schemas)
    properties = dict(schema.get("properties", {}))
    required = set(schema.get("required", ()))
    for part in schema.get("allOf", ()):
        more, more_required = _properties(part, root, schemas)
        properties = {**more, **properties}
        required |= more_required
    return properties, required


def _rows(schema: dict[str, Any], root: dict[str, Any], schemas: dict[str, Any],
          prefix: str = "") -> list[str]:
    rows = []
    properties, required = _properties(schema, root, schemas)
    for name, field in properties.items():
        path = f"{prefix}{name}"
        description = field.get("description") or _resolve(field, root, schemas).get(
            "description", "")
        # an optional field says itself when it is there ("Present when ...")
        optional = "" if name in required or description.startswith("Present when") \
            else " (when asked for)"
        escaped = description.replace("|", "\\|")
        rows.append(f"| `{path}` | {_type(field, root, schemas)} | {escaped}{optional} |")
        inner = _resolve(field, root, schemas)
        if "$ref" in field and _shared_name(field["$ref"]) is not None:
            continue
        if inner.get("type") == "array" and isinstance(inner.get("items"), dict):
            items = inner["items"]
            if not ("$ref" in items and _shared_name(items["$ref"]) is not None):
                rows += _rows(items, root, schemas, f"{path}[].")
        elif inner.get("type") == "object" or "properties" in inner or "allOf" in inner:
            rows += _rows(inner, root, schemas, f"{path}.")
    return rows


def _table(rows: list[str]) -> list[str]:
    return ["| field | type | what |", "|---|---|---|", *rows] if rows else []


def render() -> str:
    """The generated reference: one table per document, then the shared definitions."""
    schemas = _load()
    lines = [BEGIN, ""]
    for name in ORDER:
        schema = schemas[name]
        lines += [f"### {schema['title']}", "", f"`docs/schema/{name}.json`: "
                  f"{schema['description']}", ""]
        lines += _table(_rows(schema, schema, schemas)) + [""]
    common = schemas["common"]
    lines += ["### Shared definitions", "", f"`docs/schema/common.json`: "
              f"{common['description']}", ""]
    for name, definition in common["$defs"].items():
        lines += [f"#### {name}", "", definition.get("description", ""), ""]
        resolved = definition if "oneOf" not in definition else next(
            (d for d in definition["oneOf"] if d.get("type") == "object"), definition)
        rows = _rows(resolved, common, schemas)
        lines += (_table(rows) if rows
                  else [f"Type: {_type(definition, common, schemas)}."]) + [""]
    lines.append(END)
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    text = DOC.read_text()
    if BEGIN not in text or END not in text:
        print(f"{DOC}: the markers of the generated reference are missing")
        return 1
    before, rest = text.split(BEGIN, 1)
    after = rest.split(END, 1)[1]
    updated = before + render() + after
    if "--check" in argv:
        if updated != text:
            print(f"{DOC} is out of date with docs/schema/: run `make json-docs`")
            return 1
        return 0
    DOC.write_text(updated)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
