"""Storage: where bytes live and how writers agree, on a local disk or an object store.

:mod:`~formats.storage.filesystems` (a location as a pyarrow filesystem, URIs, path guards),
:mod:`~formats.storage.commit` (the commit protocol: how a checkpoint, savepoint or export
becomes complete), :mod:`~formats.storage.conditional` (create-only and compare-and-swap
writes), :mod:`~formats.storage.owners` (who holds a marker, claim or lease),
:mod:`~formats.storage.io_stats` (counting the bytes a read costs),
:mod:`~formats.storage.concurrent` (many small reads at once, their results in order).

May import: :mod:`statecore`, pyarrow. Never the model, a codec, an operation or the CLI
(``tests/test_house.py`` checks).
"""
