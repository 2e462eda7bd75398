import java.math.BigDecimal;
import java.math.BigInteger;
import java.sql.Time;
import java.sql.Timestamp;
import java.time.DayOfWeek;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.util.Arrays;
import java.util.Date;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;

import org.apache.flink.api.common.serialization.SerializerConfigImpl;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.TypeSerializerSnapshot;
import org.apache.flink.api.common.typeutils.base.BigDecSerializer;
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
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.api.java.typeutils.runtime.RowSerializer;
import org.apache.flink.api.java.typeutils.runtime.TupleSerializer;
import org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializer;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.apache.flink.runtime.state.ttl.TtlStateFactory;
import org.apache.flink.runtime.state.ttl.TtlValue;
import org.apache.flink.streaming.api.operators.TimerHeapInternalTimer;
import org.apache.flink.streaming.api.operators.TimerSerializer;
import org.apache.flink.streaming.api.windowing.windows.GlobalWindow;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.types.Row;
import org.apache.flink.types.RowKind;

/**
 * Values serialized by Flink 2.3's own serializers, for statectl's encoder tests
 * (tests/test_flink_encoders.py): one line per case on stdout,
 * {@code VECTOR<TAB>name<TAB>serializer snapshot<TAB>value}, both in hex: the snapshot as
 * {@code TypeSerializerSnapshot.writeVersionedSnapshot} writes it into a state's meta info, the
 * value as the serializer writes it into state. statectl reads the snapshot, decodes the value
 * and must encode it back to the same bytes.
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

    static final SerializerConfigImpl CONFIG = new SerializerConfigImpl();

    static String hex(byte[] bytes) {
        StringBuilder b = new StringBuilder();
        for (byte x : bytes) b.append(String.format("%02x", x & 0xFF));
        return b.toString();
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static void vector(String name, TypeSerializer serializer, Object value) throws Exception {
        DataOutputSerializer snapshot = new DataOutputSerializer(256);
        TypeSerializerSnapshot.writeVersionedSnapshot(snapshot, serializer.snapshotConfiguration());
        DataOutputSerializer out = new DataOutputSerializer(256);
        serializer.serialize(value, out);
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
    }
}
