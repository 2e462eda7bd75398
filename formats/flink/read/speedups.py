"""The compiled decoder of common key groups (``cdecoder.c``), and when it is used.

``cdecoder`` decodes, in C, a key group of a heap or canonical keyed stream whose states are
all made of primitives Flink writes in fixed bytes, ASCII Strings and the void namespace
(value, list and map state of those, and timers): the commonest state of DataStream jobs. It
takes a key group only when it decodes it exactly as the Python readers of
:mod:`formats.flink.read.keyed` would, and otherwise gives it back (``None``): those readers
then decode it, and say what is wrong with it. They stay the definition and the fallback.
Its RocksDB part (``cdecoder_rocksdb.c``) reads SST files' data blocks, indexes and merges
tables' versions the same way, for :mod:`formats.flink.read.rocksdb` (``sst``, ``block``,
``merge``), which call it where they would otherwise do that work in Python.

It is built by the project's install step (``pip install .``: ``setup.py``, an optional
extension: without a compiler the install goes on without it) and used unless
``STATECTL_PURE_PYTHON=1``. :data:`SPEEDUPS` is the module, or ``None`` (not built, or
switched off); ``statectl --version`` says which (``cli.main``, by the built file alone).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from formats.flink.java.input import DataReader
from formats.flink.read.compiled import SPEEDUPS
from formats.flink.read.state_meta import KeyedHeader, StateInfo
from formats.flink.types.codec import Codec
from formats.flink.types.codecs import STRING_READ, VOID_READ
from statecore.serializers import VOID_NAMESPACE

__all__ = ["SPEEDUPS", "Attempts", "PairRuns", "Plans", "pair_runs", "plans"]


#: the type codes of ``cdecoder.c`` (PRIMS): each codec's reader, as the Python readers
#: decode it
_CODES: dict[Any, int] = {STRING_READ: 1, DataReader.i32: 2, DataReader.i64: 3, DataReader.i16: 4,
          DataReader.i8: 5, DataReader.boolean: 6, DataReader.f32: 7, DataReader.f64: 8}
#: codes of keys compared by their bytes where the Python readers compare them by value (a
#: map's adjacent pairs): equal values have equal bytes (floats do not: 0.0 and -0.0, NaN)
_BYTES_EQUAL = frozenset({1, 2, 3, 4, 5, 6})
_KINDS = {"value": 0, "list": 1, "map": 2, "timers": 3}

#: one plan per state of a stream's header; ``None`` where ``cdecoder`` takes none
Plans = tuple[tuple[int, int, int, int, int] | None, ...]


def _code(codec: Codec | None) -> int:
    """The type code of a codec read as its primitive, 0: none."""
    if codec is None or codec.ttl or codec.read_all is not None:
        return 0
    return _CODES.get(codec.read, 0)


def _plan(state: StateInfo, key: Codec | None) -> tuple[int, int, int, int, int] | None:
    """``(kind, key, namespace, value, user key)`` codes of ``state``; ``None``: not taken."""
    kind = _KINDS.get(state.kind)
    key_code = _code(key)
    if kind is None or not key_code or state.unread or state.value is None:
        return None
    value = state.value
    if kind == 3:  # timers: TimerSerializer<key, void namespace> (codecs._timer_codec)
        assert key is not None
        if value.name != f"Timer<{key.name},VoidNamespace>":
            return None
        return kind, key_code, 1, 0, 0
    if state.namespace is None or state.namespace.read is not VOID_READ:
        return None
    element = state.element
    if kind == 0:
        code = _code(value)
        return (kind, key_code, 1, code, 0) if code else None
    if kind == 1:  # ListSerializer (codecs._list_codec) of a primitive
        code = _code(element)
        if not code or element is None or value.name != f"List<{element.name}>":
            return None
        return kind, key_code, 1, code, 0
    user_key = state.user_key  # MapSerializer (codecs._map_codec) of primitives
    code, user_code = _code(element), _code(user_key)
    if (not code or not user_code or key_code not in _BYTES_EQUAL or element is None
            or user_key is None or value.name != f"Map<{user_key.name},{element.name}>"):
        return None
    return kind, key_code, 1, code, user_code


def plans(header: KeyedHeader) -> Plans | None:
    """The plans of a stream's states; ``None``: ``cdecoder`` could take no key group of it.

    Not built, or no state with a plan. A key group that holds entries of a state without one
    is given back.
    """
    if SPEEDUPS is None:
        return None
    out = tuple(_plan(s, header.key) for s in header.states)
    return out if any(p is not None for p in out) else None


class Attempts:
    """Whether to keep trying ``cdecoder`` on a stream's key groups.

    A stream whose key groups it keeps giving back (a state without a plan in each) is left to
    the Python readers after :data:`GIVE_UPS` more of them than it took: every key group
    given back was partly decoded twice.
    """

    GIVE_UPS = 8

    def __init__(self) -> None:
        self.taken = self.given_back = 0

    @property
    def worth_it(self) -> bool:
        return self.given_back - self.taken < self.GIVE_UPS

    def count(self, taken: bool) -> None:
        if taken:
            self.taken += 1
        else:
            self.given_back += 1


#: decodes a state's RocksDB pairs of one key group (keys, values, key group) into its entries:
#: their bytes (keys' and values' together); None: not taken (nothing added), the Python
#: readers decode them
PairRuns = Callable[[list[bytes], list[bytes], int], int | None]


def pair_runs(state: StateInfo, key: Codec | None, out: list[Any], prefix: int
              ) -> PairRuns | None:
    """The compiled decoder of ``state``'s RocksDB pairs into ``out``; ``None``: none.

    A run it gives back leaves ``out`` as it was (entries appended are dropped; a map it
    extended gets the same user keys and values from the Python readers again).
    """
    plan = _plan(state, key) if SPEEDUPS is not None else None
    if plan is None:
        return None
    assert SPEEDUPS is not None
    run, attempts = SPEEDUPS.pairs_run, Attempts()

    def decode(keys: list[bytes], values: list[bytes], key_group: int) -> int | None:
        if not attempts.worth_it:
            return None
        before = len(out)
        size = run(keys, values, prefix, key_group, plan, out, VOID_NAMESPACE)
        attempts.count(size is not None)
        if size is None:
            del out[before:]
        return size  # type: ignore[no-any-return]
    return decode
