"""Real Flink restores what ``statectl migrate`` writes, every value intact (issue 43).

Each case of ``tests/flink_upgrade.py`` that Flink refuses and statectl fixes is migrated
(``migrate OLD --like NEW``), then restored by Flink into the new job version -- on the heap
and the RocksDB backend, without ``allowNonRestoredState`` -- which dumps every key's state
through its own state handles (``restore_and_dump``). The dump must equal the one the old job
wrote of OLD (``old-state.json``), operator names as the new job has them:

* a Flink 1.20 job's POJO with ``java.time`` fields (Kryo 2) and ``List``/``Map`` fields, for
  the same job on Flink 2.3 (which Flink refuses);
* a POJO field turned from ``int`` into ``long``;
* a renamed uid (``--map``) and a dropped operator (``--drop``).

Flink's own restores of the unmigrated OLD failed for every one of them
(``test_compat_flink.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cli_support import run_json
from flink_upgrade import (
    BACKENDS,
    CROSS_RELEASE,
    RestoreOutcome,
    RestoreRequest,
    UpgradeCase,
    load_state,
    restore_and_dump_many,
    upgrade_case,
)

VERSION = "2.3.0"
#: (case, migrate's options, OLD's operator uid -> the new job's, OLD's operators dropped)
CASES: list[tuple[str, tuple[str, ...], dict[str, str], set[str]]] = [
    (CROSS_RELEASE, (), {}, set()),
    ("pojo-field-type-int-to-long", (), {}, set()),
    ("uid-renamed", ("--map", "stateful=stateful-v2"), {"stateful": "stateful-v2"}, set()),
    ("operator-dropped", ("--drop", "second"), {}, {"second"}),
]


@pytest.fixture(scope="module")
def restored(tmp_path_factory: pytest.TempPathFactory
             ) -> dict[tuple[str, str], tuple[UpgradeCase, RestoreOutcome]]:
    """Every case migrated, then restored on both backends in one JVM."""
    requests, cases = [], []
    for name, options, _, _ in CASES:
        case = upgrade_case(name)
        out = tmp_path_factory.mktemp(name) / "migrated"
        run_json("migrate", str(case.old), "--like", str(case.new), "--out", str(out), *options)
        for backend in BACKENDS:
            requests.append(RestoreRequest(name, out, backend))
            cases.append(case)
    outcomes = restore_and_dump_many(VERSION, requests)
    return {(r.case, r.backend): (c, o) for r, c, o in zip(requests, cases, outcomes, strict=True)}


def _renamed(entries: list[dict[str, Any]], uids: dict[str, str], dropped: set[str]
             ) -> list[dict[str, Any]]:
    out = [{**e, "operator": uids.get(e["operator"], e["operator"])} for e in entries
           if e["operator"] not in dropped]
    return sorted(out, key=lambda e: (e["operator"], e["state"], repr(e["key"])))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("name", "options", "uids", "dropped"), CASES, ids=[c[0] for c in CASES])
def test_flink_restores_the_migrated_savepoint_with_every_value(
        restored: dict[tuple[str, str], tuple[UpgradeCase, RestoreOutcome]], name: str,
        options: tuple[str, ...], uids: dict[str, str], dropped: set[str], backend: str) -> None:
    case, outcome = restored[(name, backend)]
    assert case.outcome["restored"] is False  # Flink refused OLD itself
    assert outcome.restored, (outcome.exception, outcome.message, outcome.causes)
    old = load_state(Path(case.old_state))
    assert old, "the old job dumped no state"
    after = sorted(outcome.state, key=lambda e: (e["operator"], e["state"], repr(e["key"])))
    assert after == _renamed(old, uids, dropped)
