"""``make demo``: run statectl's main features on embedded data, through the CLI.

For now: the three seed walkthroughs of ``statectl trace`` (copy-on-write, incremental rehash,
chain copies), drawn as text. Run with ``python -m cli.demo``; exits 0 when every step worked.
"""

from __future__ import annotations

import sys

import click
from rich.console import Console
from rich.rule import Rule

from cli.main import statectl
from cli.walkthroughs import walkthroughs

__all__ = ["demo_invocations", "main"]


def demo_invocations() -> list[list[str]]:
    """The ``statectl`` argument lists the demo runs, in order."""
    return [["trace", "--example", w.name] for w in walkthroughs()]


def main() -> int:
    """Run every demo invocation; return the exit code (non-zero at the first failure)."""
    console = Console(highlight=False, soft_wrap=True)
    invocations = demo_invocations()
    for arguments in invocations:
        console.print(Rule("statectl " + " ".join(arguments)))
        try:
            # Not standalone: a failed command's ctx.exit(code) comes back as the return value.
            code = statectl.main(arguments, prog_name="statectl", standalone_mode=False)
        except click.ClickException as exc:
            exc.show()
            return exc.exit_code
        if isinstance(code, int) and code != 0:
            return code
        console.print()
    console.print(f"demo done: {len(invocations)} walkthroughs traced. "
                  f"Next: `statectl trace --list-examples`, `statectl trace --help`.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
