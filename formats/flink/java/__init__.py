"""Java's byte streams, both ways: what every Flink reader, writer and type codec stands on.

:mod:`~formats.flink.java.input` reads ``DataInput`` (big-endian numbers, ``readUTF``,
``StringValue``), :mod:`~formats.flink.java.output` writes ``DataOutput`` the same way, and
:mod:`~formats.flink.java.serialization` walks Java object serialization streams without
deserializing anything.

May import: :mod:`statecore` only (``tests/test_house.py`` checks).
"""
