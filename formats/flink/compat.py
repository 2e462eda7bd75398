"""How a new job version restores one operator of a Flink snapshot: each state's verdict.

The new job is known by a snapshot it wrote (its serializer snapshots are what it registers);
:func:`restore_checks` compares the operator's state headers in both, as Flink's backends do on
restore:

* the key serializer must be compatible as is or reconfigured -- migration or worse is refused
  ("The new key serializer must be compatible": ``HeapRestoreOperation``,
  ``RocksDBFullRestoreOperation``, ``RocksDBIncrementalRestoreOperation``);
* a keyed state's kind must not change (``RegisteredKeyValueStateBackendMetaInfo
  .checkStateMetaInfo``: "Incompatible key/value state types");
* its namespace serializer likewise must not need migration (``HeapKeyedStateBackend
  .tryRegisterStateTable``, ``RocksDBKeyedStateBackend.updateRestoredStateMetaInfo``);
* its value serializer may need migration, which both backends do, but not be incompatible;
  RocksDB refuses a map state whose user keys need migration (``RocksDBKeyedStateBackend
  .migrateStateValues``: "migration for MapState currently only allows value schema
  evolutions"), so such a state is called incompatible (the heap backend would migrate it);
* an operator state's mode must not change (``DefaultOperatorStateBackend``: "Incompatible
  redistribution mode"), nor its serializers become incompatible (the operator state backend
  holds objects: migration is implicit);
* a state the new job does not register is restored and kept as it was; one only the new job
  registers starts empty.

Each serializer pair is resolved by :func:`formats.flink.types.compatibility.resolve`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from formats.flink.read.state_meta import KeyedHeader, StateInfo
from formats.flink.types.compatibility import Resolution, resolve, worst_resolution
from formats.flink.types.snapshots import SerializerSnapshot
from formats.model.compatibility import StateCheck, Verdict

__all__ = ["OperatorSchemas", "restore_checks"]

KEY_RULE = "HeapRestoreOperation / RocksDB restore operations"
KIND_RULE = "RegisteredKeyValueStateBackendMetaInfo.checkStateMetaInfo"
NAMESPACE_RULE = "HeapKeyedStateBackend / RocksDBKeyedStateBackend"
MAP_KEY_RULE = "RocksDBKeyedStateBackend.migrateStateValues"
MODE_RULE = "DefaultOperatorStateBackend"


@dataclass(frozen=True)
class OperatorSchemas:
    """What an operator's snapshot says of its serializers.

    Its keyed state header (``None``: no keyed state) and, per operator state, its mode and
    meta info (``None``: unread).
    """

    keyed: KeyedHeader | None
    operator: dict[str, tuple[str, StateInfo | None]] = field(default_factory=dict)
    #: the Kryo major of the Flink that wrote the snapshot (2: Flink 1.x, 5: 2.x)
    kryo_major: int = 5


def restore_checks(old: OperatorSchemas, new: OperatorSchemas) -> list[StateCheck]:
    """Every state of an operator as ``old`` holds it, restored by the job that wrote ``new``."""
    checks: list[StateCheck] = []
    old_header, new_header = old.keyed, new.keyed
    kryo = (old.kryo_major, new.kryo_major)
    old_states = {s.name: s for s in (old_header.states if old_header else [])}
    new_states = {s.name: s for s in (new_header.states if new_header else [])}
    if old_header is not None and new_header is not None:
        key = resolve(old_header.key_snapshot, new_header.key_snapshot, "key", kryo)
        if key.verdict == Verdict.MIGRATION:
            key = Resolution(Verdict.INCOMPATIBLE, key.where, key.why + " (a key serializer "
                             "that needs migration is refused)", KEY_RULE)
        checks.append(StateCheck("(key)", "key", key.verdict, key.detail, key.cited or KEY_RULE,
                                 old_header.key_snapshot.describe(),
                                 new_header.key_snapshot.describe()))
    elif old_states and new_header is None:
        checks.append(StateCheck("(key)", "key", Verdict.UNKNOWN, "the new job's operator has "
                                 "no keyed state in its snapshot: its key serializer is unknown",
                                 KEY_RULE, old_header.key_snapshot.describe() if old_header
                                 else None, None))
    for name in sorted(old_states.keys() | new_states.keys()):
        checks.append(_keyed(name, old_states.get(name), new_states.get(name), kryo))
    checks += _operator_states(old.operator, new.operator, kryo)
    return checks


def _describe(info: StateInfo | None) -> str | None:
    if info is None:
        return None
    value = info.serializers.get("VALUE_SERIALIZER")
    described = value.describe() if value is not None else "?"
    return f"{info.kind or info.backend_type.lower()} {described}"


def _keyed(name: str, old: StateInfo | None, new: StateInfo | None, kryo: tuple[int, int]
           ) -> StateCheck:
    if old is not None and new is None and kryo[0] != kryo[1] and any(
            _has_kryo(s) for s in old.serializers.values()):
        return StateCheck(name, "keyed", Verdict.INCOMPATIBLE, "the new job does not register "
                          f"it, and Flink restores it with its old serializers: Kryo {kryo[1]} "
                          f"does not read what Kryo {kryo[0]} wrote (drop it)",
                          "KryoSerializer (Flink 2.0 release notes)", _describe(old), None)
    if old is None or new is None:
        detail = ("only the new job registers it: it starts empty" if old is None else
                  "the new job does not register it (in its snapshot): Flink restores it and "
                  "keeps it as it is")
        return StateCheck(name, "keyed", Verdict.AS_IS, detail, "", _describe(old),
                          _describe(new))
    result = _keyed_resolution(old, new, kryo)
    return StateCheck(name, "keyed", result.verdict, result.detail, result.cited,
                      _describe(old), _describe(new),
                      result.verdict == Verdict.INCOMPATIBLE and result.migratable
                      and old.kind != "timers")


def _has_kryo(snapshot: SerializerSnapshot) -> bool:
    return snapshot.short_name == "KryoSerializerSnapshot" or any(
        _has_kryo(s) for s in (*snapshot.nested, *snapshot.outer.get("registered_snapshots", ()),
                               *snapshot.outer.get("subclass_snapshots", ())))


def _keyed_resolution(old: StateInfo, new: StateInfo, kryo: tuple[int, int]) -> Resolution:
    if (old.kind or old.backend_type) != (new.kind or new.backend_type):
        return Resolution(Verdict.INCOMPATIBLE, "", f"state kind {old.kind or old.backend_type}"
                          f" -> {new.kind or new.backend_type}", KIND_RULE)
    namespace = _pair(old, new, "NAMESPACE_SERIALIZER", "namespace", kryo)
    if namespace.verdict == Verdict.MIGRATION:
        namespace = Resolution(Verdict.INCOMPATIBLE, namespace.where, namespace.why
                               + " (a namespace serializer that needs migration is refused)",
                               NAMESPACE_RULE)
    elif namespace.migratable:  # migrate converts values, not namespaces
        namespace = replace(namespace, migratable=False)
    value = _pair(old, new, "VALUE_SERIALIZER", "", kryo)
    if value.verdict == Verdict.MIGRATION and old.kind == "map":
        user_key = _map_user_key(old, new, kryo)
        if user_key is not None and user_key.verdict in (Verdict.MIGRATION, Verdict.INCOMPATIBLE):
            value = Resolution(Verdict.INCOMPATIBLE, user_key.where, user_key.why + " (RocksDB "
                               "refuses migrating a map state's keys; the heap backend would "
                               "migrate them)", MAP_KEY_RULE)
    others = [replace(_pair(old, new, k, k.split("_")[0].lower(), kryo), migratable=False)
              for k in sorted(old.serializers.keys() | new.serializers.keys())
              if k not in ("NAMESPACE_SERIALIZER", "VALUE_SERIALIZER")]
    return worst_resolution(namespace, value, *others)


def _pair(old: StateInfo, new: StateInfo, key: str, where: str, kryo: tuple[int, int]
          ) -> Resolution:
    before, after = old.serializers.get(key), new.serializers.get(key)
    if before is None and after is None:
        return Resolution(Verdict.AS_IS)
    if before is None or after is None:
        change = "added" if before is None else "removed"
        return Resolution(Verdict.INCOMPATIBLE, where, f"{key} {change}", KIND_RULE)
    return resolve(before, after, where, kryo)


def _map_user_key(old: StateInfo, new: StateInfo, kryo: tuple[int, int]) -> Resolution | None:
    before, after = old.serializers.get("VALUE_SERIALIZER"), new.serializers.get(
        "VALUE_SERIALIZER")
    if before is None or after is None or not before.nested or not after.nested:
        return None
    return resolve(_unwrap(before).nested[0], _unwrap(after).nested[0], "map key", kryo)


def _unwrap(snapshot: SerializerSnapshot) -> SerializerSnapshot:
    """A map serializer, out of a TTL serializer's wrapping (``TtlSerializer<MapSerializer>``)."""
    while snapshot.short_name.startswith("TtlStateFactory") and len(snapshot.nested) == 2:
        snapshot = snapshot.nested[1]
    return snapshot


def _operator_states(before: dict[str, tuple[str, StateInfo | None]],
                     after: dict[str, tuple[str, StateInfo | None]], kryo: tuple[int, int]
                     ) -> list[StateCheck]:
    checks = []
    for name in sorted(before.keys() | after.keys()):
        a, b = before.get(name), after.get(name)
        if a is None or b is None:
            checks.append(StateCheck(name, "operator", Verdict.AS_IS,
                                     "only the new job registers it: it starts empty" if a is None
                                     else "the new job does not register it: Flink restores it "
                                     "and keeps it as it is", "", _mode(a), _mode(b)))
            continue
        mode_a, mode_b = a[0], b[0]
        if mode_a != mode_b:
            result = Resolution(Verdict.INCOMPATIBLE, "", f"mode {mode_a} -> {mode_b}", MODE_RULE)
        elif a[1] is None or b[1] is None:
            result = Resolution(Verdict.UNKNOWN, "", "statectl could not read its meta info")
        else:
            result = max((_pair(a[1], b[1], k, k.split("_")[0].lower(), kryo) for k in sorted(
                a[1].serializers.keys() | b[1].serializers.keys())),
                key=lambda r: r.verdict, default=Resolution(Verdict.AS_IS))
            if result.verdict == Verdict.MIGRATION:  # objects on the heap: nothing to migrate
                result = Resolution(Verdict.AS_IS, result.where, result.why, MODE_RULE)
        checks.append(StateCheck(name, "operator", result.verdict, result.detail, result.cited,
                                 _mode(a), _mode(b)))
    return checks


def _mode(found: tuple[str, StateInfo | None] | None) -> str | None:
    if found is None:
        return None
    mode, info = found
    value = None if info is None else info.serializers.get("VALUE_SERIALIZER")
    return f"{mode.lower()} {value.describe() if value is not None else ''}".strip()
