"""``inspect --key`` reads as one key's state per operator, fits a screen, and cuts long values
saying so (issue 32); times and durations read as times and durations."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import run
from flink_fixtures import expected, fixture_sets, snapshots
from test_inspect_fits_a_screen import SCREEN, sql_like_job

from cli.values import format_duration, format_epoch_ms, format_value
from formats.open import open_checkpoint
from formats.ops.state_scan import lookup

SAMPLE = str(Path(__file__).resolve().parent.parent / "sample_checkpoints" / "v1"
             / "keyed-all-kinds-p2")


def _types_snapshot() -> tuple[Path, str]:
    """A types fixture snapshot and a key held by two keyed operators (windows and POJOs)."""
    sets = [s for s in fixture_sets("types") if "window-agg" in expected(s)["operators"]]
    if not sets:
        pytest.fail("no types fixture with a window operator (set STATECTL_FLINK_TYPES_FIXTURES)")
    snap = expected(sets[0])["snapshots"][0]
    key = expected(sets[0])["operators"]["pojo-keyed"]["keyed_states"]["last-event"][
        "entries"][0][0]
    return sets[0] / snap["path"], key


def _blocks(out: str) -> dict[str, list[str]]:
    """The lines under each operator's header (``uid: key K is in key group ...``)."""
    blocks: dict[str, list[str]] = {}
    current = None
    for line in out.splitlines()[1:]:
        if not line.startswith(" "):
            current = line.split(":", 1)[0]
            blocks[current] = []
        elif current is not None:
            blocks[current].append(line)
    return blocks


def test_a_key_of_several_operators_is_shown_per_operator() -> None:
    root, key = _types_snapshot()
    code, out, err = run("inspect", str(root), "--key", key)
    assert code == 0, err
    blocks = _blocks(out)
    assert {"window-agg", "pojo-keyed"} <= set(blocks), out
    checkpoint = open_checkpoint(str(root))
    found = lookup(checkpoint, key)
    for state in found.states:  # each state under its own operator's header
        names = set()
        for line in blocks[state.uid]:
            text = line.strip()
            if text.endswith(": no entry"):
                names |= set(text[:-len(": no entry")].split(", "))
            else:
                names.add(text.split(":", 1)[0].split(" @ ", 1)[0])
        assert state.state in names, (state.uid, state.state, out)
    # the empty states of an operator on one line, under it
    assert any(line.endswith(": no entry") and "_timer_state" in line
               for line in blocks["pojo-keyed"]), out


def test_long_values_are_cut_at_the_width_and_say_how_much_is_left() -> None:
    root, key = _types_snapshot()
    code, out, err = run("inspect", str(root), "--key", key, "--state", "recent", "--width", "60")
    assert code == 0, err
    line = next(line for line in out.splitlines() if line.startswith("  recent:"))
    assert len(line) <= 60, line
    whole = format_value(next(e.value for s in lookup(open_checkpoint(str(root)), key,
                                                      ["recent"]).states for e in s.entries))
    shown, _, rest = line[len("  recent: "):].partition("… (+")
    assert whole.startswith(shown)
    assert len(shown) + int(rest.split(" ", 1)[0].replace(",", "")) == len(whole)
    code, full, _ = run("inspect", str(root), "--key", key, "--state", "recent", "--full")
    assert code == 0 and f"  recent: {whole}" in full.splitlines()


@pytest.mark.parametrize("args", [["--width", "80"], ["--full"]])
def test_width_and_full_need_key(args: list[str]) -> None:
    code, _out, err = run("inspect", SAMPLE, *args)
    assert code == 2 and "--key" in err


def test_the_largest_fixture_job_and_a_forty_operator_job_fit_a_screen(tmp_path: Path) -> None:
    sets = [(s, snap) for s, snap in snapshots("heap", "rocksdb", "types")]
    if not sets:
        pytest.fail("no Flink fixtures")
    fixture_set, snap = max(sets, key=lambda pair: len(expected(pair[0])["operators"]))
    some_key = next(iter(next(
        op for op in expected(fixture_set)["operators"].values()
        if op.get("keyed_states"))["keyed_states"].values()))["entries"][0][0]
    code, out, err = run("inspect", str(fixture_set / snap["path"]), "--key", str(some_key))
    assert code == 0, err
    assert len(out.splitlines()) <= SCREEN, out
    sql_like_job(tmp_path / "c")
    code, out, err = run("inspect", str(tmp_path / "c"), "--key", "agg-3-key-7")
    assert code == 0, err
    assert len(out.splitlines()) <= SCREEN, out
    assert "agg-3: key agg-3-key-7 is in key group" in out


def test_ttl_shows_the_last_access_as_a_time_and_the_ttl_as_a_duration() -> None:
    code, out, _ = run("inspect", SAMPLE, "--key", "user-34", "--state", "recent_events")
    assert code == 0 and "(last access 2023-11-14T22:04:12.631Z to 2023-11-14T22:05:43.558Z)" in out
    code, out, _ = run("inspect", SAMPLE, "--now", "2023-11-14T23:05:00")
    assert code == 0 and "│ 1 h │" in out.replace("  ", " ").replace("  ", " ")


@pytest.mark.parametrize(("ms", "text"), [
    (0, "0 ms"), (999, "999 ms"), (1500, "1.5 s"), (60_000, "1 min"), (61_000, "1 min 1 s"),
    (3_600_000, "1 h"), (90_061_000, "1 d 1 h"), (7 * 86_400_000, "7 d")])
def test_durations_read_as_durations(ms: int, text: str) -> None:
    assert format_duration(ms) == text


def test_epoch_millis_read_as_iso_times() -> None:
    assert format_epoch_ms(1_700_000_000_000) == "2023-11-14T22:13:20Z"
    assert format_epoch_ms(1_700_000_000_007) == "2023-11-14T22:13:20.007Z"
    assert format_epoch_ms(10**18) == f"{10**18} ms"  # beyond year 9999: as it is


def test_one_quoting_rule_typed_scalars_plain_strings_quoted_when_not_a_word() -> None:
    import datetime
    import uuid

    assert format_value(datetime.date(2023, 11, 15)) == "2023-11-15"
    assert format_value(uuid.UUID(int=1)) == "00000000-0000-0000-0000-000000000001"
    assert format_value("ACTIVE") == "ACTIVE"
    assert format_value("two words") == '"two words"'
    assert format_value("42") == '"42"'  # a string that would read back as a number
