"""The ``ctx.meta`` keys of what the global options and a command's reading leave for later.

Apart from :mod:`cli.params`, which reads them, so that the command group sets and checks them
without importing what the parameters need (formats: ``tests/test_startup.py``).
"""

from __future__ import annotations

__all__ = ["ALLOW_PICKLE", "OPENED", "OPERATOR_NAMES", "PARTIAL"]

#: ``ctx.meta`` key of the global ``--allow-pickle`` flag.
ALLOW_PICKLE = "statectl.allow_pickle"
#: ``ctx.meta`` key of the operator names given by ``--uid``, ``--uid-hash``, ``--uid-file``.
OPERATOR_NAMES = "statectl.operator_names"
#: ``ctx.meta`` keys of the global ``--partial`` flag and of the checkpoints a command read.
PARTIAL = "statectl.partial"
OPENED = "statectl.opened"
