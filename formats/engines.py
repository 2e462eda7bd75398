"""Where the data-heavy parts of a command run: ``local`` (this process) or ``spark``.

An :class:`Engine` hands the library's orchestration the pieces that touch data; ``None``
means "the local default". The local engine has none of its own; the Spark engine
(:mod:`formats.spark`) starts its session on first use, so a command that turns out to need
no data work (a metadata-only rescale) never starts Spark.

==============================  =====================================================
piece                           used by
==============================  =====================================================
``open_checkpoint(location)``   every command that reads a checkpoint on the engine
``open_rewritten(location)``    ``migrate``: the snapshot it rewrites
``rehash_counter()``            ``rescale --max-parallelism``: the plan's key counts
``keyed_writer()``              ``rescale --compact`` / ``--max-parallelism`` /
                                ``--drop-expired``
``state_writer(checkpoint)``    ``export``
``footers(checkpoint)``         ``inspect --key-groups``
``build(inputs, ...)``          ``build``
==============================  =====================================================

A Flink snapshot opened by the Spark engine decodes no keyed state in this process: Spark
tasks decode it in pieces (:mod:`formats.spark.flink`), and its rewrites (``write_rescaled``,
``write_migrated``) run on Spark too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from formats.model.checkpoint import Checkpoint
from formats.model.operator_names import OperatorNames
from formats.open import open_checkpoint, open_in_runs
from statecore.errors import InvalidArgumentError, UnsupportedFormatError

if TYPE_CHECKING:  # the operations are imported by the commands that run them (issue 45)
    from formats.ops.build import BuildSummary
    from formats.ops.export import StateWriter
    from formats.ops.rescale import KeyedWriter, RehashCounter

__all__ = ["ENGINES", "Engine", "LocalEngine", "SparkEngine", "open_engine"]

ENGINES = ("local", "spark")


class Engine:
    """The local engine: every piece is the library's default."""

    name = "local"

    def open_checkpoint(self, location: str, *, allow_pickle: bool = False, count: bool = True,
                        max_parallelism: int | None = None, partial: bool = False,
                        decode: bool = True, names: OperatorNames | None = None,
                        rewrite: bool = False) -> Checkpoint:
        """The checkpoint at ``location``, opened for this engine's commands.

        ``count``: the command needs entries per key group (``inspect``, plans; ``export``
        does not); ``max_parallelism``: a rescale to it will count the keys' key groups there.
        ``partial``: accept a damaged Flink snapshot (its damage listed in
        ``undecodable_parts()``). ``decode=False``: a Flink snapshot's keyed state is not
        decoded (only ``_metadata`` and the streams' headers are read; an ``inspect`` summary).
        Locally: :func:`formats.open.open_checkpoint`, which decodes a Flink snapshot here,
        at once, or (``count`` false: the command reads the state piece by piece, as
        ``export`` does) as it is read, a few pieces held at a time (issue 45). ``rewrite``
        (``rescale --out`` without ``max_parallelism``): counted piece by piece and rewritten
        run by run (:func:`formats.open.open_in_runs`), never held whole.
        """
        if rewrite and max_parallelism is None:
            from formats.ops.key_group_runs import CHUNK_BYTES
            return open_in_runs(location, CHUNK_BYTES, allow_pickle=allow_pickle,
                                partial=partial, names=names)
        return open_checkpoint(location, allow_pickle=allow_pickle, partial=partial,
                               decode=(decode and count) or allow_pickle, names=names)

    def open_rewritten(self, location: str, *, allow_pickle: bool = False,
                       partial: bool = False, names: OperatorNames | None = None
                       ) -> Checkpoint:
        """The checkpoint at ``location``, opened to be rewritten whole (``migrate``).

        As ``rescale --out`` opens it (:func:`formats.open.open_in_runs`): counted piece by
        piece, then rewritten run by run, never held whole; a snapshot with values that
        cannot be read is decoded here, at once (they are known before the rewrite, which
        refuses to lose them).
        """
        return self.open_checkpoint(location, allow_pickle=allow_pickle, partial=partial,
                                    names=names, rewrite=True)

    def check_source(self, checkpoint: Checkpoint) -> None:
        """Refuse a checkpoint this engine cannot read (every one is fine locally)."""

    def rehash_counter(self) -> RehashCounter | None:
        return None

    def keyed_writer(self) -> KeyedWriter | None:
        return None

    def state_writer(self, checkpoint: Checkpoint | None = None) -> StateWriter | None:
        return None

    def footers(self, checkpoint: Checkpoint) -> dict[str, list[tuple[int, int, int]]] | None:
        return None

    def build(self, inputs: Sequence[str], **settings: Any) -> BuildSummary:
        """``statectl build``: :func:`formats.ops.build.build_state` with ``settings``."""
        from formats.ops.build import build_state
        return build_state(inputs, **settings)


LocalEngine = Engine


class SparkEngine(Engine):
    """Spark, with a master and extra settings.

    ``master`` defaults to the active session, ``$STATECTL_SPARK_MASTER`` or ``local[*]``.
    """

    name = "spark"

    def __init__(self, master: str | None = None, conf: dict[str, str] | None = None) -> None:
        from formats.spark import require_pyspark
        require_pyspark()  # fail at once, with the install command, not halfway through
        self.master, self.conf = master, dict(conf or {})
        self._session: Any = None

    @property
    def session(self) -> Any:
        if self._session is None:
            from formats.spark.jobs import engine_errors
            from formats.spark.session import spark_session
            with engine_errors("starting Spark"):
                self._session = spark_session(self.master, self.conf)
        return self._session

    def open_checkpoint(self, location: str, *, allow_pickle: bool = False, count: bool = True,
                        max_parallelism: int | None = None, partial: bool = False,
                        decode: bool = True, names: OperatorNames | None = None,
                        rewrite: bool = False) -> Checkpoint:
        """A Flink snapshot without decoding its keyed state here; others as locally.

        Spark tasks count a Flink snapshot's entries when ``count`` (:mod:`formats.spark.flink`)
        and rewrite it (``rewrite`` changes nothing here).
        """
        checkpoint = open_checkpoint(location, allow_pickle=allow_pickle, decode=False,
                                     partial=partial, names=names)
        from formats.spark.flink import is_flink_snapshot, open_flink_on_spark
        if not is_flink_snapshot(checkpoint):
            return checkpoint
        return open_flink_on_spark(lambda: self.session, checkpoint, count=count,
                                   rehash_to=max_parallelism)

    def open_rewritten(self, location: str, *, allow_pickle: bool = False,
                       partial: bool = False, names: OperatorNames | None = None
                       ) -> Checkpoint:
        """A Flink snapshot whose keyed state the rewrite's own tasks decode.

        Nothing is decoded here, nor counted first.
        """
        return self.open_checkpoint(location, allow_pickle=allow_pickle, partial=partial,
                                    names=names, count=False)

    def check_source(self, checkpoint: Checkpoint) -> None:
        """Spark tasks read statectl's Parquet files and Flink snapshots it opened itself."""
        from formats.spark.flink import decoded_here
        if not decoded_here(checkpoint):
            return
        raise UnsupportedFormatError(
            f"this {checkpoint.format_name.capitalize()} snapshot was decoded in this process; "
            f"open it with the Spark engine (SparkEngine.open_checkpoint), which has Spark "
            f"tasks decode it")

    def rehash_counter(self) -> RehashCounter:
        from formats.spark.flink import flink_rehash_counter
        return flink_rehash_counter(self.session)

    def keyed_writer(self) -> KeyedWriter:
        from formats.spark.jobs import spark_keyed_writer
        return spark_keyed_writer(self.session)

    def state_writer(self, checkpoint: Checkpoint | None = None) -> StateWriter:
        from formats.spark.flink import FlinkStatesWriter, is_flink_snapshot
        if checkpoint is not None and is_flink_snapshot(checkpoint):
            self.check_source(checkpoint)
            return FlinkStatesWriter(self.session, checkpoint)
        from formats.spark.jobs import spark_state_writer
        return spark_state_writer(self.session)

    def footers(self, checkpoint: Checkpoint) -> dict[str, list[tuple[int, int, int]]]:
        from formats.ops.key_group_stats import footer_row_groups, keyed_files
        if checkpoint.format_name != "statectl":  # counted by tasks when opened
            return footer_row_groups(checkpoint, keyed_files(checkpoint))
        from formats.spark.jobs import spark_footers
        return spark_footers(self.session, checkpoint, keyed_files(checkpoint))

    def build(self, inputs: Sequence[str], **settings: Any) -> BuildSummary:
        """:func:`formats.spark.build.spark_build`: one pass, one checkpoint, no resume.

        ``on_bad_record`` ``"fail"`` is refused (it checkpoints for a resume).
        """
        from formats.spark.build import check_on_bad_record, spark_build
        check_on_bad_record(settings.get("on_bad_record", "refuse"))  # before Spark starts
        unsupported = [name for name in ("checkpoint_every", "resume")
                       if settings.pop(name, None) is not None]
        if unsupported:
            options = ", ".join("--" + n.replace("_", "-") for n in unsupported)
            raise InvalidArgumentError(
                f"{options}: the local engine's; a Spark build is one pass that writes one "
                "checkpoint (run it without, or with --engine local)")
        settings.pop("keep", None)
        settings.pop("progress", None)
        return spark_build(self.session, inputs, **settings)


def open_engine(name: str, master: str | None = None, conf: Sequence[str] = ()) -> Engine:
    """The engine called ``name``; ``master`` and ``conf`` (``key=value``) are Spark's."""
    if name == "local":
        if master is not None or conf:
            raise InvalidArgumentError("--spark-master and --spark-conf need --engine spark")
        return Engine()
    if name == "spark":
        from formats.spark.session import parse_conf
        return SparkEngine(master, parse_conf(conf))
    raise InvalidArgumentError(f"unknown engine {name!r} (one of {', '.join(ENGINES)})")
