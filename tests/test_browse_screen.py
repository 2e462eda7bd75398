"""``statectl browse`` as a user meets it (issue 41, item 5): the key-group chart and back keeps
the place (state, page, selected entry), ``--svg`` writes nothing but the SVG file and its one
line, the tree takes the width its names need in a wide terminal (and leaves room at 80x24),
and ``--against`` shows the other snapshot's value of a changed entry.

Flink snapshots: the heap fixture sets' canonical p2 savepoints (whatever their
``expected.json`` lists); the states and keys used are the ones ``inspect`` finds there.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_support import KEYED, run_json
from flink_fixtures import snapshots
from test_browse import _app, _detail, _leaves, _open, _screen_text, _status
from textual.widgets import DataTable, Tree

import cli.browse
from cli.browse import TextScreen
from cli.values import format_value
from statecore.serializers import VOID_NAMESPACE

REPO = Path(__file__).resolve().parent.parent


def _heap_cases() -> list[tuple[str, str]]:
    return [(f"{fixture.name}:{snap['path']}", str(fixture / snap["path"]))
            for fixture, snap in snapshots("heap")
            if "canonical" in snap["path"] and "p2" in snap["path"]]


def _largest_keyed_state(location: str) -> tuple[str, str]:
    summary = run_json("inspect", location, "--all")
    uid, state, _ = max(((op["operator"]["uid"], s["state"], s["entries"])
                         for op in summary["operators"] for s in op["states"]
                         if s["scope"] == "keyed" and s["entries"]), key=lambda t: t[2])
    return uid, state


async def _settle(app: cli.browse.BrowseApp, pilot: Any) -> None:
    """Wait for a worker (a Flink snapshot decoded for the chart) and what it hands back."""
    await app.workers.wait_for_complete()
    for _ in range(5):
        await pilot.pause(0.02)


@pytest.mark.parametrize(("name", "location"),
                         [("statectl:keyed-all-kinds-p2", KEYED), *_heap_cases()],
                         ids=lambda v: v)
def test_the_chart_and_back_keeps_state_page_and_entry(name: str, location: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """g then Escape: the same state, the same page of the same pages, the same entry
    selected (and focused): a Flink snapshot decoded whole for the chart changes nothing."""
    monkeypatch.setattr(cli.browse, "PAGE_BYTES", 200)  # several pages on a small fixture
    monkeypatch.setattr(cli.browse, "PAGE_ROWS", 8)
    uid, state = _largest_keyed_state(location)

    async def scenario() -> None:
        app = _app(location)
        async with app.run_test(size=(80, 24)) as pilot:
            await _open(app, pilot, uid, state)
            assert app.view is not None and len(app.view.pages) >= 3, name
            while app.page is not None and app.page.number < len(app.view.pages) // 2:
                await pilot.press("n")
            await pilot.press("tab")
            assert app.page is not None and app.page.rows
            for _ in range(min(2, len(app.page.rows) - 1)):
                await pilot.press("down")
            table = app.query_one("#entries", DataTable)
            before = (app.page.number, app.page.key_groups, list(app.view.pages),
                      table.cursor_row, _status(app), _detail(app))
            assert app.focused is table
            await pilot.press("g")
            await _settle(app, pilot)
            assert isinstance(app.screen, TextScreen), "no chart"
            assert "key group" in _screen_text(app.export_screenshot())
            await pilot.press("escape")
            await pilot.pause()
            after = (app.page.number, app.page.key_groups, list(app.view.pages),
                     table.cursor_row, _status(app), _detail(app))
            assert after == before
            assert app.focused is table
            # and the next page is the one that followed before
            number = app.page.number
            await pilot.press("n")
            assert app.page.number > number
            # a second g shows the chart at once (decoded once)
            await pilot.press("g")
            await pilot.pause()
            assert isinstance(app.screen, TextScreen)
    asyncio.run(scenario())


@pytest.mark.parametrize(("name", "location"),
                         [("statectl:keyed-all-kinds-p2", KEYED), *_heap_cases()[:1]],
                         ids=lambda v: v)
def test_svg_with_the_chart_writes_only_the_svg(name: str, location: str,
                                                 tmp_path: Path) -> None:
    """--svg with g pressed: stdout holds the one line the docs show, stderr nothing; the
    chart is in the SVG (not printed)."""
    out = tmp_path / "chart.svg"
    keys = "down enter g"
    done = subprocess.run([sys.executable, "-m", "cli.main", "browse", location, "--press", keys,
                           "--svg", str(out)], capture_output=True, text=True, cwd=REPO,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"wrote {out} (80x24, after 3 keys)\n"
    assert done.stderr == ""
    assert "key group" in _screen_text(out.read_text(encoding="utf-8"))


@pytest.mark.parametrize(("name", "location"),
                         [("statectl:keyed-all-kinds-p2", KEYED), *_heap_cases()],
                         ids=lambda v: v)
def test_the_tree_takes_the_width_its_names_need(name: str, location: str) -> None:
    """120 columns: every line of the tree (state, kind, entries, bytes) is whole, unless
    that needs more than 40% of the screen; 80 columns: at most 32 columns (as before), the
    entries have the rest."""
    async def widths(size: tuple[int, int]) -> tuple[int, bool]:
        app = _app(location)
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            tree: Tree[Any] = app.query_one("#tree", Tree)
            labels = [str(node.label) for node in _leaves(app)]
            assert labels
            shown = [tree.render_line(y).text for y in range(tree.size.height)]
            whole = all(any(label in line for line in shown) for label in labels)
            return tree.outer_size.width, whole

    width, whole = asyncio.run(widths((120, 40)))
    assert whole or width == 120 * 2 // 5, (width, whole)
    width, whole = asyncio.run(widths((80, 24)))
    assert (whole and width <= 32) or width == 32, (width, whole)


def test_against_shows_the_other_value_of_a_changed_entry(tmp_path: Path) -> None:
    """A ~ row's detail holds this snapshot's value and then the one compared with, as diff
    reports both sides."""
    fresh = str(tmp_path / "fresh")
    run_json("rescale", KEYED, "-p", "3", "--out", fresh, "--drop-expired", "--now",
             "2023-11-14T23:05:00")
    differences = run_json("diff", KEYED, fresh, "--limit", "1000", code=1)["differences"]
    changed = {d["key"]: d for d in differences
               if d["state"] == "recent_events" and d["change"] == "changed"}
    assert changed

    async def scenario() -> None:
        app = _app(fresh, against=KEYED)
        async with app.run_test(size=(80, 24)) as pilot:
            await _open(app, pilot, None, "recent_events")
            await pilot.press("tab")
            assert app.page is not None
            checked = 0
            for index, mark in enumerate(app.page.marks):
                if mark == "~":
                    app.query_one("#entries", DataTable).move_cursor(row=index)
                    await pilot.pause()
                    key = app.page.rows[index]["key"]
                    mine, theirs = _detail(app).split("the snapshot compared with holds\n", 1)
                    for side, value in ((mine, changed[key]["right"]),
                                        (theirs, changed[key]["left"])):
                        shown = "".join(side.split())  # on one line or over several
                        assert "".join(format_value(value).split()) in shown, (key, side)
                    assert "value" in theirs and "last access" in theirs
                    checked += 1
            assert checked == len(changed)
    asyncio.run(scenario())


def test_detail_puts_a_value_on_one_line_when_it_fits() -> None:
    row = {"key": "k1", "namespace": VOID_NAMESPACE, "value": ["a", "b"], "subtask": 0,
           "key_group": 3}
    other = {**row, "value": ["a"], "subtask": 1}
    assert cli.browse.detail_text(row, width=40).splitlines()[1] == 'value      ["a", "b"]'
    assert cli.browse.detail_text(row, width=20).splitlines()[1:5] == [
        "value      [", '             "a",', '             "b"', "           ]"]
    assert cli.browse.detail_text(row).splitlines()[1] == "value      ["  # no width: a block
    assert cli.browse.detail_text(row, "~", other, width=40).splitlines()[2:] == [
        "stored     key group 3, subtask 0", "changed: the snapshot compared with holds",
        'value      ["a"]', "stored     key group 3, subtask 1"]
