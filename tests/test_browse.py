"""``statectl browse`` driven headless by Textual's pilot (issue 34), at 80x24 as over SSH.

Navigate the tree, open a state, page, open an entry's detail, go to a key, find a text, the
key-group chart, compare with another snapshot: on statectl's format and on the heap, RocksDB,
types and version fixtures; what the screen shows is checked against ``inspect`` and ``diff``.
The screens are kept as SVG (``docs/browse/*.svg``, the README shows one): the test writes
them and compares their text with the committed ones (``STATECTL_UPDATE_SCREENS=1`` rewrites).
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from typing import Any

import pytest
from cli_support import KEYED, OPERATOR, run_json
from flink_fixtures import release_checkpoint, release_fixtures, snapshots
from textual.widgets import DataTable, Static, Tree

import cli.browse
from cli.browse import PAGE_ROWS, BrowseApp, paginate
from formats.open import open_checkpoint

REPO = Path(__file__).resolve().parent.parent
SCREENS = REPO / "docs" / "browse"
SIZE = (80, 24)


def _app(location: str, against: str | None = None, shown_as: str | None = None
         ) -> BrowseApp:
    """The app as ``statectl browse`` makes it (``shown_as``: the path in its title)."""
    checkpoint = open_checkpoint(location, decode=False, partial=True)
    decoded = None if checkpoint.format_name == "statectl" else (
        lambda: open_checkpoint(location, partial=True))
    other = None if against is None else open_checkpoint(against, decode=False, partial=True)
    return BrowseApp(checkpoint, shown_as or location, decoded=decoded, against=other)


def _leaves(app: BrowseApp) -> list[Any]:
    tree: Tree[Any] = app.query_one("#tree", Tree)
    found = []
    stack = list(tree.root.children)
    while stack:
        node = stack.pop(0)
        if node.data is not None:
            found.append(node)
        stack[0:0] = list(node.children)
    return found


async def _open(app: BrowseApp, pilot: Any, operator: str | None, state: str) -> None:
    """Select the state in the tree with the keyboard (down arrows, Enter), wait for it."""
    tree: Tree[Any] = app.query_one("#tree", Tree)
    tree.focus()
    target = next(n for n in _leaves(app) if n.data[1].name == state
                  and (operator is None or n.data[0].uid == operator))
    for _ in range(400):
        if tree.cursor_node is target:
            break
        await pilot.press("down" if tree.cursor_line < target.line else "up")
    assert tree.cursor_node is target
    await pilot.press("enter")
    for _ in range(200):  # a Flink snapshot is decoded on a worker first
        await pilot.pause(0.02)
        if app.view is not None and app.view.state.name == state and app.page is not None:
            return
    raise AssertionError(f"{state} did not open")


def _table_rows(app: BrowseApp) -> list[list[str]]:
    table = app.query_one("#entries", DataTable)
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


def _status(app: BrowseApp) -> str:
    return str(app.query_one("#status", Static).render())


def _detail(app: BrowseApp) -> str:
    return str(app.query_one("#detail", Static).render())


def _screen_text(svg: str) -> str:
    """The text of an SVG screenshot: what a person sees (not the styling or ids)."""
    texts = re.findall(r">([^<>]*)</text>", svg)
    return "\n".join(t.replace("&#160;", " ") for t in texts)


def _keep_screen(app: BrowseApp, name: str) -> None:
    svg = app.export_screenshot(title=f"statectl browse: {name}")
    SCREENS.mkdir(exist_ok=True)
    path = SCREENS / f"{name}.svg"
    if os.environ.get("STATECTL_UPDATE_SCREENS") or not path.exists():
        path.write_text(svg, encoding="utf-8")
    assert _screen_text(svg) == _screen_text(path.read_text(encoding="utf-8")), (
        f"the {name} screen changed: STATECTL_UPDATE_SCREENS=1 rewrites docs/browse/")


def test_paginate_keeps_whole_key_groups() -> None:
    counts = [(g, 70) for g in range(10)]
    pages = paginate(counts, 200)
    assert pages == [(0, 1, 2), (3, 4, 5), (6, 7, 8), (9,)]
    assert paginate([], 200) == []


def test_browse_the_sample_navigate_page_key_find_chart() -> None:
    async def scenario() -> None:
        app = _app(KEYED, shown_as="sample_checkpoints/v1/keyed-all-kinds-p2")
        async with app.run_test(size=SIZE) as pilot:
            states = [n.data[1].name for n in _leaves(app)]
            assert states == [s["state"] for s in run_json("inspect", KEYED)["operators"][0][
                "states"]]
            _keep_screen(app, "tree")
            await _open(app, pilot, None, "recent_events")
            rows = _table_rows(app)
            assert len(rows) == 36 and "page 1 of 1" in _status(app)
            await pilot.press("tab")
            await pilot.press("down", "down")
            shown_key = rows[2][1]
            assert f"key        {shown_key}" in _detail(app)
            assert "last access 2023-11-14T" in _detail(app)
            _keep_screen(app, "entries")
            # go to a key: only its key group is read; the detail is inspect --key's entry
            await pilot.press("slash")
            await pilot.press(*"user-21", "enter")
            await pilot.pause()
            looked_up = run_json("inspect", KEYED, "--key", "user-21", "--state",
                                 "recent_events")["lookup"]["states"][0]["entries"][0]
            assert "key        user-21" in _detail(app)
            for element in looked_up["value"]:
                assert f'"{element}"' in _detail(app)
            await pilot.press("slash")
            await pilot.press(*"nobody", "enter")
            await pilot.pause()
            assert "no entry for key nobody" in _status(app)
            # find by substring: the next key containing "-3"
            await pilot.press("f")
            await pilot.press(*"-3", "enter")
            await pilot.pause()
            assert "-3" in _detail(app).splitlines()[0]
            await pilot.press("g")
            await pilot.pause()
            chart = str(app.screen.query_one("#text", Static).render())
            assert "skew" in chart and "key group" in chart
            _keep_screen(app, "key-groups")
            await pilot.press("escape")
            await pilot.press("question_mark")
            await pilot.pause()
            assert "go to a key" in str(app.screen.query_one("#text", Static).render())
            await pilot.press("escape")
            await pilot.press("q")
    asyncio.run(scenario())


def test_pages_read_only_their_key_groups(tmp_path: Path) -> None:
    """A state of more entries than a page: n/p move by whole key groups; every entry is
    shown once over the pages, as inspect counts them."""
    state = tmp_path / "state"
    built = run_json("build", str(REPO / "docs" / "examples" / "events.csv"), "--key", "ts",
                     "--agg", "count", "--checkpoint-dir", str(state), "--parallelism", "2")
    location = built["location"]
    total = run_json("inspect", location, "--all")["operators"][0]["states"]
    entries = next(s["entries"] for s in total if s["state"] == "count")
    assert entries > 2 * PAGE_ROWS

    async def scenario() -> None:
        app = _app(location)
        async with app.run_test(size=SIZE) as pilot:
            await _open(app, pilot, None, "count")
            assert app.view is not None
            seen: list[str] = []
            groups: list[int] = []
            for number in range(len(app.view.pages)):
                assert app.page is not None and app.page.number == number
                assert {int(r["key_group"]) for r in app.page.rows} <= set(
                    app.page.key_groups)
                groups += app.page.key_groups
                seen += [row[1] for row in _table_rows(app)]
                await pilot.press("n")
            await pilot.press("p")
            assert app.page is not None and app.page.number == len(app.view.pages) - 2
            assert len(seen) == entries == len(set(seen))
            assert groups == sorted(set(groups))
    asyncio.run(scenario())


def test_compare_marks_what_diff_reports(tmp_path: Path) -> None:
    fresh = str(tmp_path / "fresh")
    run_json("rescale", KEYED, "-p", "3", "--out", fresh, "--drop-expired", "--now",
             "2023-11-14T23:05:00")
    # browsing A against B: + only in A, - only in B, as diff B A calls them added, removed
    differences = run_json("diff", KEYED, fresh, "--limit", "1000", code=1)["differences"]
    expected = {(d["key"], {"added": "+", "removed": "-", "changed": "~"}[d["change"]])
                for d in differences if d["state"] == "recent_events"}

    async def scenario() -> None:
        app = _app(fresh, against=KEYED, shown_as="tour/fresh")
        async with app.run_test(size=SIZE) as pilot:
            await _open(app, pilot, None, "recent_events")
            marked = {(row[1], row[0]) for row in _table_rows(app) if row[0]}
            assert marked == expected and expected
            _keep_screen(app, "against")
    asyncio.run(scenario())


def test_operator_state_shows_its_elements(tmp_path: Path) -> None:
    exported = run_json("export", OPERATOR, "--out", str(tmp_path / "e"))
    rows = {t["state"]: t["rows"] for t in exported["tables"]}

    async def scenario() -> None:
        app = _app(OPERATOR)
        async with app.run_test(size=SIZE) as pilot:
            for state in ("rules", "partition_offsets", "watermarks"):
                await _open(app, pilot, None, state)
                assert len(_table_rows(app)) == rows[state], state
                assert "operator state, all elements" in _status(app)
    asyncio.run(scenario())


def _flink_cases() -> list[tuple[str, str]]:
    cases = [(f"{fixture.parent.name}/{fixture.name}:{snap['path']}", str(fixture / snap["path"]))
             for fixture, snap in snapshots("heap", "rocksdb", "types")
             if "canonical" in snap["path"] and "p2" in snap["path"]]
    for release in release_fixtures():
        cases.append((f"{release.name}:java-heap",
                      str(release_checkpoint(release, "java-heap"))))
    return cases


@pytest.mark.parametrize(("name", "location"), _flink_cases(), ids=lambda v: v)
def test_browse_a_flink_snapshot(name: str, location: str) -> None:
    """Open every keyed state with entries: the first page holds what inspect --key finds."""
    summary = run_json("inspect", location, "--all")
    keyed = [(op["operator"]["uid"], s["state"]) for op in summary["operators"]
             for s in op["states"] if s["scope"] == "keyed" and s["entries"]
             and not s["state"].startswith("_timer_state")]
    assert keyed, name

    async def scenario() -> None:
        app = _app(location)
        async with app.run_test(size=SIZE) as pilot:
            for uid, state in keyed[:3]:
                await _open(app, pilot, uid, state)
                assert app.page is not None and app.page.rows, (name, state)
                row = app.page.rows[0]
                if row.get("value_undecodable"):
                    assert "not decoded" in _detail(app)
                else:
                    assert _detail(app).startswith("key ")
    asyncio.run(scenario())


@pytest.mark.parametrize(("name", "location"), _flink_cases(), ids=lambda v: v)
def test_flink_pages_decode_only_their_key_groups(name: str, location: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Pages of a Flink snapshot's state, cut by its key groups' bytes (small pages here):
    n and p move over them, passing those without entries; every entry is shown once, as
    inspect --all counts them; the snapshot is never decoded whole."""
    monkeypatch.setattr(cli.browse, "PAGE_BYTES", 200)
    summary = run_json("inspect", location, "--all")
    uid, state, entries = max(((op["operator"]["uid"], s["state"], s["entries"])
                               for op in summary["operators"] for s in op["states"]
                               if s["scope"] == "keyed" and s["entries"]),
                              key=lambda t: t[2])

    async def scenario() -> None:
        app = _app(location)
        async with app.run_test(size=SIZE) as pilot:
            await _open(app, pilot, uid, state)
            assert app.view is not None and app.view.estimated and len(app.view.pages) > 2
            seen: list[tuple[Any, ...]] = []
            numbers: list[int] = []
            while True:
                assert app.page is not None
                numbers.append(app.page.number)
                assert app.page.rows or app.page.number == len(app.view.pages) - 1
                assert {int(r["key_group"]) for r in app.page.rows} <= set(app.page.key_groups)
                seen += [(r["key_group"], repr(r["key"]), repr(r.get("namespace")))
                         for r in app.page.rows]
                if app.page.number == len(app.view.pages) - 1:
                    break
                await pilot.press("n")
            assert numbers == sorted(set(numbers))
            assert len(seen) == entries == len(set(seen)), (len(seen), entries)
            await pilot.press("p")
            assert app.page is not None and app.page.rows and app.page.number < numbers[-1]
            assert app._decode is not None, "the snapshot was decoded whole"
    asyncio.run(scenario())


def test_browse_needs_a_terminal() -> None:
    from cli_support import run
    code, out, err = run("browse", KEYED)
    assert code == 2 and "needs a terminal" in err and out == "", err


def test_svg_writes_the_screen_after_the_keys_pressed(tmp_path: Path) -> None:
    """Without a terminal: a headless screen, the keys pressed, the screen as SVG."""
    from cli_support import run
    out = tmp_path / "screen.svg"
    code, stdout, err = run("browse", KEYED, "--press", "down down down down down enter",
                            "--svg", str(out))
    assert code == 0 and "after 6 keys" in stdout, err
    text = _screen_text(out.read_text(encoding="utf-8"))
    assert "recent_events" in text and "user-26" in text  # the state opened, its entries
    code, _, err = run("browse", KEYED, "--press", "enter")
    assert code == 2 and "--svg" in err
    code, _, err = run("browse", KEYED, "--svg", str(out), "--size", "big")
    assert code == 2 and "80x24" in err
