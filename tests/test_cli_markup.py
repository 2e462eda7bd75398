"""Text output shows data as it is: keys, values and names that look like rich markup
(``[b]...``, ``[red]``, Python's ``[b'..']`` for bytes) are printed literally, not styled
or swallowed."""

from __future__ import annotations

from pathlib import Path

from tests.cli_support import run


def test_markup_like_data_is_printed_literally(tmp_path: Path) -> None:
    data = tmp_path / "events.csv"
    data.write_text("user,page\n[b]x,[red]p\n[b]x,[/]q\n")
    state = tmp_path / "state"
    code, _, err = run("build", str(data), "--key", "user", "--agg", "list:page",
                       "--checkpoint-dir", str(state))
    assert code == 0, err
    checkpoint = next(p for p in state.iterdir() if p.name.startswith("chk-"))
    code, out, err = run("inspect", str(checkpoint), "--key", "[b]x")
    assert code == 0, err
    assert "[b]x" in out and "[red]p" in out and "[/]q" in out, out
    code, out, err = run("inspect", str(checkpoint), "--entries")
    assert code == 0, err
    assert "[b]x" in out and "[red]p" in out, out
