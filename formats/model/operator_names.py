"""Names for operators a snapshot does not name: the job's uids, given by the user.

Flink 1.x ``_metadata`` (version 4 and older) stores no operator uid or name, only each
operator's OperatorID; Flink derives that ID from the uid the job set (``StreamGraphHasherV2``:
MurmurHash3 x64 128, seed 0, over the uid's UTF-8 bytes; reference §8), so a uid the user
knows names the operator whose ID it hashes to (``--uid str-keyed``). An operator whose ID was
set directly (``setUidHash``) is named with the ID (``--uid-hash 4e3b...=str-keyed``). A file
holds either form, one per line (``#`` starts a comment).

A uid the snapshot stores itself always wins; a given name that matches no operator is
reported (:attr:`OperatorNames.unmatched`), never an error. Named operators say where their
uid came from (``OperatorMetadata.uid_from``: ``"uid"`` or ``"uid-hash"``), and a savepoint
written for Flink 2.x stores the uid.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from statecore.errors import InvalidArgumentError
from statecore.hashing import operator_id_of_uid

__all__ = ["OperatorNames"]

_HEX_ID = re.compile(r"[0-9a-fA-F]{32}")


@dataclass(frozen=True)
class OperatorNames:
    """OperatorID (32 lowercase hex digits) -> ``(uid, how it was given)``."""

    by_id: dict[str, tuple[str, str]] = field(default_factory=dict)

    @classmethod
    def parse(cls, uids: Iterable[str] = (), uid_hashes: Iterable[str] = (),
              lines: Iterable[str] = ()) -> OperatorNames:
        """From ``--uid NAME``, ``--uid-hash HEX=NAME`` and the lines of a uid file."""
        by_id: dict[str, tuple[str, str]] = {}

        def add(op_id: str, uid: str, how: str) -> None:
            if not uid:
                raise InvalidArgumentError(f"--{how}: an empty uid")
            earlier = by_id.get(op_id)
            if earlier is not None and earlier[0] != uid:
                raise InvalidArgumentError(
                    f"--{how}: OperatorID {op_id} is named twice ({earlier[0]!r}, {uid!r})")
            by_id[op_id] = (uid, how)

        def add_hash(text: str) -> None:
            op_id, sep, uid = text.partition("=")
            if not sep or not _HEX_ID.fullmatch(op_id.strip()):
                raise InvalidArgumentError(f"--uid-hash {text!r}: expected HEX=UID, HEX being "
                                           f"an OperatorID of 32 hex digits")
            add(op_id.strip().lower(), uid.strip(), "uid-hash")

        for uid in uids:
            add(operator_id_of_uid(uid), uid, "uid")
        for text in uid_hashes:
            add_hash(text)
        for number, raw in enumerate(lines, 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            if "=" in line and _HEX_ID.fullmatch(line.partition("=")[0].strip()):
                add_hash(line)
            elif "=" in line:
                raise InvalidArgumentError(f"uid file, line {number}: {raw.strip()!r} is "
                                           f"neither a uid nor HEX=UID")
            else:
                add(operator_id_of_uid(line), line, "uid")
        return cls(by_id)

    def __bool__(self) -> bool:
        return bool(self.by_id)

    def uid_of(self, operator_id: str) -> tuple[str, str] | None:
        """``(uid, how it was given)`` for the operator with ``operator_id``, if named."""
        return self.by_id.get(operator_id)

    def unmatched(self, operator_ids: Iterable[str]) -> list[str]:
        """The given uids that name no operator of a snapshot with ``operator_ids``."""
        present = set(operator_ids)
        return [uid for op_id, (uid, _) in self.by_id.items() if op_id not in present]
