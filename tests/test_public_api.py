"""The public API is pinned: a change to it is a deliberate edit of this test."""

from __future__ import annotations

import statecore
from statecore import errors

PUBLIC = {
    "VOID_NAMESPACE", "CopyOnWriteStateMap", "CopyOnWriteStateMapSnapshot", "KeyGroupRange",
    "NestedStateMap", "StateEntry", "StateMap", "StateMapSnapshot", "StateTable",
    "StateTableSnapshot", "StatectlError", "TypeSerializer", "assign_key_to_parallel_operator",
    "assign_to_key_group", "compute_default_max_parallelism",
    "compute_key_group_range_for_operator_index", "compute_operator_index_for_key_group",
    "parse_type",
}


def test_statecore_all_is_pinned_and_importable() -> None:
    assert set(statecore.__all__) == PUBLIC
    for name in statecore.__all__:
        assert getattr(statecore, name) is not None


def test_every_error_is_a_statectl_error_named_error() -> None:
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, errors.StatectlError) and name.endswith("Error"), name
