"""Every byte of a Flink ``_metadata``, checked as Flink reads it: what ``verify`` reports.

Opening a snapshot parses the master states and operator states strictly
(:func:`formats.flink.read.metadata.parse_metadata`: a damaged one is a ``metadata`` problem); this
module adds what opening leaves aside: the checkpoint properties at the end
(:mod:`formats.flink.read.checkpoint_properties`, read by ``Checkpoints.loadCheckpointMetadata``),
bytes after them (Flink's loader leaves them unread: a warning), and each source coordinator's
state (:func:`formats.flink.read.sources.check_coordinator_state`, read when the job restores).
"""

from __future__ import annotations

from collections.abc import Sequence

from formats.flink.read.checkpoint_properties import check_properties
from formats.flink.read.metadata import FlinkMetadata, parse_metadata
from formats.flink.read.sources import check_coordinator_state
from statecore.errors import StatectlError

__all__ = ["METADATA_FILE", "check_metadata_bytes", "metadata_problems"]

METADATA_FILE = "_metadata"

#: ``(kind, where, message)``: kinds as ``verify`` has them (:mod:`formats.ops.verify`)
Finding = tuple[str, str, str]


def metadata_problems(flink: FlinkMetadata, uids: Sequence[str]) -> list[Finding]:
    """What Flink would refuse in a parsed ``_metadata`` beyond its operator states.

    Also what it leaves unread (``trailing-bytes``, ``unchecked`` warnings). ``uids`` name the
    operators, in ``flink.operators``' order.
    """
    found: list[Finding] = []
    trailing = len(flink.properties)
    if flink.version >= 4:
        check = check_properties(flink.properties, METADATA_FILE)
        if check.problem is not None:
            found.append(("metadata", METADATA_FILE, check.problem))
        trailing = check.trailing
    if trailing:
        after = "checkpoint properties" if flink.version >= 4 else "operator states"
        found.append(("trailing-bytes", METADATA_FILE,
                      f"{trailing} bytes after the {after}: Flink's loader leaves them unread "
                      f"(Flink writes none)"))
    for op, uid in zip(flink.operators, uids, strict=False):
        if op.coordinator_state is None or op.coordinator_state.data is None:
            continue
        where = f"{uid}/(coordinator state)"
        coordinator = check_coordinator_state(op.coordinator_state.data)
        if coordinator.problem is not None:
            found.append(("unreadable", where,
                          f"a restore would refuse it: {coordinator.problem}"))
        elif coordinator.unchecked:
            found.append(("unchecked", where, "the enumerator checkpoint of a source statectl "
                                              "does not know: its envelope was checked, not "
                                              "its content"))
    return found


def check_metadata_bytes(data: bytes) -> list[Finding]:
    """Every finding about a whole ``_metadata`` file's bytes (the state files aside)."""
    try:
        flink = parse_metadata(data, METADATA_FILE)
    except StatectlError as exc:
        return [("metadata", METADATA_FILE, str(exc))]
    return metadata_problems(flink, [op.uid or op.operator_id for op in flink.operators])
