"""``statectl rescale``: a checkpoint at a new parallelism (and max parallelism), with a plan."""

from __future__ import annotations

import click

from cli.output import Output
from cli.params import (
    TIMESTAMP,
    Location,
    allow_pickle,
    engine_options,
    given_ttls,
    hold,
    operator_names,
    reading,
    ttl_option,
)
from formats.engines import open_engine
from formats.model.checkpoint import Checkpoint
from formats.ops.rescale import check_target, plan_checkpoint, rescale_checkpoint
from formats.ops.ttl_given import state_label, unknown_ttls
from statecore.errors import InvalidArgumentError

__all__ = ["rescale_command"]


@click.command("rescale")
@click.argument("source")
@click.option("--parallelism", "-p", required=True, type=int,
              help="The new parallelism (1 to the max parallelism; an operator whose max "
                   "parallelism was set lower keeps its own, see below).")
@click.option("--max-parallelism", type=int,
              help="A new max parallelism: every key is re-hashed to its new key group and "
                   "keyed files are rewritten (Flink cannot do this). An operator whose max "
                   "parallelism was set lower than the others' keeps it, unless "
                   "--operator-parallelism names it.")
@click.option("--operator-parallelism", "operator_parallelism", multiple=True,
              metavar="OP=N",
              help="Operator OP (its uid, name or OperatorID) at parallelism N instead "
                   "(repeatable); N is 1 to its max parallelism (the new one with "
                   "--max-parallelism).")
@click.option("--out", "out", type=Location(),
              help="Where to write the rescaled checkpoint (must not exist). Required unless "
                   "--plan.")
@click.option("--plan", "plan_only", is_flag=True,
              help="Only print the plan (a dry run): nothing is read but metadata (and, for "
                   "a max-parallelism change, the keys) and nothing is written.")
@click.option("--compact", is_flag=True,
              help="Rewrite into one file per new subtask and state instead of referencing "
                   "the old files.")
@click.option("--drop-expired", is_flag=True,
              help="Drop TTL-expired entries while rewriting (implies a rewrite).")
@click.option("--now", type=TIMESTAMP,
              help="The time in epoch ms that decides expiry for --drop-expired "
                   "(default: now).")
@ttl_option("--drop-expired")
@click.option("--flink-version", metavar="X.Y",
              help="A Flink source: the Flink release (1.15 to 2.3) the savepoint is written "
                   "for (default: the source's, from its _metadata version).")
@click.option("--all", "show_all", is_flag=True,
              help="Show every operator's per-subtask plan (stateless operators included); "
                   "by default the plan fits a screen.")
@engine_options
@click.pass_obj
def rescale_command(output: Output, source: str, parallelism: int, max_parallelism: int | None,
                    operator_parallelism: tuple[str, ...], out: str | None, plan_only: bool,
                    compact: bool, drop_expired: bool, now: int | None,
                    ttls: tuple[tuple[str, int], ...], flink_version: str | None,
                    show_all: bool, engine: str,
                    spark_master: str | None, spark_conf: tuple[str, ...]) -> None:
    """Redistribute a checkpoint's state to a new parallelism, as Flink would on restore.

    Keyed state moves by key group; split, union and broadcast operator state are
    redistributed exactly as Flink's repartitioner does. Within one max parallelism this is a
    metadata operation: the new checkpoint's metadata references the old files, which are
    hard-linked (copied across filesystems), and no record is rewritten. The plan (per new
    subtask: key groups, entries, bytes, bytes moved, skew, union blow-up) is printed first,
    one row per operator when the subtasks' tables would not fit a screen (--all shows them
    all); with --plan it is the whole output. SOURCE is never modified.

    An operator whose max parallelism is lower than the other operators' (set on it: Flink's
    SQL planner pins a sink's committer or a global aggregate to parallelism 1 and max
    parallelism 1) keeps its parallelism and max parallelism where the new parallelism is
    above it or --max-parallelism is given, and the plan says so: Flink restores it where the
    job sets its parallelism. --operator-parallelism gives an operator a parallelism of its
    own.

    A Flink snapshot is written as a canonical savepoint for the Flink release it came from
    (--flink-version chooses another, 1.15 to 2.3).
    """
    if not plan_only and out is None:
        raise click.UsageError("give --out DIR for the rescaled checkpoint, or --plan for a "
                               "dry run")
    if now is not None and not drop_expired:
        raise click.UsageError("--now only applies with --drop-expired")
    if ttls and not drop_expired:
        raise click.UsageError("--ttl only applies with --drop-expired")
    asked = [_operator_parallelism(text) for text in operator_parallelism]
    runner = open_engine(engine, spark_master, spark_conf)
    hold(source)
    checkpoint = reading(runner.open_checkpoint(source, allow_pickle=allow_pickle(),
                                                names=operator_names(),
                                                max_parallelism=max_parallelism,
                                                partial=plan_only,
                                                rewrite=out is not None and not plan_only))
    given_ttls(checkpoint, ttls)
    unknown = [state_label(op, s) for op, s in unknown_ttls(checkpoint)]
    if drop_expired and unknown:
        raise click.UsageError(
            f"--drop-expired: the TTL of {', '.join(unknown)} is not in the snapshot (it "
            f"stores each value's last access, not the TTL): give --ttl {unknown[0]}=DURATION")
    if out is not None and not plan_only:
        check_target(out)
        if flink_version is not None and checkpoint.format_name != "flink":
            raise InvalidArgumentError(
                "--flink-version: rescaling a statectl checkpoint writes statectl's format; "
                "`statectl convert --flink-version X.Y` writes a Flink savepoint")
        checkpoint.check_release(flink_version)  # refused before the plan is printed
    plan = plan_checkpoint(checkpoint, parallelism, max_parallelism,
                           runner.rehash_counter() if max_parallelism is not None else None,
                           operator_parallelism=_by_uid(checkpoint, asked, max_parallelism))
    if plan_only:
        output.rescale(plan, None, show_all)
        return

    def run() -> object:
        assert out is not None
        with output.progress("rescaling") as progress:
            rewrite = compact or drop_expired or plan.rehash
            return rescale_checkpoint(checkpoint, out, plan, compact=compact,
                                      drop_expired=drop_expired, now=now, progress=progress,
                                      keyed_writer=runner.keyed_writer() if rewrite else None,
                                      flink_version=flink_version)

    output.rescale(plan, run, show_all)  # type: ignore[arg-type]


def _operator_parallelism(text: str) -> tuple[str, int]:
    """``OP=N`` of ``--operator-parallelism`` (N a whole number of at least 1)."""
    name, sep, number = text.rpartition("=")
    if not sep or not name.strip() or not number.strip().isdigit() or int(number) < 1:
        raise click.BadParameter(f"{text!r}: give OP=N, OP an operator's uid, name or "
                                 f"OperatorID and N a parallelism of at least 1",
                                 param_hint="--operator-parallelism")
    return name.strip(), int(number)


def _by_uid(checkpoint: Checkpoint, asked: list[tuple[str, int]],
            max_parallelism: int | None) -> dict[str, int]:
    """The operators ``--operator-parallelism`` names, by model uid (each once), checked."""
    out: dict[str, int] = {}
    for name, number in asked:
        try:
            op = checkpoint.find_operator(name)
        except InvalidArgumentError as exc:
            raise click.BadParameter(str(exc), param_hint="--operator-parallelism") from exc
        highest = op.max_parallelism if max_parallelism is None else max_parallelism
        if number > highest:
            which = "the new" if max_parallelism is not None else "its"
            raise click.BadParameter(
                f"{name}={number}: operator {op.identity.label} runs at 1 to {which} max "
                f"parallelism ({highest}); give {name}=N with N at most {highest}",
                param_hint="--operator-parallelism")
        if out.get(op.uid, number) != number:
            raise click.BadParameter(f"operator {op.identity.label} is given two parallelisms "
                                     f"({out[op.uid]}, {number})",
                                     param_hint="--operator-parallelism")
        out[op.uid] = number
    return out
