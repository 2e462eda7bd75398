"""The model: the opened checkpoint every reader produces and every operation consumes.

:mod:`~formats.model.checkpoint` (``Checkpoint``, format-neutral: operators, states, key
groups, tables of state), :mod:`~formats.model.columns` and :mod:`~formats.model.arrow_types`
(state types as Arrow columns, values both ways), :mod:`~formats.model.key_hash` (Flink's
key-group assignment over whole columns), :mod:`~formats.model.sources` (what a job's sources
have read), :mod:`~formats.model.operator_names` (uids given for operators a snapshot does not
name), :mod:`~formats.model.json_contract` (the JSON contract's version).

May import: :mod:`statecore`, pyarrow, numpy. Never :mod:`formats.storage`, a codec
(``formats.statectl``, ``formats.flink``, ``formats.inputs``), an operation or the CLI
(``tests/test_house.py`` checks).
"""
