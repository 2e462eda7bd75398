import java.math.BigDecimal;
import java.math.BigInteger;
import java.time.DayOfWeek;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.MonthDay;
import java.time.OffsetDateTime;
import java.time.OffsetTime;
import java.time.Period;
import java.time.Year;
import java.time.YearMonth;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.Currency;
import java.util.Date;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.LinkedList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.UUID;

import org.apache.flink.api.common.serialization.SerializerConfigImpl;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.TypeSerializerSnapshot;
import org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializer;
import org.apache.flink.core.memory.DataOutputSerializer;

/**
 * Values serialized by Flink's own {@code KryoSerializer} (Kryo 5 on Flink 2.x, Kryo 2.24 on
 * Flink 1.x: this file compiles against either), for statectl's Kryo tests
 * (tests/test_flink_kryo.py). One line per case on stdout:
 * {@code VECTOR<TAB>name<TAB>snapshot<TAB>value<TAB>expected JSON<TAB>hashCode}: the versioned
 * serializer snapshot and the value's bytes in hex, the value as statectl shows it in its JSON form
 * (see docs/flink-types.md): java.time as its {@code toString()} (a ZonedDateTime's offset, which
 * Kryo 5 does not write, computed by statectl from the zone's rules), enums as
 * {@code {"enum": class, "ordinal": n}}, maps with string keys as objects, others as lists of
 * {@code {"key", "value"}}, {@code java.util.Date}s as the ISO instant of their milliseconds,
 * {@code BigDecimal}s as text, a class Kryo's FieldSerializer writes as
 * {@code {"undecodable": class}}; then the value's {@code hashCode()} (empty for null), which
 * decides a key's key group.
 */
public class KryoVectors {

    /** A user class: no Kryo default serializer, so Kryo's FieldSerializer writes its fields. */
    public static class Point {
        public int x;
        public int y;

        public Point() {}
    }

    static String hex(byte[] bytes) {
        StringBuilder b = new StringBuilder();
        for (byte x : bytes) b.append(String.format("%02x", x & 0xFF));
        return b.toString();
    }

    static String str(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20 || c > 0x7e) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    static String instantText(long millis) {
        return str(Instant.ofEpochMilli(millis).toString());
    }

    /** The value in statectl's JSON form. */
    static String js(Object v) {
        if (v == null) return "null";
        if (v instanceof String) return str((String) v);
        if (v instanceof Character) return str(String.valueOf(v));
        if (v instanceof Integer || v instanceof Long || v instanceof Short || v instanceof Byte
                || v instanceof BigInteger || v instanceof Boolean) return v.toString();
        if (v instanceof Float) return new BigDecimal(Float.toString((Float) v)).toString();
        if (v instanceof Double) return new BigDecimal(Double.toString((Double) v)).toString();
        if (v instanceof BigDecimal) return str(v.toString());
        if (v instanceof UUID || v instanceof Currency) return str(v.toString());
        if (v instanceof Enum) {
            return "{\"enum\": " + str(((Enum<?>) v).getDeclaringClass().getName()) + ", \"ordinal\": "
                    + ((Enum<?>) v).ordinal() + "}";
        }
        if (v instanceof ZonedDateTime) return str(v.toString());  // offset, then [zone] for a region
        if (v instanceof ZoneId) return str(((ZoneId) v).getId());
        if (v instanceof java.sql.Timestamp) return str(((java.sql.Timestamp) v).toInstant().toString());
        if (v instanceof Date) return instantText(((Date) v).getTime());
        if (v.getClass().getName().startsWith("java.time.")) return str(v.toString());
        if (v instanceof Map) {
            Map<?, ?> m = (Map<?, ?>) v;
            boolean strings = true;
            for (Object k : m.keySet()) strings &= k instanceof String;
            StringBuilder b = new StringBuilder(strings ? "{" : "[");
            String sep = "";
            for (Map.Entry<?, ?> e : m.entrySet()) {
                b.append(sep);
                sep = ", ";
                if (strings) b.append(str((String) e.getKey())).append(": ").append(js(e.getValue()));
                else b.append("{\"key\": ").append(js(e.getKey())).append(", \"value\": ")
                        .append(js(e.getValue())).append('}');
            }
            return b.append(strings ? "}" : "]").toString();
        }
        if (v instanceof Collection) return jsList(((Collection<?>) v).toArray());
        if (v instanceof Object[]) return jsList((Object[]) v);
        if (v.getClass().isArray()) {
            int n = java.lang.reflect.Array.getLength(v);
            Object[] boxed = new Object[n];
            for (int i = 0; i < n; i++) boxed[i] = java.lang.reflect.Array.get(v, i);
            return jsList(boxed);
        }
        return "{\"undecodable\": " + str(v.getClass().getName()) + "}";
    }

    static String jsList(Object[] items) {
        StringBuilder b = new StringBuilder("[");
        for (int i = 0; i < items.length; i++) b.append(i == 0 ? "" : ", ").append(js(items[i]));
        return b.append(']').toString();
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static void vector(String name, TypeSerializer serializer, Object value) throws Exception {
        DataOutputSerializer snapshot = new DataOutputSerializer(256);
        TypeSerializerSnapshot.writeVersionedSnapshot(snapshot, serializer.snapshotConfiguration());
        DataOutputSerializer out = new DataOutputSerializer(256);
        try {
            serializer.serialize(value, out);
        } catch (Exception e) {  // e.g. Kryo 2.24 cannot serialize the class on this JVM
            System.out.println("SKIP\t" + name + "\t" + e);
            return;
        }
        System.out.println("VECTOR\t" + name + "\t" + hex(snapshot.getCopyOfBuffer()) + "\t"
                + hex(out.getCopyOfBuffer()) + "\t" + js(value)
                + "\t" + (value == null ? "" : String.valueOf(value.hashCode())));
    }

    static final SerializerConfigImpl CONFIG = new SerializerConfigImpl();
    static final SerializerConfigImpl REGISTERED = new SerializerConfigImpl();

    /** A value through a KryoSerializer of its own class (null: of {@code declared}). */
    static void of(String name, Class<?> declared, Object value) throws Exception {
        vector(name, new KryoSerializer<>(declared, CONFIG), value);
    }

    static void of(String name, Object value) throws Exception {
        of(name, value.getClass(), value);
    }

    static void any(String name, Object value) throws Exception {
        of(name, Object.class, value);
    }

    @SafeVarargs
    static <T> ArrayList<T> list(T... items) {
        return new ArrayList<>(Arrays.asList(items));
    }

    public static void main(String[] args) throws Exception {
        REGISTERED.registerKryoType(LocalDate.class);
        REGISTERED.registerKryoType(Point.class);

        of("UUID", UUID.fromString("b637b17a-f08a-3ed8-850c-18cccde915da"));
        of("UUID null", UUID.class, null);
        of("LocalDate", LocalDate.of(2024, 2, 29));
        of("LocalDate 0004", LocalDate.of(4, 2, 29));
        of("LocalTime hour", LocalTime.of(10, 0));
        of("LocalTime minute", LocalTime.of(10, 15));
        of("LocalTime second", LocalTime.of(10, 15, 30));
        of("LocalTime nanos", LocalTime.of(23, 59, 59, 999_999_999));
        of("LocalTime millis", LocalTime.of(0, 0, 0, 1_000_000));
        of("LocalDateTime", LocalDateTime.of(1969, 12, 31, 23, 59, 59, 5));
        of("Instant before 1970", Instant.ofEpochSecond(-1, 999_999_999));
        of("Instant", Instant.ofEpochSecond(1_700_000_000L, 123_456_789));
        of("Instant epoch", Instant.EPOCH);
        of("Duration", Duration.ofSeconds(-1, 500_000_000));
        of("Duration long", Duration.ofDays(3).plusMinutes(7).plusNanos(1));
        of("ZonedDateTime Kathmandu", ZonedDateTime.of(2024, 3, 10, 12, 0, 0, 0, ZoneId.of("Asia/Kathmandu")));
        of("ZonedDateTime offset", ZonedDateTime.of(2024, 3, 10, 12, 0, 0, 1, ZoneOffset.of("+05:45")));
        of("OffsetDateTime", OffsetDateTime.of(2024, 3, 10, 12, 30, 0, 0, ZoneOffset.of("+05:45")));
        of("OffsetTime odd offset", OffsetTime.of(1, 2, 3, 4, ZoneOffset.ofTotalSeconds(-37)));
        of("ZoneId", ZoneId.class, ZoneId.of("Asia/Kathmandu"));
        of("ZoneOffset", ZoneOffset.of("+05:45"));
        of("ZoneOffset UTC", ZoneOffset.UTC);
        of("Period", Period.of(1, -2, 30));
        of("Year", Year.of(-44));
        of("YearMonth", YearMonth.of(2024, 12));
        of("MonthDay", MonthDay.of(2, 29));
        of("Integer min", Integer.MIN_VALUE);
        of("Integer null", Integer.class, null);
        of("Long min", Long.MIN_VALUE);
        of("Long", 1_234_567_890_123L);
        of("Short", (short) -2);
        of("Byte", (byte) -128);
        of("Character", 'é');
        of("Float", -1.5f);
        of("Double", 0.1);
        of("Boolean", true);
        of("String empty", "");
        of("String one char", "a");
        of("String ascii", "hello");
        of("String long ascii", "abcdefghijklmnopqrstuvwxyz0123456789ABCDEF");
        of("String unicode", "Kraków 東京 😀");
        of("String null", String.class, null);
        of("BigDecimal ZERO", BigDecimal.ZERO);
        of("BigDecimal", new BigDecimal("-12.50"));
        of("BigDecimal huge", new BigDecimal("-123456789012345678901234567890.5"));
        of("BigDecimal exponent", new BigDecimal("15E+3"));
        of("BigInteger ZERO", BigInteger.ZERO);
        of("BigInteger", BigInteger.valueOf(-1));
        of("BigInteger huge", BigInteger.ONE.shiftLeft(100));
        of("Date", new Date(1_700_000_000_123L));
        of("Date before 1970", new Date(-1L));
        of("sql.Date", new java.sql.Date(86_400_000L));
        of("sql.Time", new java.sql.Time(3_600_000L));
        java.sql.Timestamp timestamp = new java.sql.Timestamp(1_700_000_000_123L);
        timestamp.setNanos(123_456_789);
        of("sql.Timestamp", timestamp);
        of("Currency", Currency.getInstance("EUR"));
        any("enum", DayOfWeek.FRIDAY);
        any("EnumSet", EnumSet.of(DayOfWeek.MONDAY, DayOfWeek.FRIDAY));
        any("EnumSet empty", EnumSet.noneOf(DayOfWeek.class));
        any("int[]", new int[] {0, -1, Integer.MAX_VALUE});
        any("long[]", new long[] {Long.MIN_VALUE, 1});
        any("byte[]", new byte[] {1, -1});
        any("short[]", new short[] {-300});
        any("char[]", new char[] {'a', 'é'});
        any("float[]", new float[] {0.25f});
        any("double[]", new double[] {-0.5});
        any("boolean[]", new boolean[] {true, false});
        any("String[]", new String[] {"a", null, "東京"});
        any("Integer[]", new Integer[] {1, null});
        any("LocalDate[]", new LocalDate[] {LocalDate.of(2024, 1, 1), null});
        any("Object[]", new Object[] {1, "a", null, 2L});
        any("int[][]", new int[][] {{1}, null, {}});
        of("ArrayList empty", new ArrayList<>());
        of("ArrayList mixed", list(1, "a", null, 2L));
        of("ArrayList of Integer", list(1, 2, 3));
        of("ArrayList of String with null", list("a", null));
        of("ArrayList of nulls", list(null, null));
        of("ArrayList of lists", list(list(1), new ArrayList<>(), list("x", list(LocalDate.of(2024, 1, 1)))));
        String shared = new String("shared");
        of("ArrayList same String twice", list(shared, shared, new String("shared")));
        LocalDate day = LocalDate.of(2024, 5, 6);
        of("ArrayList same LocalDate twice", list(day, LocalDate.of(1, 1, 1), day));
        List<Object> inner = list("in");
        of("ArrayList same list twice", list(inner, inner));
        any("ArrayList as Object", list(-1L, 'c'));
        of("LinkedList", new LinkedList<>(list(1.5, -0.0)));
        HashMap<String, Object> hm = new HashMap<>();
        hm.put("a", 1);
        hm.put("b", null);
        of("HashMap", hm);
        HashMap<Object, Object> keys = new HashMap<>();
        keys.put(1, "one");
        keys.put(null, LocalDate.of(2000, 1, 1));
        of("HashMap non-string keys", keys);
        LinkedHashMap<String, Object> lhm = new LinkedHashMap<>();
        lhm.put("z", list(1));
        lhm.put("a", Collections.emptyMap());
        of("LinkedHashMap", lhm);
        TreeMap<String, Integer> tm = new TreeMap<>();
        tm.put("b", 2);
        tm.put("a", 1);
        of("TreeMap", tm);
        of("HashMap empty", new HashMap<>());
        of("HashSet", new HashSet<>(list(3)));
        of("LinkedHashSet", new LinkedHashSet<>(list("x", "y")));
        of("TreeSet", new TreeSet<>(list(5L, -5L)));
        any("emptyList", Collections.emptyList());
        any("emptyMap", Collections.emptyMap());
        any("emptySet", Collections.emptySet());
        any("singletonList", Collections.singletonList("one"));
        any("singletonMap", Collections.singletonMap("k", 1));
        any("singleton", Collections.singleton(null));
        any("Arrays.asList", Arrays.asList(1, "a"));
        any("List.of", List.of(1, 2));
        any("Map.of", Map.of("k", "v"));
        any("Object null", null);
        any("LocalTime as Object", LocalTime.of(12, 0));
        vector("registered LocalDate in a list", new KryoSerializer<>(ArrayList.class, REGISTERED),
                list(LocalDate.of(2024, 1, 2), LocalDate.of(2024, 1, 3)));
        vector("registered LocalDate", new KryoSerializer<>(LocalDate.class, REGISTERED),
                LocalDate.of(2024, 1, 2));
        Point p = new Point();
        p.x = 1;
        p.y = -1;
        of("user class", p);
        vector("registered user class", new KryoSerializer<>(Point.class, REGISTERED), p);
        any("user class in a list", list(1, p));
        any("unmodifiableList", Collections.unmodifiableList(list(1)));
    }
}
