"""``make demo``: statectl's main job on embedded data, through the CLI.

Generates two days of a small click-stream (``demo/day-1.parquet``, ``demo/day-2.parquet``,
deterministic), builds keyed state from day 1 with asynchronous checkpoints, resumes from the
latest checkpoint with both days (day 1 continues from its recorded position, so nothing is
counted twice; day 2 is read from the start), inspects the final checkpoint (the summary, the
key-group chart with its skew, the largest entries, one key), rescales it from parallelism 2
to 3 (a plan, then metadata only) and to max parallelism 256 (every key re-hashed), verifies
and diffs both against it, exports the rescaled state to Parquet, then traces the seed
walkthroughs of the copy-on-write map. Run with ``python -m cli.demo``; exits 0 when every
step worked. ``demo/`` is rebuilt on every run.
"""

from __future__ import annotations

import random
import shutil
import sys
from pathlib import Path

import click
import pyarrow as pa
import pyarrow.parquet as pq
from rich.console import Console
from rich.rule import Rule

from cli.main import statectl
from cli.walkthroughs import walkthroughs
from formats.statectl.storage import DirectoryCheckpointStorage

__all__ = ["demo_invocations", "inspect_invocations", "main", "rescale_invocations",
           "write_events"]

DEMO_DIR = Path("demo")


def write_events(path: Path, count: int, seed: int = 42) -> None:
    """A deterministic click-stream: user, page, amount, ts (ms)."""
    rng = random.Random(seed)
    pq.write_table(pa.table({
        "user": [f"user-{rng.randrange(500)}" for _ in range(count)],
        "page": [rng.choice(["home", "search", "cart", "checkout"]) for _ in range(count)],
        "amount": [rng.randint(1, 200) for _ in range(count)],
        "ts": [i * 250 for i in range(count)],
    }), path)


def _build(directory: Path, *inputs: str) -> list[str]:
    return ["build", *(str(directory / name) for name in inputs), "--key", "user",
            "--agg", "count", "--agg", "sum:amount", "--agg", "last:page",
            "--agg", "map:page=amount", "--agg", "window-count:ts:60000",
            "--checkpoint-dir", str(directory / "state"), "--checkpoint-every", "2000",
            "--parallelism", "2"]


def demo_invocations(directory: Path = DEMO_DIR) -> list[list[str]]:
    """The ``statectl`` argument lists the demo runs, in order.

    ``inspect`` is added after the builds, once the latest checkpoint is known.
    """
    return [
        _build(directory, "day-1.parquet"),
        [*_build(directory, "day-1.parquet", "day-2.parquet"), "--resume"],
        *(["trace", "--example", w.name] for w in walkthroughs()),
    ]


def inspect_invocations(latest: str) -> list[list[str]]:
    """The inspect steps of the demo on the final checkpoint ``latest``."""
    return [
        ["inspect", latest],
        ["inspect", latest, "--key-groups"],
        ["inspect", latest, "--top", "3", "--state", "map_page"],
        ["inspect", latest, "--key", "user-7", "--state", "count", "--state", "map_page"],
    ]


def rescale_invocations(latest: str, directory: Path = DEMO_DIR) -> list[list[str]]:
    """The rescale steps of the demo, on the final checkpoint ``latest``.

    2 -> 3 (a plan, then metadata only) and to max parallelism 256; verify both and diff each
    against the source (equal: exit 0); export the rescaled state to Parquet.
    """
    rescaled, rehashed = str(directory / "rescaled-p3"), str(directory / "rescaled-p4-m256")
    return [
        ["rescale", latest, "--parallelism", "3", "--plan"],
        ["rescale", latest, "--parallelism", "3", "--out", rescaled],
        ["verify", rescaled],
        ["diff", latest, rescaled],
        ["rescale", latest, "--parallelism", "4", "--max-parallelism", "256", "--out",
         rehashed],
        ["verify", rehashed],
        ["diff", latest, rehashed],
        ["export", rescaled, "--out", str(directory / "exported")],
    ]


def _run(console: Console, arguments: list[str]) -> int:
    console.print(Rule("statectl " + " ".join(arguments)))
    try:
        # Not standalone: a failed command's ctx.exit(code) comes back as the return value.
        code = statectl.main(arguments, prog_name="statectl", standalone_mode=False)
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    console.print()
    return code if isinstance(code, int) else 0


def main() -> int:
    """Run every demo invocation; return the exit code (non-zero at the first failure)."""
    console = Console(highlight=False, soft_wrap=True)
    shutil.rmtree(DEMO_DIR, ignore_errors=True)
    DEMO_DIR.mkdir()
    write_events(DEMO_DIR / "day-1.parquet", 10_000, seed=1)
    write_events(DEMO_DIR / "day-2.parquet", 10_000, seed=2)
    builds, traces = demo_invocations()[:2], demo_invocations()[2:]
    for arguments in builds:
        if code := _run(console, arguments):
            return code
    latest = DirectoryCheckpointStorage(str(DEMO_DIR / "state")).completed()[-1]
    rescaled, rehashed = str(DEMO_DIR / "rescaled-p3"), str(DEMO_DIR / "rescaled-p4-m256")
    for arguments in [*inspect_invocations(latest.location),
                      *rescale_invocations(latest.location), *traces]:
        if code := _run(console, arguments):
            return code
    console.print("demo done: built state from day 1 with checkpoints, resumed with day 2, "
                  f"inspected (summary, key groups, largest entries, one key), rescaled 2 -> 3 "
                  f"({rescaled}: metadata only) and to max parallelism 256 ({rehashed}), "
                  f"verified, diffed, exported ({DEMO_DIR / 'exported'}), traced "
                  f"{len(traces)} walkthroughs. Files are in demo/.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
