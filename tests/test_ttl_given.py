"""TTLs a Flink snapshot does not store, given with ``--ttl STATE=DURATION`` (issue 41, item 3a).

A Flink snapshot holds each TTL value's last access but not the TTL: ``inspect --now`` used to
say "no state with TTL" of a snapshot holding one. Now it names the states whose TTL it lacks,
and ``--ttl`` gives it to ``inspect --now``, ``rescale --drop-expired`` and ``browse``. The TTL
states are found in the snapshots themselves (expected.json does not list them).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from cli_support import run, run_json
from flink_fixtures import expected, require_fixtures
from test_browse import _detail, _leaves, _open
from textual.widgets import DataTable

from cli.browse import BrowseApp
from cli.params import parse_duration
from cli.values import format_epoch_ms
from formats.model.checkpoint import Checkpoint
from formats.open import open_checkpoint
from formats.ops.ttl_given import apply_ttls, resolve_ttls
from statecore.checkpoint import TTL_UNKNOWN

#: Far past every last access of the fixtures (year 2200), and before any (1970 + 1 day).
FUTURE, PAST = "7258118400000", "86400000"


def _ttl_snapshots() -> list[tuple[Path, str, str]]:
    """``(snapshot, operator uid, state)`` of each checkpoint of the types sets with a TTL
    state (the first such state)."""
    out = []
    for fixture_set in require_fixtures("types"):
        for snap in expected(fixture_set)["snapshots"]:
            if snap["kind"] != "checkpoint":
                continue
            path = fixture_set / snap["path"]
            found = [(op.uid, s.name) for op in open_checkpoint(str(path), decode=False)
                     .metadata.operators for s in op.states if s.ttl == TTL_UNKNOWN]
            if found:
                out.append((path, *found[0]))
    if not out:
        pytest.fail("no Flink snapshot with a TTL state in the types fixtures")
    return out


SNAPSHOTS = _ttl_snapshots()
IDS = [f"{p.parents[3].name}:{p.name}" for p, _, _ in SNAPSHOTS]


def _expired(document: dict[str, Any]) -> dict[str, Any]:
    expired: dict[str, Any] = document["expired"]
    return expired


@pytest.mark.parametrize(("snapshot", "uid", "state"), SNAPSHOTS, ids=IDS)
def test_inspect_now_names_the_states_whose_ttl_it_lacks(snapshot: Path, uid: str,
                                                         state: str) -> None:
    code, out, err = run("inspect", str(snapshot), "--now", FUTURE)
    assert code == 0, err
    assert "no state with TTL" not in out
    assert f"TTL unknown for {uid}/{state}" in out and "--ttl" in out, out
    expired = _expired(run_json("inspect", str(snapshot), "--now", FUTURE))
    assert expired["states"] == []
    assert [(t["operator"]["uid"], t["state"]) for t in expired["ttl_unknown"]] == [(uid, state)]


@pytest.mark.parametrize(("snapshot", "uid", "state"), SNAPSHOTS, ids=IDS)
def test_inspect_now_counts_what_expired_with_the_ttl_given(snapshot: Path, uid: str,
                                                            state: str) -> None:
    for name in (state, f"{uid}/{state}"):  # a bare name when unambiguous, or OP/STATE
        expired = _expired(run_json("inspect", str(snapshot), "--now", FUTURE,
                                    "--ttl", f"{name}=1d"))
        (share,) = expired["states"]
        assert (share["operator"]["uid"], share["state"], share["ttl"]) == (uid, state,
                                                                            86_400_000)
        assert share["entries"] > 0 and share["entries_expired"] == share["entries"]
        assert expired["ttl_unknown"] == []
    (share,) = _expired(run_json("inspect", str(snapshot), "--now", PAST,
                                 "--ttl", f"{state}=PT1H"))["states"]
    assert share["entries_expired"] == 0 and share["ttl"] == 3_600_000
    code, out, err = run("inspect", str(snapshot), "--now", FUTURE, "--ttl", f"{state}=2d")
    assert code == 0 and "TTL unknown" not in out and "2 d" in out, err


@pytest.mark.parametrize("given", ["nope=1d", "ttl-count=1 fortnight", "=1d", "ttl-count",
                                   "ttl-count=0ms"])
def test_a_ttl_that_names_no_state_with_ttl_or_no_duration_is_a_usage_error(given: str) -> None:
    snapshot, _, _ = SNAPSHOTS[0]
    code, out, err = run("inspect", str(snapshot), "--now", FUTURE, "--ttl", given)
    assert code == 2 and out == "" and err.count("\n") == 1 and "--ttl" in err, err


def test_a_state_without_ttl_and_ttl_without_now_are_refused() -> None:
    snapshot, uid, state = SNAPSHOTS[0]
    other = next(s.name for op in open_checkpoint(str(snapshot), decode=False).metadata.operators
                 if op.uid == uid for s in op.states if s.ttl is None and s.scope == "keyed")
    code, _, err = run("inspect", str(snapshot), "--now", FUTURE, "--ttl", f"{other}=1d")
    assert code == 2 and "has no TTL" in err and f"{uid}/{state}" in err, err
    code, _, err = run("inspect", str(snapshot), "--ttl", f"{state}=1d")
    assert code == 2 and "--now" in err, err


@pytest.mark.parametrize(("text", "ms"), [
    ("1h", 3_600_000), ("30m", 1_800_000), ("30min", 1_800_000), ("15s", 15_000),
    ("500ms", 500), ("2d", 172_800_000), ("1h30m", 5_400_000), ("PT1H", 3_600_000),
    ("pt15m", 900_000), ("P1DT12H", 129_600_000), ("PT0.5S", 500), ("P7D", 604_800_000),
    ("250", 250)])
def test_durations_in_every_documented_form(text: str, ms: int) -> None:
    assert parse_duration(text) == ms


@pytest.mark.parametrize("text", ["", "h", "1x", "P", "PT", "1h 2", "one hour", "-1h"])
def test_what_is_no_duration(text: str) -> None:
    assert parse_duration(text) is None


@pytest.mark.parametrize(("snapshot", "uid", "state"), SNAPSHOTS[:1], ids=IDS[:1])
def test_rescale_drop_expired_takes_the_ttl_of_a_flink_snapshot(
        snapshot: Path, uid: str, state: str, tmp_path: Path) -> None:
    code, out, err = run("rescale", str(snapshot), "-p", "3", "--drop-expired",
                         "--out", str(tmp_path / "refused"))
    assert code == 2 and f"{uid}/{state}" in err and "--ttl" in err, err
    assert not (tmp_path / "refused").exists()
    code, _, err = run("rescale", str(snapshot), "-p", "3", "--ttl", f"{state}=1d",
                       "--out", str(tmp_path / "x"))
    assert code == 2 and "--drop-expired" in err, err

    def entries(path: Path) -> dict[tuple[str, str], int]:
        document = run_json("inspect", str(path), "--all")
        return {(op["operator"]["uid"], s["state"]): s["entries"]
                for op in document["operators"] for s in op["states"]}

    before = entries(snapshot)
    result = run_json("rescale", str(snapshot), "-p", "3", "--drop-expired", "--now", FUTURE,
                      "--ttl", f"{state}=1d", "--out", str(tmp_path / "dropped"))
    assert result["result"]["entries_dropped"] == before[(uid, state)] > 0
    after = entries(tmp_path / "dropped")
    assert after[(uid, state)] == 0
    assert {k: v for k, v in after.items() if k != (uid, state)} == {
        k: v for k, v in before.items() if k != (uid, state)}
    run_json("rescale", str(snapshot), "-p", "3", "--drop-expired", "--now", PAST,
             "--ttl", f"{state}=1d", "--out", str(tmp_path / "kept"))
    assert entries(tmp_path / "kept") == before


def test_browse_shows_when_values_expire_with_the_ttl_given() -> None:
    """The tree names the TTL, the page has an ``expires`` column and the entry an ``expires``
    line: last access + TTL (Flink's ``TtlUtils.expired``); without --ttl, neither."""
    snapshot, uid, state = SNAPSHOTS[0]
    week = 7 * 24 * 3600 * 1000

    def opened(ttls: list[tuple[str, int]], decode: bool = True) -> Checkpoint:
        checkpoint = open_checkpoint(str(snapshot), decode=decode, partial=True)
        apply_ttls(checkpoint, resolve_ttls(checkpoint, ttls))
        return checkpoint

    async def scenario(ttls: list[tuple[str, int]]) -> tuple[str, list[str], str, str, str]:
        app = BrowseApp(opened(ttls, decode=False), str(snapshot),
                        decoded=lambda: opened(ttls))
        async with app.run_test(size=(160, 40)) as pilot:
            await pilot.pause()
            label = next(str(n.label) for n in _leaves(app) if n.data[1].name == state
                         and n.data[0].uid == uid)
            await _open(app, pilot, uid, state)
            table = app.query_one("#entries", DataTable)
            columns = [str(c.label) for c in table.columns.values()]
            row = [str(cell) for cell in table.get_row_at(0)]
            last = row[columns.index("last access")]
            expires = row[columns.index("expires")] if "expires" in columns else ""
            return label, columns, last, expires, _detail(app)

    label, columns, last, expires, detail = asyncio.run(scenario([(state, week)]))
    assert "TTL 7 d" in label, label
    assert "expires" in columns and expires and last, (columns, last, expires)
    page = next(iter(open_checkpoint(str(snapshot)).keyed_entries(uid, state)))
    stamp = page[3].last_access_timestamp if hasattr(page[3], "last_access_timestamp") else None
    if stamp is not None:  # a value state: the first row's own last access
        assert last == format_epoch_ms(stamp) and expires == format_epoch_ms(stamp + week)
    assert f"expires    {expires}" in detail, detail
    label, columns, _, _, detail = asyncio.run(scenario([]))
    assert "TTL ? (--ttl)" in label and "expires" not in columns and "expires" not in detail


def test_browse_takes_the_ttl_too(tmp_path: Path) -> None:
    snapshot, _, state = SNAPSHOTS[0]
    document = run_json("browse", str(snapshot), "--svg", str(tmp_path / "s.svg"),
                        "--ttl", f"{state}=7d")
    assert document["svg"] == str(tmp_path / "s.svg") and (tmp_path / "s.svg").is_file()
    code, _, err = run("browse", str(snapshot), "--svg", str(tmp_path / "t.svg"),
                       "--ttl", "nope=7d")
    assert code == 2 and "--ttl" in err, err
