"""The ``ctx.meta`` keys of what the global options and a command's reading leave for later.

Apart from :mod:`cli.params`, which reads them, so that the command group sets and checks them
without importing what the parameters need (formats: ``tests/test_startup.py``).
"""

from __future__ import annotations

__all__ = ["ALLOW_PICKLE", "OPENED", "OPERATOR_NAMES", "PARTIAL", "SQL_PLAN", "SQL_PLAN_NAMES"]

#: ``ctx.meta`` key of the global ``--allow-pickle`` flag.
ALLOW_PICKLE = "statectl.allow_pickle"
#: ``ctx.meta`` key of the operator names given by ``--uid``, ``--uid-hash``, ``--uid-file``.
OPERATOR_NAMES = "statectl.operator_names"
#: ``ctx.meta`` keys of the global ``--partial`` flag and of the checkpoints a command read.
PARTIAL = "statectl.partial"
OPENED = "statectl.opened"
#: ``ctx.meta`` keys of the SQL job's plan a reading command was given (``--plan FILE``) and of
#: what it named in each checkpoint read (``formats.flink.sql_plan.PlanNames``).
SQL_PLAN = "statectl.sql_plan"
SQL_PLAN_NAMES = "statectl.sql_plan_names"
