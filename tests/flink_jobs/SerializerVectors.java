import java.math.BigDecimal;
import java.math.BigInteger;
import java.sql.Time;
import java.sql.Timestamp;
import java.time.DayOfWeek;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.lang.reflect.Constructor;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Date;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;

import org.apache.flink.api.common.serialization.SerializerConfigImpl;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.TypeSerializerSnapshot;
import org.apache.flink.api.common.typeutils.base.BigDecSerializer;
import org.apache.flink.api.common.typeutils.base.BooleanValueSerializer;
import org.apache.flink.api.common.typeutils.base.ByteValueSerializer;
import org.apache.flink.api.common.typeutils.base.CharValueSerializer;
import org.apache.flink.api.common.typeutils.base.DoubleValueSerializer;
import org.apache.flink.api.common.typeutils.base.FloatValueSerializer;
import org.apache.flink.api.common.typeutils.base.IntValueSerializer;
import org.apache.flink.api.common.typeutils.base.LongValueSerializer;
import org.apache.flink.api.common.typeutils.base.NullValueSerializer;
import org.apache.flink.api.common.typeutils.base.ShortValueSerializer;
import org.apache.flink.api.common.typeutils.base.StringValueSerializer;
import org.apache.flink.api.common.typeutils.base.BigIntSerializer;
import org.apache.flink.api.common.typeutils.base.DateSerializer;
import org.apache.flink.api.common.typeutils.base.EnumSerializer;
import org.apache.flink.api.common.typeutils.base.GenericArraySerializer;
import org.apache.flink.api.common.typeutils.base.InstantSerializer;
import org.apache.flink.api.common.typeutils.base.IntSerializer;
import org.apache.flink.api.common.typeutils.base.ListSerializer;
import org.apache.flink.api.common.typeutils.base.LocalDateSerializer;
import org.apache.flink.api.common.typeutils.base.LocalDateTimeSerializer;
import org.apache.flink.api.common.typeutils.base.LocalTimeSerializer;
import org.apache.flink.api.common.typeutils.base.LongSerializer;
import org.apache.flink.api.common.typeutils.base.MapSerializer;
import org.apache.flink.api.common.typeutils.base.SqlDateSerializer;
import org.apache.flink.api.common.typeutils.base.SqlTimeSerializer;
import org.apache.flink.api.common.typeutils.base.SqlTimestampSerializer;
import org.apache.flink.api.common.typeutils.base.StringSerializer;
import org.apache.flink.api.common.typeutils.base.array.BooleanPrimitiveArraySerializer;
import org.apache.flink.api.common.typeutils.base.array.CharPrimitiveArraySerializer;
import org.apache.flink.api.common.typeutils.base.array.DoublePrimitiveArraySerializer;
import org.apache.flink.api.common.typeutils.base.array.FloatPrimitiveArraySerializer;
import org.apache.flink.api.common.typeutils.base.array.IntPrimitiveArraySerializer;
import org.apache.flink.api.common.typeutils.base.array.LongPrimitiveArraySerializer;
import org.apache.flink.api.common.typeutils.base.array.ShortPrimitiveArraySerializer;
import org.apache.flink.api.common.typeutils.base.array.StringArraySerializer;
import org.apache.flink.api.java.tuple.Tuple;
import org.apache.flink.api.java.tuple.Tuple0;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.api.java.tuple.Tuple25;
import org.apache.flink.api.java.typeutils.runtime.CopyableValueSerializer;
import org.apache.flink.api.java.typeutils.runtime.EitherSerializer;
import org.apache.flink.api.java.typeutils.runtime.NullableSerializer;
import org.apache.flink.api.java.typeutils.runtime.RowSerializer;
import org.apache.flink.api.java.typeutils.runtime.Tuple0Serializer;
import org.apache.flink.api.java.typeutils.runtime.ValueSerializer;
import org.apache.flink.api.java.typeutils.runtime.TupleSerializer;
import org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializer;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.apache.flink.runtime.state.ttl.TtlStateFactory;
import org.apache.flink.runtime.state.ttl.TtlValue;
import org.apache.flink.streaming.api.operators.TimerHeapInternalTimer;
import org.apache.flink.streaming.api.operators.TimerSerializer;
import org.apache.flink.streaming.api.windowing.windows.GlobalWindow;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.core.memory.DataInputView;
import org.apache.flink.core.memory.DataOutputView;
import org.apache.flink.types.BooleanValue;
import org.apache.flink.types.ByteValue;
import org.apache.flink.types.CharValue;
import org.apache.flink.types.DoubleValue;
import org.apache.flink.types.Either;
import org.apache.flink.types.FloatValue;
import org.apache.flink.types.IntValue;
import org.apache.flink.types.LongValue;
import org.apache.flink.types.NullValue;
import org.apache.flink.types.Row;
import org.apache.flink.types.RowKind;
import org.apache.flink.types.ShortValue;
import org.apache.flink.types.StringValue;
import org.apache.flink.types.Value;

/**
 * Values serialized by Flink's own serializers (Flink 2.3, and Flink 1.20: the same source
 * compiles against both; {@code SetSerializer}, 2.x only, is reached by reflection), for statectl's encoder tests
 * (tests/test_flink_encoders.py): one line per case on stdout,
 * {@code VECTOR<TAB>name<TAB>serializer snapshot<TAB>value}, both in hex: the snapshot as
 * {@code TypeSerializerSnapshot.writeVersionedSnapshot} writes it into a state's meta info, the
 * value as the serializer writes it into state. statectl reads the snapshot, decodes the value
 * and must encode it back to the same bytes.
 *
 * <p>The value is serialized first, then the snapshot taken (a POJO serializer's snapshot holds
 * the subclass serializers it cached while serializing, as at a checkpoint). A name starting
 * with {@code undecodable:} is a value statectl must refuse (UnsupportedFormatError naming the
 * class after the colon's word).
 *
 * <p>A name ending in {@code (long form)} is a value whose bytes depend on Java object identity
 * (a {@code BigInteger} 1 that is not {@code BigInteger.ONE}): statectl writes the short form.
 */
public class SerializerVectors {

    /** A POJO (public no-argument constructor, public fields) with a nested one. */
    public static class Address {
        public String city;
        public Integer zip;

        public Address() {}

        Address(String city, Integer zip) {
            this.city = city;
            this.zip = zip;
        }
    }

    /** A POJO with fields of most kinds PojoSerializer nests (not java.time.LocalDate: the type
     *  extractor gives a POJO's LocalDate field to Kryo, whose bytes inside a POJO statectl
     *  cannot delimit). */
    public static class Event {
        public Address address;
        public long amount;
        public Integer bonus;
        public BigDecimal price;
        public DayOfWeek day;
        public Instant ts;
        public int[] counts;
        public String[] tags;
        public Long[] ids;
        public String user;

        public Event() {}
    }

    /** A POJO whose collection fields Flink 2.x serializes with NullableSerializer-wrapped
     *  ListSerializer/MapSerializer/SetSerializer (1.x: with Kryo). A Map of Lists field would
     *  be Kryo's in 2.3 too (a KryoSerializerSnapshot of java.util.Map). */
    public static class Basket {
        public List<String> items;
        public Map<String, Long> counts;
        public Set<Integer> tags;
        public List<Address> addresses;
        public String owner;

        public Basket() {}
    }

    /** A POJO with subclasses: Circle registered, Square cached, Label's radius a String. */
    public static class Shape {
        public String name;

        public Shape() {}
    }

    public static class Circle extends Shape {
        public double radius;

        public Circle() {}
    }

    public static class Square extends Shape {
        public int side;
        public Address corner;

        public Square() {}
    }

    public static class Label extends Shape {
        public String radius;

        public Label() {}
    }

    public static class Triangle extends Shape {
        public int a;

        public Triangle() {}
    }

    /** A user {@code Value}: its bytes are its own {@code write}. */
    public static class Point implements Value {
        public int x;

        public Point() {}

        @Override
        public void write(DataOutputView out) throws java.io.IOException {
            out.writeInt(x);
        }

        @Override
        public void read(DataInputView in) throws java.io.IOException {
            x = in.readInt();
        }
    }

    static final SerializerConfigImpl CONFIG = new SerializerConfigImpl();

    static String hex(byte[] bytes) {
        StringBuilder b = new StringBuilder();
        for (byte x : bytes) b.append(String.format("%02x", x & 0xFF));
        return b.toString();
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static void vector(String name, TypeSerializer serializer, Object value) throws Exception {
        DataOutputSerializer out = new DataOutputSerializer(256);
        serializer.serialize(value, out);
        DataOutputSerializer snapshot = new DataOutputSerializer(256);
        TypeSerializerSnapshot.writeVersionedSnapshot(snapshot, serializer.snapshotConfiguration());
        System.out.println("VECTOR\t" + name + "\t" + hex(snapshot.getCopyOfBuffer()) + "\t"
                + hex(out.getCopyOfBuffer()));
    }

    static Event event(boolean full) {
        Event e = new Event();
        e.amount = -7;
        e.user = "k1";
        if (full) {
            e.address = new Address("Kraków", 10059);
            e.bonus = 3;
            e.price = new BigDecimal("-12.50");
            e.day = DayOfWeek.SUNDAY;
            e.ts = Instant.ofEpochSecond(1_700_006_900L, 123_456_789);
            e.counts = new int[] {1, -2};
            e.tags = new String[] {"a", null, "東京"};
            e.ids = new Long[] {5L, null};
        } else {
            e.address = new Address(null, null);
        }
        return e;
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 1 && args[0].equals("sql")) {  // tests/test_flink_sql_types.py
            SqlVectors.main();
            return;
        }
        vector("Instant", InstantSerializer.INSTANCE, Instant.ofEpochSecond(-1, 999_999_999));
        vector("Instant null", InstantSerializer.INSTANCE, null);
        vector("LocalDate", LocalDateSerializer.INSTANCE, LocalDate.of(4, 2, 29));
        vector("LocalDate null", LocalDateSerializer.INSTANCE, null);
        vector("LocalTime", LocalTimeSerializer.INSTANCE, LocalTime.of(23, 59, 58, 999_999_999));
        vector("LocalTime null", LocalTimeSerializer.INSTANCE, null);
        vector("LocalDateTime", LocalDateTimeSerializer.INSTANCE, LocalDateTime.of(1969, 12, 31, 23, 59, 59, 5));
        vector("LocalDateTime null", LocalDateTimeSerializer.INSTANCE, null);
        Timestamp timestamp = new Timestamp(1_700_000_000_123L);
        timestamp.setNanos(123_456_789);
        vector("Timestamp", SqlTimestampSerializer.INSTANCE, timestamp);
        vector("Timestamp before 1970", SqlTimestampSerializer.INSTANCE, new Timestamp(-1500));
        vector("Timestamp null", SqlTimestampSerializer.INSTANCE, null);
        vector("java.sql.Date", SqlDateSerializer.INSTANCE, new java.sql.Date(86_400_000L));
        vector("java.sql.Time", SqlTimeSerializer.INSTANCE, new Time(-1L));
        vector("java.util.Date", DateSerializer.INSTANCE, new Date(1_700_000_000_123L));
        vector("java.util.Date null", DateSerializer.INSTANCE, null);
        for (long v : new long[] {0, 1, 10, 255, -128, -129, Long.MIN_VALUE}) {
            vector("BigInteger " + v, BigIntSerializer.INSTANCE, BigInteger.valueOf(v));
        }
        vector("BigInteger -2^100", BigIntSerializer.INSTANCE, BigInteger.ONE.shiftLeft(100).negate());
        vector("BigInteger null", BigIntSerializer.INSTANCE, null);
        vector("BigInteger 1 (long form)", BigIntSerializer.INSTANCE, new BigInteger("1"));
        for (String v : new String[] {"-1.06", "15E+3", "0.00", "1", "10", "123456789012345678901234567890.5"}) {
            vector("BigDecimal " + v, BigDecSerializer.INSTANCE, new BigDecimal(v));
        }
        vector("BigDecimal ZERO", BigDecSerializer.INSTANCE, BigDecimal.ZERO);
        vector("BigDecimal null", BigDecSerializer.INSTANCE, null);
        EnumSerializer<DayOfWeek> days = new EnumSerializer<>(DayOfWeek.class);
        vector("enum", days, DayOfWeek.WEDNESDAY);
        vector("Long[]", new GenericArraySerializer<>(Long.class, LongSerializer.INSTANCE), new Long[] {5L, null, -1L});
        vector("boolean[]", BooleanPrimitiveArraySerializer.INSTANCE, new boolean[] {true, false});
        vector("char[]", CharPrimitiveArraySerializer.INSTANCE, new char[] {'a', 'é', '\uD83D'});
        vector("short[]", ShortPrimitiveArraySerializer.INSTANCE, new short[] {-1, 300});
        vector("int[]", IntPrimitiveArraySerializer.INSTANCE, new int[] {7, -7});
        vector("long[]", LongPrimitiveArraySerializer.INSTANCE, new long[] {Long.MIN_VALUE});
        vector("float[]", FloatPrimitiveArraySerializer.INSTANCE, new float[] {1.5f, -0.0f});
        vector("double[]", DoublePrimitiveArraySerializer.INSTANCE, new double[] {0.25, 1e300});
        vector("String[]", StringArraySerializer.INSTANCE, new String[] {null, "a", "Zürich"});
        TypeSerializer<?>[] rowFields = {StringSerializer.INSTANCE, LongSerializer.INSTANCE};
        RowSerializer rows = new RowSerializer(rowFields);
        vector("Row INSERT", rows, Row.of("a", null));
        vector("Row UPDATE_BEFORE", rows, Row.ofKind(RowKind.UPDATE_BEFORE, null, 1L));
        vector("Row UPDATE_AFTER", rows, Row.ofKind(RowKind.UPDATE_AFTER, "a", null));
        vector("Row DELETE", rows, Row.ofKind(RowKind.DELETE, "a", 1L));
        vector("Row legacy", new RowSerializer(rowFields, null, true), Row.of(null, 2L));
        TypeSerializer<?>[] wide = new TypeSerializer<?>[9];
        Arrays.fill(wide, IntSerializer.INSTANCE);
        vector("Row of 9 fields", new RowSerializer(wide), Row.ofKind(RowKind.DELETE, 1, null, 3, 4, 5, 6, 7, null, 9));
        vector("Tuple2", new TupleSerializer<>((Class<Tuple2<String, Integer>>) (Class<?>) Tuple2.class,
                new TypeSerializer<?>[] {StringSerializer.INSTANCE, IntSerializer.INSTANCE}), Tuple2.of("k1", -1));
        vector("Tuple3 nested", new TupleSerializer<>((Class<Tuple3<Long, Instant, DayOfWeek>>) (Class<?>) Tuple3.class,
                new TypeSerializer<?>[] {LongSerializer.INSTANCE, InstantSerializer.INSTANCE, days}),
                Tuple3.of(1L, Instant.EPOCH, DayOfWeek.MONDAY));
        TypeSerializer<Event> events = TypeInformation.of(Event.class).createSerializer(CONFIG);
        vector("POJO", events, event(true));
        vector("POJO with nulls", events, event(false));
        vector("POJO null", events, null);
        vector("List of POJOs", new ListSerializer<>(events), List.of(event(true), event(false)));
        Map<DayOfWeek, Long> perDay = new LinkedHashMap<>();
        perDay.put(DayOfWeek.FRIDAY, 3L);
        perDay.put(DayOfWeek.MONDAY, null);
        vector("Map of enum to Long", new MapSerializer<>(days, LongSerializer.INSTANCE), perDay);
        vector("TTL", new TtlStateFactory.TtlSerializer<>(LongSerializer.INSTANCE, events),
                new TtlValue<>(event(true), 1_795_636_050_858L));
        vector("TimeWindow", new TimeWindow.Serializer(), new TimeWindow(0, 3_600_000));
        vector("GlobalWindow", new GlobalWindow.Serializer(), GlobalWindow.get());
        vector("window timer", new TimerSerializer<>(StringSerializer.INSTANCE, new TimeWindow.Serializer()),
                new TimerHeapInternalTimer<>(3_599_999L, "k1", new TimeWindow(0, 3_600_000)));
        vector("Kryo UUID", new KryoSerializer<>(UUID.class, CONFIG),
                UUID.fromString("b637b17a-f08a-3ed8-850c-18cccde915da"));
        more();
    }

    /**
     * Composite snapshots in their legacy form (versioned snapshot version 1 or 2, as Flink
     * 1.7/1.8 wrote them: no magic number, no outer version), which Flink still reads: the
     * current snapshot without the 8 bytes of magic and outer version. Printed as
     * {@code LEGACY<TAB>name<TAB>snapshot<TAB>value} only when Flink reads the legacy bytes; the
     * value is what the serializer Flink restores from them writes.
     */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static void legacy(String name, int version, TypeSerializer serializer, Object value) throws Exception {
        legacy(name, version, 0, serializer, value);
    }

    /** As above, the current outer snapshot's first {@code drop} bytes left out as well. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static void legacy(String name, int version, int drop, TypeSerializer serializer, Object value) throws Exception {
        DataOutputSerializer current = new DataOutputSerializer(256);
        TypeSerializerSnapshot.writeVersionedSnapshot(current, serializer.snapshotConfiguration());
        byte[] bytes = current.getCopyOfBuffer();
        int nameEnd = 2 + (((bytes[0] & 0xFF) << 8) | (bytes[1] & 0xFF));
        DataOutputSerializer old = new DataOutputSerializer(256);
        old.write(bytes, 0, nameEnd);
        old.writeInt(version);
        int skip = nameEnd + 12 + drop;  // the version, magic and outer version, what is dropped
        old.write(bytes, skip, bytes.length - skip);
        byte[] legacyBytes = old.getCopyOfBuffer();
        TypeSerializerSnapshot restored = TypeSerializerSnapshot.readVersionedSnapshot(
                new org.apache.flink.core.memory.DataInputDeserializer(legacyBytes),
                SerializerVectors.class.getClassLoader());
        DataOutputSerializer out = new DataOutputSerializer(256);
        restored.restoreSerializer().serialize(value, out);
        System.out.println("LEGACY\t" + name + "\t" + hex(legacyBytes) + "\t" + hex(out.getCopyOfBuffer()));
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static void legacyVectors() throws Exception {
        legacy("List v1", 1, new ListSerializer<>(StringSerializer.INSTANCE), Arrays.asList("a", null));
        legacy("Map v1", 1, new MapSerializer<>(StringSerializer.INSTANCE, LongSerializer.INSTANCE),
                Collections.singletonMap("k", 1L));
        legacy("Long[] v1", 1, new GenericArraySerializer<>(Long.class, LongSerializer.INSTANCE), new Long[] {1L, null});
        legacy("Tuple2 v1", 1, new TupleSerializer<>((Class<Tuple2<String, Integer>>) (Class<?>) Tuple2.class,
                new TypeSerializer<?>[] {StringSerializer.INSTANCE, IntSerializer.INSTANCE}), Tuple2.of("k", 2));
        TypeSerializer<?>[] rowFields = {StringSerializer.INSTANCE, LongSerializer.INSTANCE};
        legacy("Row v1", 1, 1, new RowSerializer(rowFields), Row.of("a", null));  // no RowKind flag
        legacy("Row v2", 2, 1, new RowSerializer(rowFields), Row.of(null, 3L));
        legacy("Nullable Long padded v1", 1, NullableSerializer.wrap(LongSerializer.INSTANCE, true), null);
        legacy("Either v1", 1, new EitherSerializer<>(StringSerializer.INSTANCE, LongSerializer.INSTANCE), Either.Right(4L));
        // the deprecated EitherSerializerSnapshot (Flink 1.x only): version 2, the nested snapshots alone
        try {
            Class<?> c = Class.forName("org.apache.flink.api.java.typeutils.runtime.EitherSerializerSnapshot");
            TypeSerializerSnapshot old = (TypeSerializerSnapshot) c.getConstructor(TypeSerializer.class, TypeSerializer.class)
                    .newInstance(StringSerializer.INSTANCE, LongSerializer.INSTANCE);
            DataOutputSerializer snapshot = new DataOutputSerializer(256);
            TypeSerializerSnapshot.writeVersionedSnapshot(snapshot, old);
            DataOutputSerializer out = new DataOutputSerializer(64);
            old.restoreSerializer().serialize(Either.Left("x"), out);
            System.out.println("LEGACY\tEitherSerializerSnapshot v2\t" + hex(snapshot.getCopyOfBuffer()) + "\t"
                    + hex(out.getCopyOfBuffer()));
        } catch (ClassNotFoundException e) {
            // Flink 2.x has none
        }
    }

    static Basket basket(boolean full) {
        Basket b = new Basket();
        b.owner = "o";
        if (full) {
            b.items = new ArrayList<>(Arrays.asList("x", null, ""));
            b.counts = new LinkedHashMap<>();
            b.counts.put("a", Long.MAX_VALUE);
            b.counts.put("b", null);
            b.tags = new LinkedHashSet<>(Arrays.asList(3, null, -1));
            b.addresses = new ArrayList<>(Arrays.asList(new Address("Oslo", 150), null));
        } else {
            b.items = new ArrayList<>();
            b.counts = new LinkedHashMap<>();
            b.tags = new LinkedHashSet<>();
        }
        return b;
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static TypeSerializer<?> setSerializer(TypeSerializer<?> element) throws Exception {
        try {
            Class<?> c = Class.forName("org.apache.flink.api.common.typeutils.base.SetSerializer");
            return (TypeSerializer<?>) c.getConstructor(TypeSerializer.class).newInstance(element);
        } catch (ClassNotFoundException e) {
            return null;  // Flink 1.x has none
        }
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static void more() throws Exception {
        // NullableSerializer, with and without padding, alone and as list elements
        vector("Nullable Long padded", NullableSerializer.wrap(LongSerializer.INSTANCE, true), 5L);
        vector("Nullable Long padded null", NullableSerializer.wrap(LongSerializer.INSTANCE, true), null);
        vector("Nullable Long", NullableSerializer.wrap(LongSerializer.INSTANCE, false), Long.MIN_VALUE);
        vector("Nullable Long null", NullableSerializer.wrap(LongSerializer.INSTANCE, false), null);
        vector("Nullable String null", NullableSerializer.wrap(StringSerializer.INSTANCE, true), null);
        vector("List of Nullable Integer", new ListSerializer<>(NullableSerializer.wrap(IntSerializer.INSTANCE, true)),
                Arrays.asList(1, null, Integer.MAX_VALUE));
        TypeSerializer<?> strings = setSerializer(StringSerializer.INSTANCE);
        if (strings != null) {
            vector("Set of String", strings, new LinkedHashSet<>(Arrays.asList("b", null, "a")));
            vector("Set empty", strings, new LinkedHashSet<>());
            vector("Set of List of Long", setSerializer(new ListSerializer<>(LongSerializer.INSTANCE)),
                    new LinkedHashSet<>(Arrays.asList(Arrays.asList(1L, 2L), new ArrayList<Long>())));
        }
        vector("Map of List of Map", new MapSerializer<>(StringSerializer.INSTANCE,
                new ListSerializer<>(new MapSerializer<>(IntSerializer.INSTANCE, StringSerializer.INSTANCE))),
                Collections.singletonMap("k", Arrays.asList(Collections.singletonMap(1, "v"), new LinkedHashMap<>())));
        vector("List empty", new ListSerializer<>(StringSerializer.INSTANCE), new ArrayList<String>());
        // POJOs with List/Map/Set fields (2.x: NullableSerializer of the collection serializers)
        TypeSerializer<Basket> baskets = TypeInformation.of(Basket.class).createSerializer(CONFIG);
        vector("POJO with collections", baskets, basket(true));
        vector("POJO with empty collections", baskets, basket(false));
        vector("POJO with null collections", baskets, new Basket());
        vector("List of POJOs with collections", new ListSerializer<>(baskets),
                Arrays.asList(basket(true), null, basket(false)));
        // POJO subclasses: Circle registered (tag), Square cached after a first value (by name)
        SerializerConfigImpl registering = new SerializerConfigImpl();
        registering.registerPojoType(Circle.class);
        registering.registerPojoType(Label.class);
        TypeSerializer<Shape> shapes = TypeInformation.of(Shape.class).createSerializer(registering);
        Circle circle = new Circle();
        circle.name = "c";
        circle.radius = -0.5;
        Square square = new Square();
        square.name = "s";
        square.side = Integer.MIN_VALUE;
        square.corner = new Address("Lima", null);
        Label label = new Label();
        label.name = "l";
        label.radius = "r";
        Shape shape = new Shape();
        shape.name = "plain";
        shapes.serialize(square, new DataOutputSerializer(64));  // caches Square's serializer
        vector("POJO subclass registered", shapes, circle);
        vector("POJO subclass by name", shapes, square);
        vector("POJO subclass base", shapes, shape);
        vector("POJO subclass null", shapes, null);
        vector("undecodable:Label POJO subclass whose field conflicts", shapes, label);
        vector("List of POJO subclasses", new ListSerializer<>(shapes), Arrays.asList(shape, circle, square, null));
        TypeSerializer<Shape> fresh = TypeInformation.of(Shape.class).createSerializer(registering);
        DataOutputSerializer unseen = new DataOutputSerializer(64);
        DataOutputSerializer freshSnapshot = new DataOutputSerializer(256);
        TypeSerializerSnapshot.writeVersionedSnapshot(freshSnapshot, fresh.snapshotConfiguration());
        Triangle triangle = new Triangle();
        triangle.a = 3;
        fresh.serialize(triangle, unseen);
        System.out.println("VECTOR\tundecodable:Triangle POJO subclass not in the snapshot\t"
                + hex(freshSnapshot.getCopyOfBuffer()) + "\t" + hex(unseen.getCopyOfBuffer()));
        // Either
        EitherSerializer<String, Long> either = new EitherSerializer<>(StringSerializer.INSTANCE, LongSerializer.INSTANCE);
        vector("Either Left", either, Either.Left("l"));
        vector("Either Right", either, Either.Right(-1L));
        vector("Either nested", new EitherSerializer<>(new ListSerializer<>(IntSerializer.INSTANCE), either),
                Either.Right(Either.Left("x")));
        // Rows by name, Tuple0, Tuple25
        TypeSerializer<?>[] rowFields = {StringSerializer.INSTANCE, LongSerializer.INSTANCE};
        LinkedHashMap<String, Integer> positions = new LinkedHashMap<>();
        positions.put("name", 0);
        positions.put("count", 1);
        Row named = Row.withNames(RowKind.UPDATE_AFTER);
        named.setField("name", "n");
        named.setField("count", null);
        vector("Row named", new RowSerializer(rowFields, positions), named);
        Row positional = Row.withPositions(2);
        positional.setField(0, null);
        positional.setField(1, 9L);
        vector("Row positional into named", new RowSerializer(rowFields, positions), positional);
        vector("Row nested", new RowSerializer(new TypeSerializer<?>[] {new RowSerializer(rowFields), IntSerializer.INSTANCE}),
                Row.of(Row.ofKind(RowKind.DELETE, "a", 1L), null));
        vector("Tuple0", Tuple0Serializer.INSTANCE, Tuple0.INSTANCE);
        TypeSerializer<?>[] ints = new TypeSerializer<?>[25];
        Arrays.fill(ints, IntSerializer.INSTANCE);
        Tuple25 t25 = new Tuple25();
        for (int i = 0; i < 25; i++) t25.setField(i - 12, i);
        vector("Tuple25", new TupleSerializer<>((Class<Tuple25>) (Class<?>) Tuple25.class, ints), t25);
        // Flink's Value types
        vector("IntValue", IntValueSerializer.INSTANCE, new IntValue(Integer.MIN_VALUE));
        vector("LongValue", LongValueSerializer.INSTANCE, new LongValue(Long.MAX_VALUE));
        vector("ShortValue", ShortValueSerializer.INSTANCE, new ShortValue((short) -2));
        vector("ByteValue", ByteValueSerializer.INSTANCE, new ByteValue((byte) -128));
        vector("BooleanValue", BooleanValueSerializer.INSTANCE, new BooleanValue(true));
        vector("CharValue", CharValueSerializer.INSTANCE, new CharValue('\u00e9'));
        vector("DoubleValue", DoubleValueSerializer.INSTANCE, new DoubleValue(-1e-300));
        vector("FloatValue", FloatValueSerializer.INSTANCE, new FloatValue(3.5f));
        vector("StringValue", StringValueSerializer.INSTANCE, new StringValue("Zürich 東京"));
        vector("StringValue empty", StringValueSerializer.INSTANCE, new StringValue(""));
        StringBuilder longText = new StringBuilder();
        for (int i = 0; i < 200; i++) longText.append((char) (i * 331));
        vector("StringValue long", StringValueSerializer.INSTANCE, new StringValue(longText.toString()));
        vector("NullValue", NullValueSerializer.INSTANCE, NullValue.getInstance());
        vector("CopyableValue IntValue", new CopyableValueSerializer<>(IntValue.class), new IntValue(7));
        vector("ValueSerializer LongValue", new ValueSerializer<>(LongValue.class), new LongValue(-7));
        Point point = new Point();
        point.x = 4;
        vector("undecodable:Point user Value", new ValueSerializer<>(Point.class), point);
        // an enum whose serializer was restored from a snapshot of other constants (reordered)
        Constructor<EnumSerializer> previous = EnumSerializer.class.getDeclaredConstructor(Class.class, Enum[].class);
        previous.setAccessible(true);
        DayOfWeek[] order = {DayOfWeek.SUNDAY, DayOfWeek.SATURDAY, DayOfWeek.MONDAY, DayOfWeek.TUESDAY,
                DayOfWeek.WEDNESDAY, DayOfWeek.THURSDAY, DayOfWeek.FRIDAY};
        vector("enum reordered", previous.newInstance(DayOfWeek.class, order), DayOfWeek.SATURDAY);
        // extreme numbers
        vector("Long[] extremes", new GenericArraySerializer<>(Long.class, LongSerializer.INSTANCE),
                new Long[] {Long.MIN_VALUE, Long.MAX_VALUE, 0L});
        legacyVectors();
        vector("Tuple2 extremes", new TupleSerializer<>((Class<Tuple2<Long, Double>>) (Class<?>) Tuple2.class,
                new TypeSerializer<?>[] {LongSerializer.INSTANCE, org.apache.flink.api.common.typeutils.base.DoubleSerializer.INSTANCE}),
                Tuple2.of(Long.MIN_VALUE, Double.NEGATIVE_INFINITY));
    }
}

/**
 * Flink SQL's and CEP's serializers (flink-table-runtime, flink-cep; Flink 2.3 and 1.20), for
 * tests/test_flink_sql_types.py: {@code java SerializerVectors sql} prints one line per case,
 * {@code SQL<TAB>name<TAB>serializer snapshot<TAB>value}, both in hex, as {@link
 * SerializerVectors#vector} does. Classes of one Flink major only are reached by reflection.
 * {@code SQL-OLD} lines are snapshots in an older form (an older outer snapshot version, or a
 * composite snapshot's legacy form) that Flink reads, with the bytes the serializer Flink
 * restores from them writes.
 */
class SqlVectors {

    @SuppressWarnings({"unchecked", "rawtypes"})
    static void sql(String name, org.apache.flink.api.common.typeutils.TypeSerializer serializer, Object value)
            throws Exception {
        DataOutputSerializer out = new DataOutputSerializer(256);
        serializer.serialize(value, out);
        DataOutputSerializer snapshot = new DataOutputSerializer(256);
        TypeSerializerSnapshot.writeVersionedSnapshot(snapshot, serializer.snapshotConfiguration());
        System.out.println("SQL\t" + name + "\t" + SerializerVectors.hex(snapshot.getCopyOfBuffer()) + "\t"
                + SerializerVectors.hex(out.getCopyOfBuffer()));
    }

    /**
     * A composite snapshot as an older Flink wrote it: its outer snapshot version replaced by
     * {@code outerVersion} and the outer snapshot's {@code drop} bytes left out (or, with {@code
     * outerVersion} below 0, the legacy form of versioned snapshot version {@code -outerVersion}:
     * no magic number and no outer version), read back by Flink; the value as the serializer
     * Flink restores writes it.
     */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static void old(String name, TypeSerializer serializer, int outerVersion, int drop, Object value) throws Exception {
        DataOutputSerializer current = new DataOutputSerializer(256);
        TypeSerializerSnapshot.writeVersionedSnapshot(current, serializer.snapshotConfiguration());
        byte[] bytes = current.getCopyOfBuffer();
        int nameEnd = 2 + (((bytes[0] & 0xFF) << 8) | (bytes[1] & 0xFF));
        DataOutputSerializer older = new DataOutputSerializer(256);
        older.write(bytes, 0, nameEnd);
        if (outerVersion < 0) {
            older.writeInt(-outerVersion);
        } else {
            older.write(bytes, nameEnd, 8);  // the snapshot version and the magic number
            older.writeInt(outerVersion);
        }
        int skip = nameEnd + 12 + drop;
        older.write(bytes, skip, bytes.length - skip);
        byte[] olderBytes = older.getCopyOfBuffer();
        TypeSerializerSnapshot restored = TypeSerializerSnapshot.readVersionedSnapshot(
                new org.apache.flink.core.memory.DataInputDeserializer(olderBytes), SqlVectors.class.getClassLoader());
        DataOutputSerializer out = new DataOutputSerializer(256);
        restored.restoreSerializer().serialize(value, out);
        System.out.println("SQL-OLD\t" + name + "\t" + SerializerVectors.hex(olderBytes) + "\t"
                + SerializerVectors.hex(out.getCopyOfBuffer()));
    }

    static org.apache.flink.table.data.StringData str(String s) {
        return org.apache.flink.table.data.StringData.fromString(s);
    }

    static org.apache.flink.table.data.TimestampData ts(long millis, int nanos) {
        return org.apache.flink.table.data.TimestampData.fromEpochMillis(millis, nanos);
    }

    static org.apache.flink.table.data.DecimalData dec(String v, int precision, int scale) {
        return org.apache.flink.table.data.DecimalData.fromBigDecimal(new BigDecimal(v), precision, scale);
    }

    static void main() throws Exception {
        table();
        rows();
        cep();
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static void table() throws Exception {
        // the table runtime's own serializers, alone
        sql("TimestampData p3", new org.apache.flink.table.runtime.typeutils.TimestampDataSerializer(3),
                ts(1_700_000_000_123L, 0));
        sql("TimestampData p9", new org.apache.flink.table.runtime.typeutils.TimestampDataSerializer(9),
                ts(-1_500L, 999_999));
        sql("TimestampData p6", new org.apache.flink.table.runtime.typeutils.TimestampDataSerializer(6),
                ts(-1L, 1_000));
        sql("TimestampData p0", new org.apache.flink.table.runtime.typeutils.TimestampDataSerializer(0),
                ts(-62_135_596_800_000L, 0));
        sql("DecimalData 10,2", new org.apache.flink.table.runtime.typeutils.DecimalDataSerializer(10, 2),
                dec("-12345678.90", 10, 2));
        sql("DecimalData 18,0", new org.apache.flink.table.runtime.typeutils.DecimalDataSerializer(18, 0),
                dec("999999999999999999", 18, 0));
        sql("DecimalData 38,10", new org.apache.flink.table.runtime.typeutils.DecimalDataSerializer(38, 10),
                dec("1234567890123456789012345678.0123456789", 38, 10));
        sql("DecimalData 20,0", new org.apache.flink.table.runtime.typeutils.DecimalDataSerializer(20, 0),
                dec("-99999999999999999999", 20, 0));
        sql("DecimalData 19,4 zero", new org.apache.flink.table.runtime.typeutils.DecimalDataSerializer(19, 4),
                dec("0", 19, 4));
        sql("StringData", org.apache.flink.table.runtime.typeutils.StringDataSerializer.INSTANCE, str("Zürich 東京"));
        sql("StringData empty", org.apache.flink.table.runtime.typeutils.StringDataSerializer.INSTANCE, str(""));
        sql("Array of INT", new org.apache.flink.table.runtime.typeutils.ArrayDataSerializer(
                new org.apache.flink.table.types.logical.IntType()),
                new org.apache.flink.table.data.GenericArrayData(new Integer[] {1, null, -3}));
        sql("Array of BIGINT NOT NULL", new org.apache.flink.table.runtime.typeutils.ArrayDataSerializer(
                new org.apache.flink.table.types.logical.BigIntType(false)),
                new org.apache.flink.table.data.GenericArrayData(new long[] {Long.MIN_VALUE, 0L, 7L}));
        sql("Array of STRING", new org.apache.flink.table.runtime.typeutils.ArrayDataSerializer(
                new org.apache.flink.table.types.logical.VarCharType(Integer.MAX_VALUE)),
                new org.apache.flink.table.data.GenericArrayData(new Object[] {str("a"), null, str("longer than seven")}));
        sql("Array empty", new org.apache.flink.table.runtime.typeutils.ArrayDataSerializer(
                new org.apache.flink.table.types.logical.DoubleType()),
                new org.apache.flink.table.data.GenericArrayData(new Object[0]));
        sql("Array of BOOLEAN", new org.apache.flink.table.runtime.typeutils.ArrayDataSerializer(
                new org.apache.flink.table.types.logical.BooleanType()),
                new org.apache.flink.table.data.GenericArrayData(new Object[] {true, null, false}));
        sql("Array of SMALLINT", new org.apache.flink.table.runtime.typeutils.ArrayDataSerializer(
                new org.apache.flink.table.types.logical.SmallIntType()),
                new org.apache.flink.table.data.GenericArrayData(new Object[] {(short) -2, null, (short) 300}));
        sql("Array of TIMESTAMP(9)", new org.apache.flink.table.runtime.typeutils.ArrayDataSerializer(
                new org.apache.flink.table.types.logical.TimestampType(9)),
                new org.apache.flink.table.data.GenericArrayData(new Object[] {ts(5L, 6), null}));
        sql("Array of DECIMAL(30,2)", new org.apache.flink.table.runtime.typeutils.ArrayDataSerializer(
                new org.apache.flink.table.types.logical.DecimalType(30, 2)),
                new org.apache.flink.table.data.GenericArrayData(new Object[] {dec("-1.50", 30, 2), null}));
        sql("Array of ARRAY<INT>", new org.apache.flink.table.runtime.typeutils.ArrayDataSerializer(
                new org.apache.flink.table.types.logical.ArrayType(new org.apache.flink.table.types.logical.IntType())),
                new org.apache.flink.table.data.GenericArrayData(new Object[] {
                        new org.apache.flink.table.data.GenericArrayData(new int[] {1, 2}), null}));
        Map<Object, Object> map = new LinkedHashMap<>();
        map.put(str("a"), 1L);
        map.put(str("bb"), null);
        map.put(str("ccccccccc"), -1L);
        sql("Map of STRING to BIGINT", new org.apache.flink.table.runtime.typeutils.MapDataSerializer(
                new org.apache.flink.table.types.logical.VarCharType(10),
                new org.apache.flink.table.types.logical.BigIntType()),
                new org.apache.flink.table.data.GenericMapData(map));
        Map<Object, Object> multiset = new LinkedHashMap<>();
        multiset.put(7, 2);
        multiset.put(-1, 1);
        sql("Multiset of INT", new org.apache.flink.table.runtime.typeutils.MapDataSerializer(
                new org.apache.flink.table.types.logical.IntType(),
                new org.apache.flink.table.types.logical.IntType(false)),
                new org.apache.flink.table.data.GenericMapData(multiset));
        sql("RawValueData of String", new org.apache.flink.table.runtime.typeutils.RawValueDataSerializer<>(
                StringSerializer.INSTANCE), org.apache.flink.table.data.RawValueData.fromObject("raw ü"));
        sql("RawValueData of Long", new org.apache.flink.table.runtime.typeutils.RawValueDataSerializer<>(
                LongSerializer.INSTANCE), org.apache.flink.table.data.RawValueData.fromObject(-5L));
        org.apache.flink.table.runtime.typeutils.RowDataSerializer keyRows =
                new org.apache.flink.table.runtime.typeutils.RowDataSerializer(
                        new org.apache.flink.table.types.logical.VarCharType(Integer.MAX_VALUE),
                        new org.apache.flink.table.types.logical.BigIntType());
        java.util.LinkedList<Object> list = new java.util.LinkedList<>();
        list.add(org.apache.flink.table.data.GenericRowData.of(str("a"), 1L));
        list.add(null);
        list.add(org.apache.flink.table.data.GenericRowData.ofKind(org.apache.flink.types.RowKind.DELETE, str("b"), null));
        sql("LinkedList of RowData", new org.apache.flink.table.runtime.typeutils.LinkedListSerializer<>(keyRows), list);
        java.util.LinkedList<Object> longs = new java.util.LinkedList<>(Arrays.asList(3L, -4L));
        sql("LinkedList of Long without null mask", new org.apache.flink.table.runtime.typeutils.LinkedListSerializer<>(
                LongSerializer.INSTANCE, false), longs);
        sql("LinkedList empty", new org.apache.flink.table.runtime.typeutils.LinkedListSerializer<>(keyRows),
                new java.util.LinkedList<>());
        old("LinkedList of Long outer v2", new org.apache.flink.table.runtime.typeutils.LinkedListSerializer<>(
                LongSerializer.INSTANCE), 2, 1, new java.util.LinkedList<>(Arrays.asList(3L, null)));
        old("LinkedList of Long outer v1", new org.apache.flink.table.runtime.typeutils.LinkedListSerializer<>(
                LongSerializer.INSTANCE), 1, 1, new java.util.LinkedList<>(Arrays.asList(3L, 9L)));
        java.util.Comparator<Long> order = (java.util.Comparator<Long> & java.io.Serializable) Long::compare;
        java.util.TreeMap<Long, Object> sorted = new java.util.TreeMap<>(order);
        sorted.put(5L, Arrays.asList(org.apache.flink.table.data.GenericRowData.of(str("x"), 2L)));
        sorted.put(-1L, null);
        sql("SortedMap of Long to List of RowData", new org.apache.flink.table.runtime.typeutils.SortedMapSerializer<>(
                order, LongSerializer.INSTANCE, new ListSerializer<>(keyRows)), sorted);
        org.apache.flink.table.data.binary.BinaryRowData key = keyRows.toBinaryRow(
                org.apache.flink.table.data.GenericRowData.of(str("k1"), 3L)).copy();
        sql("WindowKey", new org.apache.flink.table.runtime.typeutils.WindowKeySerializer(keyRows),
                new org.apache.flink.table.runtime.util.WindowKey(3_600_000L, key));
        sql("CountWindow", new org.apache.flink.table.runtime.operators.window.CountWindow.Serializer(),
                new org.apache.flink.table.runtime.operators.window.CountWindow(42L));
        sql("table TimeWindow", new org.apache.flink.table.runtime.operators.window.TimeWindow.Serializer(),
                org.apache.flink.table.runtime.operators.window.TimeWindow.of(-1000L, 1000L));
        sql("BinaryRowData", new org.apache.flink.table.runtime.typeutils.BinaryRowDataSerializer(2), key);
        try {
            Class<?> c = Class.forName("org.apache.flink.table.runtime.operators.sink.SortedLongSerializer");
            sql("SortedLong", (TypeSerializer) c.getConstructor().newInstance(), -5L);
        } catch (ClassNotFoundException e) {
            // Flink 1.x has none
        }
        sql("External ROW<a INT, b STRING>", org.apache.flink.table.runtime.typeutils.ExternalSerializer.of(
                org.apache.flink.table.api.DataTypes.ROW(
                        org.apache.flink.table.api.DataTypes.FIELD("a", org.apache.flink.table.api.DataTypes.INT()),
                        org.apache.flink.table.api.DataTypes.FIELD("b", org.apache.flink.table.api.DataTypes.STRING()))),
                Row.of(1, "x"));
        sql("External BIGINT", org.apache.flink.table.runtime.typeutils.ExternalSerializer.of(
                org.apache.flink.table.api.DataTypes.BIGINT()), 7L);
        // the data views of distinct and collect aggregates: plain map/list state of rows and primitives
        sql("MapView of RowData to Long", new MapSerializer<>(keyRows, LongSerializer.INSTANCE),
                Collections.singletonMap(org.apache.flink.table.data.GenericRowData.of(str("d"), 4L), 2L));
    }

    /** RowDataSerializer over every LogicalType BinaryWriter writes. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static void rows() throws Exception {
        org.apache.flink.table.types.logical.LogicalType[] scalars = {
                new org.apache.flink.table.types.logical.BooleanType(),
                new org.apache.flink.table.types.logical.TinyIntType(),
                new org.apache.flink.table.types.logical.SmallIntType(),
                new org.apache.flink.table.types.logical.IntType(),
                new org.apache.flink.table.types.logical.BigIntType(),
                new org.apache.flink.table.types.logical.FloatType(),
                new org.apache.flink.table.types.logical.DoubleType(),
                new org.apache.flink.table.types.logical.CharType(3),
                new org.apache.flink.table.types.logical.VarCharType(Integer.MAX_VALUE),
                new org.apache.flink.table.types.logical.BinaryType(2),
                new org.apache.flink.table.types.logical.VarBinaryType(Integer.MAX_VALUE),
                new org.apache.flink.table.types.logical.DateType(),
                new org.apache.flink.table.types.logical.TimeType(3),
                new org.apache.flink.table.types.logical.TimestampType(3),
                new org.apache.flink.table.types.logical.TimestampType(9),
                new org.apache.flink.table.types.logical.LocalZonedTimestampType(3),
                new org.apache.flink.table.types.logical.LocalZonedTimestampType(6),
                new org.apache.flink.table.types.logical.DecimalType(10, 2),
                new org.apache.flink.table.types.logical.DecimalType(38, 18),
                new org.apache.flink.table.types.logical.YearMonthIntervalType(
                        org.apache.flink.table.types.logical.YearMonthIntervalType.YearMonthResolution.YEAR_TO_MONTH),
                new org.apache.flink.table.types.logical.DayTimeIntervalType(
                        org.apache.flink.table.types.logical.DayTimeIntervalType.DayTimeResolution.DAY_TO_SECOND),
        };
        org.apache.flink.table.runtime.typeutils.RowDataSerializer all =
                new org.apache.flink.table.runtime.typeutils.RowDataSerializer(scalars);
        sql("Row of every scalar type", all, org.apache.flink.table.data.GenericRowData.of(
                true, (byte) -128, (short) -2, Integer.MIN_VALUE, Long.MAX_VALUE, 1.5f, -0.25,
                str("ab "), str("a string longer than 7 bytes ü"), new byte[] {1, 2},
                new byte[] {9, 8, 7, 6, 5, 4, 3, 2, 1}, -719_162, 86_399_999,
                ts(1_700_000_000_123L, 0), ts(-1L, 999_999), ts(0L, 0), ts(253_402_300_799_999L, 999_000),
                dec("-12345678.90", 10, 2), dec("-12345678901234567890.123456789012345678", 38, 18),
                -13, 86_400_000L * 3 + 1));
        Object[] nulls = new Object[scalars.length];
        sql("Row of every scalar type all null", all,
                org.apache.flink.table.data.GenericRowData.ofKind(org.apache.flink.types.RowKind.UPDATE_BEFORE, nulls));
        sql("Row short values", all, org.apache.flink.table.data.GenericRowData.ofKind(
                org.apache.flink.types.RowKind.UPDATE_AFTER,
                false, (byte) 1, (short) 1, 1, 1L, Float.NaN, Double.NEGATIVE_INFINITY, str("x"), str(""),
                new byte[0], new byte[] {1, 2, 3, 4, 5, 6, 7}, 0, 0, ts(0L, 0), ts(0L, 1), ts(-5L, 0),
                ts(-5L, 1000), dec("0.00", 10, 2), dec("0.000000000000000001", 38, 18), 0, 0L));
        org.apache.flink.table.types.logical.LogicalType inner = org.apache.flink.table.types.logical.RowType.of(
                new org.apache.flink.table.types.logical.IntType(),
                new org.apache.flink.table.types.logical.VarCharType(Integer.MAX_VALUE));
        org.apache.flink.table.types.logical.LogicalType[] nested = {
                inner,
                new org.apache.flink.table.types.logical.ArrayType(new org.apache.flink.table.types.logical.VarCharType(10)),
                new org.apache.flink.table.types.logical.ArrayType(new org.apache.flink.table.types.logical.IntType(false)),
                new org.apache.flink.table.types.logical.MapType(
                        new org.apache.flink.table.types.logical.VarCharType(10),
                        new org.apache.flink.table.types.logical.DoubleType()),
                new org.apache.flink.table.types.logical.MultisetType(new org.apache.flink.table.types.logical.IntType()),
                new org.apache.flink.table.types.logical.RawType<>(String.class, StringSerializer.INSTANCE),
                new org.apache.flink.table.types.logical.ArrayType(new org.apache.flink.table.types.logical.TimestampType(9)),
                new org.apache.flink.table.types.logical.ArrayType(inner),
        };
        Map<Object, Object> map = new LinkedHashMap<>();
        map.put(str("k"), 0.5);
        map.put(str("n"), null);
        Map<Object, Object> multiset = new LinkedHashMap<>();
        multiset.put(3, 2);
        sql("Row of nested types", new org.apache.flink.table.runtime.typeutils.RowDataSerializer(nested),
                org.apache.flink.table.data.GenericRowData.of(
                        org.apache.flink.table.data.GenericRowData.of(5, str("inner string, long")),
                        new org.apache.flink.table.data.GenericArrayData(new Object[] {str("a"), null, str("bbbbbbbbbbb")}),
                        new org.apache.flink.table.data.GenericArrayData(new int[] {1, 2, 3}),
                        new org.apache.flink.table.data.GenericMapData(map),
                        new org.apache.flink.table.data.GenericMapData(multiset),
                        org.apache.flink.table.data.RawValueData.fromObject("raw"),
                        new org.apache.flink.table.data.GenericArrayData(new Object[] {ts(1L, 2), null}),
                        new org.apache.flink.table.data.GenericArrayData(new Object[] {
                                org.apache.flink.table.data.GenericRowData.of(null, str("x")), null})));
        sql("Row of nested types all null", new org.apache.flink.table.runtime.typeutils.RowDataSerializer(nested),
                new org.apache.flink.table.data.GenericRowData(nested.length));
        sql("Row empty", new org.apache.flink.table.runtime.typeutils.RowDataSerializer(),
                new org.apache.flink.table.data.GenericRowData(0));
        org.apache.flink.table.types.logical.LogicalType[] wide = new org.apache.flink.table.types.logical.LogicalType[70];
        Object[] wideValues = new Object[70];
        for (int i = 0; i < 70; i++) {
            wide[i] = new org.apache.flink.table.types.logical.IntType();
            wideValues[i] = i % 3 == 0 ? null : i;
        }
        sql("Row of 70 fields", new org.apache.flink.table.runtime.typeutils.RowDataSerializer(wide),
                org.apache.flink.table.data.GenericRowData.of(wideValues));
        sql("Row key of one string", new org.apache.flink.table.runtime.typeutils.RowDataSerializer(
                new org.apache.flink.table.types.logical.VarCharType(Integer.MAX_VALUE)),
                org.apache.flink.table.data.GenericRowData.of(str("k17")));
        sql("Row NOT NULL fields", new org.apache.flink.table.runtime.typeutils.RowDataSerializer(
                new org.apache.flink.table.types.logical.BigIntType(false),
                new org.apache.flink.table.types.logical.VarCharType(false, 5)),
                org.apache.flink.table.data.GenericRowData.of(9L, str("five5")));
    }

    /** flink-cep's serializers: NFA state, the shared buffer's nodes, edges and events. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static void cep() throws Exception {
        org.apache.flink.cep.nfa.sharedbuffer.EventId e1 = new org.apache.flink.cep.nfa.sharedbuffer.EventId(0, 1_000L);
        org.apache.flink.cep.nfa.sharedbuffer.EventId e2 = new org.apache.flink.cep.nfa.sharedbuffer.EventId(3, -5L);
        org.apache.flink.cep.nfa.sharedbuffer.NodeId n1 = new org.apache.flink.cep.nfa.sharedbuffer.NodeId(e1, "start");
        org.apache.flink.cep.nfa.sharedbuffer.NodeId n2 = new org.apache.flink.cep.nfa.sharedbuffer.NodeId(e2, "middle ü");
        org.apache.flink.cep.nfa.DeweyNumber d1 = new org.apache.flink.cep.nfa.DeweyNumber(1);
        org.apache.flink.cep.nfa.DeweyNumber d2 = new org.apache.flink.cep.nfa.DeweyNumber(1).addStage().increase(3).addStage();
        sql("EventId", org.apache.flink.cep.nfa.sharedbuffer.EventId.EventIdSerializer.INSTANCE, e2);
        sql("NodeId", new org.apache.flink.cep.nfa.sharedbuffer.NodeId.NodeIdSerializer(), n2);
        sql("NodeId null", new org.apache.flink.cep.nfa.sharedbuffer.NodeId.NodeIdSerializer(), null);
        sql("DeweyNumber", org.apache.flink.cep.nfa.DeweyNumber.DeweyNumberSerializer.INSTANCE, d2);
        sql("SharedBufferEdge", new org.apache.flink.cep.nfa.sharedbuffer.SharedBufferEdge.SharedBufferEdgeSerializer(),
                new org.apache.flink.cep.nfa.sharedbuffer.SharedBufferEdge(n1, d2));
        sql("SharedBufferEdge to null", new org.apache.flink.cep.nfa.sharedbuffer.SharedBufferEdge.SharedBufferEdgeSerializer(),
                new org.apache.flink.cep.nfa.sharedbuffer.SharedBufferEdge(null, d1));
        org.apache.flink.cep.nfa.sharedbuffer.SharedBufferNode node = new org.apache.flink.cep.nfa.sharedbuffer.SharedBufferNode();
        node.addEdge(new org.apache.flink.cep.nfa.sharedbuffer.SharedBufferEdge(n1, d1));
        node.addEdge(new org.apache.flink.cep.nfa.sharedbuffer.SharedBufferEdge(null, d2));
        node.getEdges().get(0).lock();
        org.apache.flink.cep.nfa.sharedbuffer.SharedBufferNodeSerializer nodes =
                new org.apache.flink.cep.nfa.sharedbuffer.SharedBufferNodeSerializer();
        sql("SharedBufferNode", nodes, node);
        sql("Lockable of SharedBufferNode", new org.apache.flink.cep.nfa.sharedbuffer.Lockable.LockableTypeSerializer<>(nodes),
                new org.apache.flink.cep.nfa.sharedbuffer.Lockable<>(node, 2));
        org.apache.flink.table.runtime.typeutils.RowDataSerializer events =
                new org.apache.flink.table.runtime.typeutils.RowDataSerializer(
                        new org.apache.flink.table.types.logical.VarCharType(Integer.MAX_VALUE),
                        new org.apache.flink.table.types.logical.IntType(),
                        new org.apache.flink.table.types.logical.TimestampType(3));
        sql("Lockable of RowData", new org.apache.flink.cep.nfa.sharedbuffer.Lockable.LockableTypeSerializer<>(events),
                new org.apache.flink.cep.nfa.sharedbuffer.Lockable<>(
                        org.apache.flink.table.data.GenericRowData.of(str("k1"), 7, ts(1_000L, 0)), 1));
        sql("Lockable of String", new org.apache.flink.cep.nfa.sharedbuffer.Lockable.LockableTypeSerializer<>(
                StringSerializer.INSTANCE), new org.apache.flink.cep.nfa.sharedbuffer.Lockable<>("event", 0));
        java.util.List<org.apache.flink.cep.nfa.ComputationState> states = new ArrayList<>();
        states.add(org.apache.flink.cep.nfa.ComputationState.createState("start", null, d1, -1L, -1L, null));
        states.add(org.apache.flink.cep.nfa.ComputationState.createState("middle ü", n2, d2, 1_000L, 900L, e1));
        java.util.PriorityQueue<org.apache.flink.cep.nfa.ComputationState> partial =
                new java.util.PriorityQueue<>(org.apache.flink.cep.nfa.NFAState.COMPUTATION_STATE_COMPARATOR);
        partial.addAll(states);
        java.util.PriorityQueue<org.apache.flink.cep.nfa.ComputationState> completed =
                new java.util.PriorityQueue<>(org.apache.flink.cep.nfa.NFAState.COMPUTATION_STATE_COMPARATOR);
        completed.add(org.apache.flink.cep.nfa.ComputationState.createState("$endState$", n1, d2, 5L, 6L, e2));
        org.apache.flink.cep.nfa.NFAState nfa = new org.apache.flink.cep.nfa.NFAState(partial, completed);
        sql("NFAState", new org.apache.flink.cep.nfa.NFAStateSerializer(), nfa);
        sql("NFAState empty", new org.apache.flink.cep.nfa.NFAStateSerializer(),
                new org.apache.flink.cep.nfa.NFAState(new ArrayList<>()));
        // the outer snapshot version 1 (Flink before 1.16: no previous timestamps)
        old("NFAState outer v1", new org.apache.flink.cep.nfa.NFAStateSerializer(), 1, 1, nfa);
        // and the legacy form of a version-1 snapshot (Flink 1.7: no magic, no outer version)
        old("NFAState v1 legacy", new org.apache.flink.cep.nfa.NFAStateSerializer(), -1, 1, nfa);
        old("Lockable v1 legacy", new org.apache.flink.cep.nfa.sharedbuffer.Lockable.LockableTypeSerializer<>(
                StringSerializer.INSTANCE), -1, 0, new org.apache.flink.cep.nfa.sharedbuffer.Lockable<>("e", 3));
        // Flink < 1.13's SharedBufferNode serializer (1.x still reads it; its serialize throws):
        // a ListSerializer of edges, which its deserialize reads back
        try {
            Class<?> c = Class.forName("org.apache.flink.cep.nfa.sharedbuffer.SharedBufferNode$SharedBufferNodeSerializer");
            TypeSerializer legacyNodes = (TypeSerializer) c.getConstructor().newInstance();
            DataOutputSerializer out = new DataOutputSerializer(256);
            new ListSerializer<>(new org.apache.flink.cep.nfa.sharedbuffer.SharedBufferEdge.SharedBufferEdgeSerializer())
                    .serialize(Arrays.asList(new org.apache.flink.cep.nfa.sharedbuffer.SharedBufferEdge(n1, d1),
                            new org.apache.flink.cep.nfa.sharedbuffer.SharedBufferEdge(null, d2)), out);
            byte[] bytes = out.getCopyOfBuffer();
            Object back = legacyNodes.deserialize(new org.apache.flink.core.memory.DataInputDeserializer(bytes));
            if (((org.apache.flink.cep.nfa.sharedbuffer.SharedBufferNode) back).getEdges().size() != 2) {
                throw new IllegalStateException("the old SharedBufferNodeSerializer read " + back);
            }
            DataOutputSerializer snapshot = new DataOutputSerializer(256);
            TypeSerializerSnapshot.writeVersionedSnapshot(snapshot, legacyNodes.snapshotConfiguration());
            System.out.println("SQL-OLD\tSharedBufferNode before 1.13\t" + SerializerVectors.hex(snapshot.getCopyOfBuffer())
                    + "\t" + SerializerVectors.hex(bytes));
        } catch (ClassNotFoundException e) {
            // Flink 2.x has none
        }
        // the shared buffer's map state: EventId -> Lockable<event>, NodeId -> Lockable<SharedBufferNode>
        sql("Map of EventId to Lockable of RowData", new MapSerializer<>(
                org.apache.flink.cep.nfa.sharedbuffer.EventId.EventIdSerializer.INSTANCE,
                new org.apache.flink.cep.nfa.sharedbuffer.Lockable.LockableTypeSerializer<>(events)),
                Collections.singletonMap(e1, new org.apache.flink.cep.nfa.sharedbuffer.Lockable<>(
                        org.apache.flink.table.data.GenericRowData.of(null, 1, null), 1)));
    }
}
