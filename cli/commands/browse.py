"""``statectl browse``: an interactive inspector in the terminal."""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING

import click

from cli.output import Output
from cli.params import (
    allow_pickle,
    given_ttls,
    hold,
    operator_names,
    plan_option,
    reading,
    ttl_option,
)
from formats.model.checkpoint import Checkpoint
from formats.open import open_checkpoint

if TYPE_CHECKING:  # Textual is imported by this command only, when it runs
    from textual.pilot import Pilot

__all__ = ["browse_command"]


def _snapshot_in(location: str, other_than: str | None = None) -> str:
    """The snapshot browsed for ``location``: itself, or a directory's newest (said on stderr).

    ``other_than`` (``--against``): the snapshot browsed, which a directory's newest is not;
    where that directory holds it, the one before it is taken.
    """
    from formats.ops.catalog import chosen

    picked = chosen(location, other_than=other_than)
    if picked is None:
        return location
    snapshot, count = picked.snapshot, len(picked.found)
    click.echo(f"statectl: {snapshot.label} ({snapshot.info.location}), the newest "
               f"{'before the one browsed ' if picked.before else ''}of {count} snapshot"
               f"{'s' if count != 1 else ''} in {location}", err=True)
    return snapshot.info.location


@click.command("browse")
@click.argument("path")
@click.option("--against", metavar="B",
              help="Mark each state's rows against snapshot B: + added, - removed, ~ changed "
                   "(operators matched by OperatorID, as diff does). B a directory: its "
                   "newest snapshot; PATH's directory: the one before PATH's.")
@click.option("--svg", "svg", type=click.Path(dir_okay=False), metavar="FILE",
              help="No terminal: press --press's keys in a headless screen of --size, then "
                   "write the screen to FILE as SVG (for a report, a bug, the docs).")
@click.option("--press", default="", metavar="KEYS",
              help="With --svg: the keys to press first, by Textual's names, space-separated "
                   "(e.g. 'down down enter tab slash u s e r minus 1 enter').")
@click.option("--size", default="80x24", show_default=True, metavar="WxH",
              help="With --svg: the screen's columns and rows.")
@ttl_option("the states' TTL in the tree and pages")
@plan_option
@click.pass_obj
def browse_command(output: Output, path: str, against: str | None, svg: str | None,
                   press: str, size: str, ttls: tuple[tuple[str, int], ...]) -> None:
    """Browse a snapshot in the terminal: operators, states, entries, one key, key groups.

    PATH is a snapshot, or a directory holding snapshots (a Flink job's checkpoint directory,
    a state directory, savepoints, local or on object storage): its newest complete snapshot,
    named on stderr. Keyboard only (? shows the keys); works over SSH in 80x24. Opening reads
    the metadata alone; a state's page reads only its key groups (of a Flink snapshot: their
    bytes, decoded then). See docs/browse.md.
    """
    match = re.fullmatch(r"(\d{2,3})x(\d{2,3})", size)
    if match is None:
        raise click.BadParameter(f"{size!r}: give columns x rows, e.g. 80x24",
                                 param_hint="--size")
    if svg is None and (press or size != "80x24"):
        raise click.UsageError("--press and --size go with --svg")
    if svg is None and (not sys.stdout.isatty() or not sys.stdin.isatty()):
        raise click.UsageError("browse needs a terminal (without one: --svg FILE writes a "
                               "screen; for scripts: inspect, query)")
    path = _snapshot_in(path)
    if against is not None:
        against = _snapshot_in(against, other_than=path)
    from cli.browse import BrowseApp  # Textual is loaded only for this command

    hold(path, *([against] if against else []))
    pickles, names = allow_pickle(), operator_names()
    context = click.get_current_context()

    def opened(location: str, decode: bool = True) -> Checkpoint:
        with context:  # also on the app's worker thread (a Flink snapshot decoded later)
            checkpoint = reading(open_checkpoint(location, allow_pickle=pickles, names=names,
                                                 partial=True, decode=decode))
            if location == path:  # --ttl names the states of PATH (--against: unchanged)
                given_ttls(checkpoint, ttls)
            return checkpoint

    checkpoint = opened(path, decode=pickles)  # unpickling decodes every value at opening
    other = None if against is None else opened(against, decode=pickles)
    app = BrowseApp(checkpoint, path, decoded=None if checkpoint.format_name == "statectl"
                    else lambda: opened(path), against=other)
    if svg is None:
        app.run()
        return
    written: list[str] = []

    async def pilot_then_screenshot(pilot: Pilot[object]) -> None:
        await pilot.pause()
        for key in press.split():
            await pilot.press(key)
            await pilot.app.workers.wait_for_complete()  # a Flink snapshot decoding
            await pilot.pause()
        written.append(pilot.app.export_screenshot(title=f"statectl browse {path}"))
        pilot.app.exit()

    app.run(headless=True, size=(int(match[1]), int(match[2])),
            auto_pilot=pilot_then_screenshot)
    if not written:
        raise click.ClickException("the headless screen ended before its screenshot")
    with open(svg, "w", encoding="utf-8") as out:
        out.write(written[0])
    output.screenshot(svg, int(match[1]), int(match[2]), len(press.split()))
