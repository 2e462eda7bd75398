"""The Flink release a savepoint is written for: what each one reads, and how it is chosen.

statectl writes canonical savepoints for Flink 1.15 to 2.3. What differs between releases, and
so what a writer must choose (reference §8; checked against each release's jars and restores,
``make test-flink-versions``):

========== ================== ===================== ==============================
release    ``_metadata``      operator uid, name    generic types (Kryo)
========== ================== ===================== ==============================
1.15       version 3          not stored            Kryo 2.24
1.16-1.20  version 4          not stored            Kryo 2.24
2.0        version 5          stored                Kryo 5
2.1-2.3    version 6          stored                Kryo 5
========== ================== ===================== ==============================

Version 4 added the ``CheckpointProperties`` after the operators (Flink 1.15's
``MetadataV3Serializer`` has none); version 5 the operator's name and uid before its OperatorID;
version 6 only changes unaligned checkpoints' channel state handles, which a savepoint has none
of. A release reads every ``_metadata`` version up to its own, and refuses newer ones
(``Unrecognized checkpoint version number``). The keyed state streams
(``KeyedBackendSerializationProxy`` version 6) are the same in all of them; the operator state
streams' ``OperatorBackendSerializationProxy`` is version 5 up to Flink 1.17 and version 6 (a
compression flag after the version) from 1.18 (:attr:`FlinkRelease.operator_proxy_version`).

**The default target** is the source's release, as far as the snapshot tells: its ``_metadata``
version names a range of releases that write the same savepoint (version 4: 1.16 to 1.20),
and the savepoint is written for the oldest of them, which every release of the range reads.
Within a range the snapshot does not say which release wrote it (that is the ambiguity:
``TargetRelease.inferred`` says so). statectl's own format has no Flink release: the newest
(2.3) is the default, and ``--flink-version`` chooses another.

**Moving between majors.** Serializer snapshots are carried over as the source's Flink wrote
them. Flink 2.x restores 1.x savepoints except what 2.0 dropped; statectl refuses, naming the
state, a target that cannot hold the state:

- Kryo-serialized values (generic types) when the Kryo major changes (1.x writes Kryo 2.24,
  2.x Kryo 5, and neither reads the other's bytes);
- a serializer snapshot class the target release does not have (:data:`SNAPSHOT_CLASSES`: the
  Scala API's and other classes 2.0 removed, classes added in 2.x);
- any state for a 1.x target of a 2.x snapshot other than the serializers 1.x reads as 2.x
  writes them (:data:`DOWNGRADE_SAFE`): Flink does not read savepoints of a newer release.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from formats.flink.types.snapshots import SerializerSnapshot
from statecore.errors import InvalidArgumentError, UnsupportedFormatError

__all__ = ["DOWNGRADE_SAFE", "LATEST", "OLDEST", "SNAPSHOT_CLASSES", "FlinkRelease",
           "TargetRelease", "check_target_holds", "infer_release", "parse_release",
           "snapshot_classes", "target_release"]


@dataclass(frozen=True, order=True)
class FlinkRelease:
    """A Flink release ``major.minor`` (patch releases write the same savepoints)."""

    major: int
    minor: int

    @property
    def label(self) -> str:
        return f"{self.major}.{self.minor}"

    @property
    def metadata_version(self) -> int:
        """The ``_metadata`` version this release writes (see the module doc)."""
        if self.major == 1:
            return 3 if self.minor <= 15 else 4
        return 5 if self.minor == 0 else 6

    @property
    def operator_proxy_version(self) -> int:
        """The ``OperatorBackendSerializationProxy`` version it writes and reads up to.

        Version 6 (Flink 1.18) added the compression flag after the version; 1.17 and older
        refuse it (``Incompatible version: found 6, compatible versions are [5, 4, 3, 2, 1]``).
        The keyed state's proxy is version 6 in every release statectl writes for.
        """
        return 5 if (self.major, self.minor) <= (1, 17) else 6

    @property
    def kryo_major(self) -> int:
        """The Kryo this release serializes generic types with: 2 (2.24) in 1.x, 5 in 2.x."""
        return 2 if self.major == 1 else 5

    @property
    def stores_uids(self) -> bool:
        """Whether ``_metadata`` holds each operator's uid and name (version 5 and later)."""
        return self.metadata_version >= 5

    def __str__(self) -> str:
        return self.label


OLDEST = FlinkRelease(1, 15)
LATEST = FlinkRelease(2, 3)
_RELEASES = tuple(FlinkRelease(1, m) for m in range(15, 21)) + tuple(
    FlinkRelease(2, m) for m in range(0, 4))

#: Per ``_metadata`` version: the releases that write it (oldest, newest).
_WRITERS = {3: (FlinkRelease(1, 11), FlinkRelease(1, 15)),
            4: (FlinkRelease(1, 16), FlinkRelease(1, 20)),
            5: (FlinkRelease(2, 0), FlinkRelease(2, 0)),
            6: (FlinkRelease(2, 1), LATEST)}


def parse_release(text: str) -> FlinkRelease:
    """``"1.20"`` (or ``"1.20.5"``: the patch is ignored) as a release statectl writes for."""
    match = re.fullmatch(r"\s*(\d+)\.(\d+)(?:\.\d+)?\s*", text)
    if match is None:
        raise InvalidArgumentError(f"--flink-version {text!r}: expected MAJOR.MINOR, such as "
                                   f"1.20 or 2.3")
    release = FlinkRelease(int(match.group(1)), int(match.group(2)))
    if release not in _RELEASES:
        raise InvalidArgumentError(
            f"--flink-version {release}: statectl writes savepoints for Flink {OLDEST} to "
            f"{LATEST}")
    return release


def _span(first: FlinkRelease, last: FlinkRelease) -> str:
    return f"Flink {first}" if first == last else f"Flink {first} to {last}"


@dataclass(frozen=True)
class TargetRelease:
    """The release a savepoint is written for, and how it was chosen (for the output)."""

    release: FlinkRelease
    #: ``"option"`` (``--flink-version``), ``"source"`` (the source's ``_metadata``) or
    #: ``"default"`` (a source without a Flink release: the newest)
    chosen_by: str
    #: the releases the choice stands for ("Flink 1.16 to 1.20": they write the same)
    releases: str
    #: why, in words
    reason: str

    @property
    def inferred(self) -> bool:
        return self.chosen_by != "option"

    def to_json(self) -> dict[str, Any]:
        return {"release": self.release.label, "releases": self.releases,
                "metadata_version": self.release.metadata_version,
                "chosen_by": self.chosen_by, "reason": self.reason}

    def describe(self) -> str:
        """One line: which Flink the savepoint is for, and why."""
        return (f"for {self.releases} (_metadata version {self.release.metadata_version}; "
                f"{self.reason})")


def infer_release(metadata_version: int | None) -> TargetRelease:
    """The default target for a source with ``_metadata`` version ``metadata_version``.

    ``None``: not a Flink snapshot (statectl's format), for which the newest release is the
    default.
    """
    if metadata_version is None:
        return TargetRelease(LATEST, "default", f"Flink {LATEST}",
                             "the newest; --flink-version chooses another")
    if metadata_version not in _WRITERS:
        return TargetRelease(LATEST, "source", f"Flink {LATEST}",
                             f"the source's _metadata version {metadata_version} is unknown")
    first, last = _WRITERS[metadata_version]
    target = max(first, OLDEST)
    return TargetRelease(
        target, "source", _span(target, last),
        f"as the source's, which does not record which of {_span(first, last)} wrote it; "
        f"Flink {target} and later restore it" if first != last else
        f"as the source's; Flink {target} and later restore it")


def target_release(option: str | None, metadata_version: int | None) -> TargetRelease:
    """``--flink-version`` when given, else the source's release (:func:`infer_release`)."""
    if option is not None:
        release = parse_release(option)
        return TargetRelease(release, "option", f"Flink {release}",
                             f"--flink-version {option.strip()}")
    return infer_release(metadata_version)


# -- what a release can hold ------------------------------------------------------------------

#: Serializer snapshot classes that only some releases have: ``(prefix or class, first
#: release, last release)``; a class beginning with the prefix exists from the first to the
#: last release (from the jars of Flink 1.15 to 2.3, checked by ``make test-flink-versions``).
SNAPSHOT_CLASSES: tuple[tuple[str, FlinkRelease, FlinkRelease], ...] = (
    ("org.apache.flink.api.scala.", OLDEST, FlinkRelease(1, 20)),  # the Scala API
    ("org.apache.flink.api.java.typeutils.runtime.EitherSerializerSnapshot", OLDEST,
     FlinkRelease(1, 20)),
    ("org.apache.flink.api.common.typeutils.base.GenericArraySerializerConfigSnapshot",
     OLDEST, FlinkRelease(1, 20)),
    ("org.apache.flink.streaming.api.functions.sink.TwoPhaseCommitSinkFunction$", OLDEST,
     FlinkRelease(1, 20)),
    ("org.apache.flink.streaming.api.functions.sink.legacy.TwoPhaseCommitSinkFunction$",
     FlinkRelease(2, 0), LATEST),
    ("org.apache.flink.runtime.state.v2.ttl.", FlinkRelease(2, 0), LATEST),
    ("org.apache.flink.runtime.state.ttl.TtlAwareSerializerSnapshot", FlinkRelease(2, 0),
     LATEST),
    ("org.apache.flink.api.common.typeutils.base.SetSerializerSnapshot", FlinkRelease(2, 0),
     LATEST),
    ("org.apache.flink.api.common.typeutils.base.VariantSerializer$", FlinkRelease(2, 1),
     LATEST),
    ("org.apache.flink.api.common.typeutils.base.BitmapSerializer$", FlinkRelease(2, 3),
     LATEST),
)

#: Serializer snapshots that Flink 1.x reads as Flink 2.x writes them (class and version
#: unchanged): what a 2.x snapshot written for a 1.x target may hold. Prefixes of class names;
#: each is proven by Flink 1.20 restoring the 2.3 fixtures of the java and SQL jobs written for
#: it (``tests/test_flink_release_restore.py``). Others are refused until proven.
DOWNGRADE_SAFE: tuple[str, ...] = (
    "org.apache.flink.api.common.typeutils.base.",  # String, Long, Int, List, Map, byte[]
    "org.apache.flink.runtime.state.VoidNamespaceSerializer$",
    "org.apache.flink.streaming.api.operators.TimerSerializerSnapshot",
    "org.apache.flink.table.runtime.typeutils.RowDataSerializer$",
    "org.apache.flink.table.runtime.typeutils.StringDataSerializer$",
    "org.apache.flink.table.runtime.typeutils.RawValueDataSerializer$",
    "org.apache.flink.table.runtime.typeutils.ExternalSerializer$",
    "org.apache.flink.table.dataview.NullSerializer$",
)


def _class_range(class_name: str) -> tuple[FlinkRelease, FlinkRelease] | None:
    for prefix, first, last in SNAPSHOT_CLASSES:
        if class_name.startswith(prefix):
            return first, last
    return None


def snapshot_classes(snapshot: SerializerSnapshot) -> Iterator[str]:
    """Every serializer snapshot class in ``snapshot``'s tree (nested, POJO fields, ...)."""
    yield snapshot.class_name
    for nested in snapshot.nested:
        yield from snapshot_classes(nested)
    for value in snapshot.outer.values():
        yield from _classes_in(value)


def _classes_in(value: Any) -> Iterator[str]:
    if isinstance(value, SerializerSnapshot):
        yield from snapshot_classes(value)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _classes_in(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _classes_in(item)


def _is_kryo(class_name: str) -> bool:
    return class_name.endswith("KryoSerializerSnapshot") or ".kryo." in class_name


def check_target_holds(target: TargetRelease, source_metadata_version: int | None,
                       serializers: Iterable[tuple[str, SerializerSnapshot]]) -> None:
    """Refuse ``target`` when it cannot restore the state (see the module doc).

    ``serializers``: ``(what, snapshot)`` for every serializer the savepoint carries over, as
    the source wrote it (``what`` names the state in the error). Nothing to check when the
    source is statectl's format (``source_metadata_version`` ``None``): its serializers are
    written for the target.
    """
    if source_metadata_version is None:
        return
    release = target.release
    source_first = _WRITERS.get(source_metadata_version, (LATEST, LATEST))[0]
    source_kryo = 2 if source_first.major == 1 else 5
    downgrade = source_first.major > release.major
    why = f"Flink {release} ({target.reason})" if target.inferred else f"Flink {release}"
    carried = [(what, class_name) for what, snapshot in serializers
               for class_name in snapshot_classes(snapshot)]
    # the most telling reason first: Kryo's bytes, then a class the release lacks
    for what, class_name in carried:
        if _is_kryo(class_name) and source_kryo != release.kryo_major:
            raise UnsupportedFormatError(
                f"{what} holds generic (Kryo-serialized) values, which the source's Flink "
                f"wrote with Kryo {source_kryo}; {why} reads Kryo {release.kryo_major} "
                f"and cannot restore them: write for Flink "
                f"{'1.16 to 1.20' if source_kryo == 2 else '2.0 or later'} instead")
    for what, class_name in carried:
        span = _class_range(class_name)
        if span is not None and not span[0] <= release <= span[1]:
            raise UnsupportedFormatError(
                f"{what} uses serializer {class_name.rsplit('.', 1)[-1]}, which only "
                f"{_span(*span)} has; {why} cannot restore it")
    for what, class_name in carried:
        if downgrade and not class_name.startswith(DOWNGRADE_SAFE):
            raise UnsupportedFormatError(
                f"{what} uses serializer {class_name.rsplit('.', 1)[-1]}, which Flink "
                f"{source_first.major}.x may write in a form {why} does not read: Flink "
                f"reads savepoints of its own and older releases, and statectl writes this "
                f"state for an older major only where it knows the forms are the same")
