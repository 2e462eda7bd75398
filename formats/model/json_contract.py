"""The version of statectl's JSON contract (``--output json``, the export manifest).

The contract is written down as JSON Schema files, one per command, in ``docs/schema/``;
``docs/json.md`` explains it and lists what each version changed. Every document carries
``schema_version``: the major number changes when a field is renamed or removed, the minor
number when fields are added.
"""

from __future__ import annotations

__all__ = ["SCHEMA_VERSION"]

SCHEMA_VERSION = "1.0"
