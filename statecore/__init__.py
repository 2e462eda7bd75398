"""statecore: Flink's heap state backend in Python (stdlib only).

Key groups identical to Flink's, the copy-on-write state map with incremental rehash and
versioned snapshots, and the tables built from them. The names below are the public API; the
modules hold the rest (``statecore.hashing``, ``statecore.map_trace``, ...).

Each name is imported from its module when first used (:func:`__getattr__`), so importing a
module of the package (``statecore.errors``) does not load the state maps (issue 45: a
command starts at once).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from statecore.copy_on_write_snapshot import CopyOnWriteStateMapSnapshot
    from statecore.copy_on_write_state_map import CopyOnWriteStateMap
    from statecore.errors import StatectlError
    from statecore.key_groups import (
        KeyGroupRange,
        assign_key_to_parallel_operator,
        assign_to_key_group,
        compute_default_max_parallelism,
        compute_key_group_range_for_operator_index,
        compute_operator_index_for_key_group,
    )
    from statecore.nested_state_map import NestedStateMap
    from statecore.serializers import VOID_NAMESPACE, TypeSerializer, parse_type
    from statecore.state_map import StateEntry, StateMap, StateMapSnapshot
    from statecore.state_table import StateTable, StateTableSnapshot

__all__ = [
    "VOID_NAMESPACE",
    "CopyOnWriteStateMap",
    "CopyOnWriteStateMapSnapshot",
    "KeyGroupRange",
    "NestedStateMap",
    "StateEntry",
    "StateMap",
    "StateMapSnapshot",
    "StateTable",
    "StateTableSnapshot",
    "StatectlError",
    "TypeSerializer",
    "assign_key_to_parallel_operator",
    "assign_to_key_group",
    "compute_default_max_parallelism",
    "compute_key_group_range_for_operator_index",
    "compute_operator_index_for_key_group",
    "parse_type",
]

#: The module of each public name.
_MODULES = {
    "CopyOnWriteStateMapSnapshot": "copy_on_write_snapshot",
    "CopyOnWriteStateMap": "copy_on_write_state_map",
    "StatectlError": "errors",
    "KeyGroupRange": "key_groups",
    "assign_key_to_parallel_operator": "key_groups",
    "assign_to_key_group": "key_groups",
    "compute_default_max_parallelism": "key_groups",
    "compute_key_group_range_for_operator_index": "key_groups",
    "compute_operator_index_for_key_group": "key_groups",
    "NestedStateMap": "nested_state_map",
    "VOID_NAMESPACE": "serializers",
    "TypeSerializer": "serializers",
    "parse_type": "serializers",
    "StateEntry": "state_map",
    "StateMap": "state_map",
    "StateMapSnapshot": "state_map",
    "StateTable": "state_table",
    "StateTableSnapshot": "state_table",
}


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use (then cached in the package)."""
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module 'statecore' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"statecore.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
