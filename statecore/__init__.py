"""statecore: Flink's heap state backend in Python (stdlib only).

Key groups identical to Flink's, the copy-on-write state map with incremental rehash and
versioned snapshots, and the tables built from them. The names below are the public API; the
modules hold the rest (``statecore.hashing``, ``statecore.map_trace``, ...).
"""

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
