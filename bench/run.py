"""``make bench``: every benchmark section against its baseline, side by side; table and JSON.

Usage: ``.venv/bin/python bench/run.py [--quick] [--only NAME[,NAME...]] [--skip NAME[,...]]
[--json PATH] [--update]``. Every figure in the ratio column is measured side by side in this
run; the acceptance bars are reported, PASS or MISS, not tuned for. A full run writes
``bench/results.json``; partial runs (``--quick``, ``--only``, ``--skip``) write JSON only when
``--json`` or ``--update`` is given, so they never replace the full results. ``--update``
replaces the sections run in ``bench/results.json`` (or ``--json``) and keeps the others: each
section records the command, date and revision of the run that measured it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_backend import bench_backend
from bench_browse import bench_browse
from bench_checkpoint import bench_checkpoint
from bench_export import bench_export
from bench_flink import bench_flink
from bench_inspect import bench_inspect
from bench_memory import bench_memory
from bench_peers import bench_peers
from bench_query import bench_query, bench_query_across
from bench_rescale import bench_rescale
from bench_spark import bench_spark
from bench_spark_flink import bench_spark_flink
from bench_startup import bench_startup
from bench_state_maps import BENCHMARKS as STATE_MAP_BENCHMARKS
from bench_state_maps import FULL, QUICK, Config, Row, Section

BENCH_DIR = Path(__file__).resolve().parent
#: Sections in run order: the map benchmarks, then the keyed backend (bench/bench_backend.py),
#: checkpoints (bench_checkpoint.py), rescale, inspect, spark, flink, export of big Flink
#: snapshots (bench_export.py), spark on Flink snapshots,
#: query, query across a job's checkpoints (bench_query.py), browse, memory, peers, startup
#: (bench_rescale/_inspect/_spark/_flink/_spark_flink/
#: _query/_browse/_memory/_peers/_startup.py).
BENCHMARKS: dict[str, Callable[[Config], Section]] = {
    **STATE_MAP_BENCHMARKS, "backend": bench_backend, "checkpoint": bench_checkpoint,
    "rescale": bench_rescale, "inspect": bench_inspect, "spark": bench_spark,
    "flink": bench_flink, "export": bench_export, "spark-flink": bench_spark_flink,
    "query": bench_query,
    "query-across": bench_query_across, "browse": bench_browse, "memory": bench_memory,
    "peers": bench_peers, "startup": bench_startup}
DEFAULT_JSON = BENCH_DIR / "results.json"
COLUMNS = ("benchmark", "statecore", "baseline", "ratio", "bar", "result")
WIDTHS = (42, 16, 16, 8, 10, 6)


def format_value(value: float, unit: str) -> str:
    if unit == "bytes":
        for scale, name in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
            if value >= scale:
                return f"{value / scale:.3g} {name}"
        return f"{value:.0f} B"
    if unit == "B/s":
        return f"{value / 1e6:.3g} MB/s"
    if unit == "ops/s":
        if value >= 1e6:
            return f"{value / 1e6:.2f}M ops/s"
        return f"{value / 1e3:.0f}k ops/s"
    for scale, name in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if value >= scale:
            return f"{value / scale:.3g} {name}"
    return f"{value:.0f} ns"


def format_ratio(ratio: float) -> str:
    return f"{ratio:.2f}" if ratio >= 0.1 else f"1/{1 / ratio:.0f}"


def table(rows: list[Row]) -> str:
    def line(cells: tuple[str, ...]) -> str:
        # a cell wider than its column still gets one space before the next
        return "".join((c + " ").ljust(w) if len(c) >= w else c.ljust(w)
                       for c, w in zip(cells, WIDTHS, strict=True)).rstrip()

    lines = [line(COLUMNS)]
    for r in rows:
        lines.append(line((r.name, format_value(r.statecore, r.unit),
                           format_value(r.baseline, r.unit), format_ratio(r.ratio),
                           r.bar.label if r.bar else "", r.result)))
    return "\n".join(lines)


def git_revision() -> str | None:
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=BENCH_DIR,
                             capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip()


def results_json(sections: list[Section], args: argparse.Namespace, started: datetime.datetime,
                 seconds: float, previous: dict[str, Any] | None = None) -> dict[str, Any]:
    """The run's results; with ``previous`` (``--update``), its other sections kept."""
    run = {
        "command": shlex.join([sys.executable, *sys.argv]),
        "cwd": os.getcwd(),
        "date": started.isoformat(timespec="seconds"),
        "python": sys.version,
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "git": git_revision(),
        "quick": args.quick,
        "only": args.only,
        "skip": args.skip,
        "total_seconds": round(seconds, 1),
    }
    kept = {name: section for name, section in (previous or {}).get("sections", {}).items()
            if "rows" in section and name not in {s.name for s in sections}}
    measured = {s.name: {"run": run, "rows": [{
        "benchmark": r.name, "statecore": r.statecore, "baseline": r.baseline, "unit": r.unit,
        "ratio": r.ratio, "bar": r.bar.label if r.bar else None, "result": r.result}
        for r in s.rows], "notes": s.notes, "raw": s.raw} for s in sections}
    merged = {name: (measured.get(name) or kept[name]) for name in BENCHMARKS
              if name in measured or name in kept}
    return {**run, "rows": [row for section in merged.values() for row in section["rows"]],
            "sections": merged}


def names(value: str | None) -> list[str]:
    """``--only``/``--skip`` names, comma-separated, each a benchmark."""
    chosen = [] if value is None else [n for n in value.split(",") if n]
    unknown = [n for n in chosen if n not in BENCHMARKS]
    if unknown:
        raise SystemExit(f"unknown benchmark {', '.join(unknown)}: one of "
                         f"{', '.join(BENCHMARKS)}")
    return chosen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    parser.add_argument("--only", help="run these benchmarks only (comma-separated: "
                        f"{','.join(BENCHMARKS)})")
    parser.add_argument("--skip", help="run all but these benchmarks (comma-separated)")
    parser.add_argument("--json", type=Path,
                        help=f"write results here (default for a full run: {DEFAULT_JSON})")
    parser.add_argument("--update", action="store_true",
                        help="replace the sections run in the JSON file, keep the others")
    args = parser.parse_args()
    only, skip = names(args.only), names(args.skip)
    config = QUICK if args.quick else FULL
    partial = args.quick or only or skip
    json_path = args.json or (DEFAULT_JSON if args.update or not partial else None)
    previous = None
    if args.update and json_path is not None and json_path.exists():
        previous = json.loads(json_path.read_text())

    started = datetime.datetime.now(datetime.UTC)
    clock = time.perf_counter()
    sections = []
    for name, bench in BENCHMARKS.items():
        if (not only or name in only) and name not in skip:
            print(f"running {name}{' (quick)' if args.quick else ''} ...", file=sys.stderr)
            sections.append(bench(config))
    seconds = time.perf_counter() - clock

    print(table([r for s in sections for r in s.rows]))
    for s in sections:
        print(f"\n{s.name}:")
        for note in s.notes:
            print(f"  - {note}")
    print(f"\nPython {platform.python_version()}, {os.cpu_count()} CPUs, "
          f"{'QUICK sizes, ' if args.quick else ''}total {seconds:.0f} s")
    if json_path is not None:
        json_path.write_text(json.dumps(results_json(sections, args, started, seconds,
                                                     previous), indent=2) + "\n")
        print(f"results written to {json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
