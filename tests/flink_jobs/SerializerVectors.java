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
