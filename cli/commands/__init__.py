"""The ``statectl`` subcommands, one module each.

:data:`cli.main.COMMANDS` names each and where it is; the group imports a command's module when
the command is used, so this package imports nothing itself (``tests/test_startup.py``).
"""
