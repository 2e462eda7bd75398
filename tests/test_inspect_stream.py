"""``inspect --key-groups`` of a Flink snapshot counts it piece by piece (issue 45, item 1).

The histogram needs each key group's entries and bytes, not the entries themselves: the local
engine counts the keyed streams run by run (:func:`formats.open.open_in_runs`, as ``rescale
--out`` plans) instead of holding the snapshot decoded. The view is the same as decoding it
whole, with small runs and with the default ones, on the fixture snapshots that
``test_export_stream`` chooses from each set's expected.json (at its lowest parallelism); and
a snapshot far bigger decoded than a process's memory limit is counted under that limit.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from big_snapshot import KEYS, run_limited, value
from cli_support import run_json
from flink_fixtures import expected
from test_export_stream import CASES as ALL_CASES

import formats.ops.key_group_runs as runs_module
from formats.engines import Engine

#: export's cases at each set's lowest parallelism (the rescaled snapshots' key groups are
#: export's concern: a subtask's first key group elsewhere than 0)
CASES = [(s, snap) for s, snap in ALL_CASES if snap["parallelism"] == min(
    x["parallelism"] for x in expected(s)["snapshots"])]


@pytest.mark.parametrize(("fixture", "snap"), CASES,
                         ids=[f"{s.name}:{snap['path']}" for s, snap in CASES])
def test_counted_in_runs_the_key_groups_are_the_decoded_ones(
        fixture: Path, snap: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(fixture / snap["path"])
    real = Engine.open_checkpoint
    opened: list[bool] = []

    def recorded(self: Engine, location: str, **options: Any) -> Any:
        opened.append(options.get("rewrite", False))
        return real(self, location, **options)

    def whole(self: Engine, location: str, **options: Any) -> Any:
        return real(self, location, **{**options, "rewrite": False})  # decoded at open

    monkeypatch.setattr(Engine, "open_checkpoint", recorded)
    streamed = run_json("inspect", path, "--key-groups")
    monkeypatch.setattr(runs_module, "CHUNK_BYTES", 64)  # runs of a few key groups
    small = run_json("inspect", path, "--key-groups")
    assert opened == [True, True]  # counted run by run
    monkeypatch.setattr(Engine, "open_checkpoint", whole)
    assert streamed == small == run_json("inspect", path, "--key-groups")



def test_a_snapshot_far_bigger_than_the_memory_limit_is_counted(big_savepoint: Path) -> None:
    done = run_limited("--output", "json", "inspect", str(big_savepoint), "--key-groups")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    entries = sum(s["entries"] for op in document["operators"] for s in op["states"])
    assert entries == KEYS, document["operators"]


def test_a_key_of_a_snapshot_far_bigger_than_the_memory_limit_is_looked_up(
        big_savepoint: Path) -> None:
    """inspect --key and history read the key's key group alone (``decode=False``): under the
    limit, the value whole."""
    document = json.loads(_limited_ok("--output", "json", "inspect", str(big_savepoint),
                                      "--key", "key-7"))
    (state,) = document["lookup"]["states"]
    (entry,) = state["entries"]
    assert base64.b64decode(entry["value"]) == value(7)
    document = json.loads(_limited_ok("--output", "json", "history", str(big_savepoint),
                                      "--key", "key-7"))
    (snapshot,) = document["snapshots"]
    assert base64.b64decode(snapshot["values"][0]["value"]) == value(7)


def _limited_ok(*args: str) -> str:
    done = run_limited(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout
