"""The compiled decoder, loaded once: the module, or ``None``.

Its sources: ``cdecoder.c`` (the module; Flink's keyed key groups) and ``cdecoder_rocksdb.c``
(RocksDB's tables). ``None`` where it was not built (``setup.py`` builds it where a C compiler
is found; the install goes on without one) or ``STATECTL_PURE_PYTHON=1`` switches it off.
Nothing else is imported here, so that any reader may ask (the RocksDB block reader too). What
it decodes and when: :mod:`formats.flink.read.speedups`.
"""

from __future__ import annotations

import os
from types import ModuleType

__all__ = ["SPEEDUPS", "switched_off"]


def switched_off() -> bool:
    """Whether ``STATECTL_PURE_PYTHON`` asks for the Python readers alone."""
    return os.environ.get("STATECTL_PURE_PYTHON", "") not in ("", "0")


def _load() -> ModuleType | None:
    if switched_off():
        return None
    try:
        from formats.flink.read import cdecoder  # type: ignore[attr-defined]
    except ImportError:
        return None
    return cdecoder  # type: ignore[no-any-return]


SPEEDUPS: ModuleType | None = _load()
