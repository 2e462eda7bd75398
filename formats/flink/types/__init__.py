"""Flink's types: serializer snapshots, the codecs that read values, the encoders that write them.

A newcomer finds a type by file name; the reader of a type and its writer are mirrors:

=======================  =================================================================
module                   what
=======================  =================================================================
``snapshots.py``         serializer snapshots as a state's header stores them (class, version,
                         nested snapshots, a POJO's fields, an enum's constants, Kryo's
                         registrations)
``codec.py``             :class:`Codec`: a reader of one value, its statectl spec, Flink's length
``codecs.py``            snapshot -> codec (:func:`codec_for`): numbers, strings, windows, lists,
                         maps, tuples, rows, TTL, timers; what stays undecodable and why
``pojo.py``              ``PojoSerializer`` and ``EnumSerializer``
``temporal.py``          ``java.time``, ``java.sql``, ``Date``, ``BigInteger``, ``BigDecimal``
``arrays.py``            ``GenericArraySerializer`` (``T[]``)
``kryo.py``              values Flink hands to Kryo (generic types)
``row_data.py``          Flink SQL's ``RowDataSerializer``: its rows, their encoder and hash
``binary_data.py``       ``BinaryRowData``/``BinaryArrayData``/``BinaryMapData`` by ``LogicalType``
``logical_types.py``     the Java-serialized ``LogicalType``s of SQL snapshots
``table_runtime.py``     the table runtime's other serializers (timestamps, decimals, arrays,
                         maps, raw values, linked lists, sorted maps, window keys, windows)
``cep.py``               flink-cep's: ``NFAState``, the shared buffer, ``Lockable``
``encoders.py``          the mirror of the codecs: values back to Flink's bytes
=======================  =================================================================
"""
