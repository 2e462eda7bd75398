package upgrade.driver;

import java.lang.reflect.Array;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.OffsetDateTime;
import java.time.OffsetTime;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;
import org.apache.flink.api.common.functions.RuntimeContext;
import org.apache.flink.api.common.state.AppendingState;
import org.apache.flink.api.common.state.KeyedStateStore;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.State;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.runtime.state.KeyedStateBackend;
import org.apache.flink.runtime.state.VoidNamespace;

/**
 * Shared between the driver and the jobs' classes: loaded by the application class loader (the
 * parent of every job's class loader), so the driver sees how many records the stateful
 * operators of the running job processed, and what they dumped.
 *
 * <p>The dump: a stateful operator fed the marker record (value {@link #DUMP_MARKER}, the input
 * line {@code KEY,dump}) calls {@link #dump}, which reads each of its keyed states for every key
 * the backend holds (Flink's own objects, through the operator's own state handles) and renders
 * each value as canonical JSON ({@link #json}).
 */
public final class Probe {
    /** The value of the record that asks the stateful operators to dump their state. */
    public static final long DUMP_MARKER = Long.MIN_VALUE;

    static final AtomicInteger PROCESSED = new AtomicInteger();
    static final AtomicInteger DUMPED = new AtomicInteger();
    /** Dumped entries: {operator, state, key JSON, value JSON}. */
    static final List<String[]> DUMP = Collections.synchronizedList(new ArrayList<>());

    private Probe() {}

    static void reset() {
        PROCESSED.set(0);
        DUMPED.set(0);
        DUMP.clear();
    }

    /** Called by a stateful operator once per record, after it updated its state. */
    public static void processed() {
        PROCESSED.incrementAndGet();
    }

    /**
     * Dumps, for every key the keyed state backend holds in any of {@code states} (name -> the
     * operator's state handle, in the void namespace), each state's value (absent values and
     * empty lists and maps skipped). The backend's current key is restored after.
     */
    @SuppressWarnings({"unchecked", "rawtypes"})
    public static void dump(String operator, RuntimeContext ctx, Map<String, ? extends State> states) throws Exception {
        KeyedStateBackend backend = backend(ctx);
        Object current = backend.getCurrentKey();
        Set<Object> keys = new LinkedHashSet<>();
        for (String name : states.keySet()) {
            try (Stream<Object> s = backend.getKeys(name, VoidNamespace.INSTANCE)) {
                s.forEach(keys::add);
            }
        }
        List<String[]> entries = new ArrayList<>();
        try {
            for (Object key : keys) {
                backend.setCurrentKey(key);
                for (Map.Entry<String, ? extends State> e : states.entrySet()) {
                    Object value = read(e.getValue());
                    if (value == null) continue;
                    entries.add(new String[] {operator, e.getKey(), json(key), json(value)});
                }
            }
        } finally {
            backend.setCurrentKey(current);
        }
        DUMP.addAll(entries);
        DUMPED.incrementAndGet();
    }

    /** The keyed state backend behind a keyed function's runtime context (Flink 1.20 and 2.x). */
    static KeyedStateBackend<?> backend(RuntimeContext ctx) throws Exception {
        Object store = field(ctx, KeyedStateStore.class);
        Object backend = store == null ? null : field(store, KeyedStateBackend.class);
        if (backend == null) throw new IllegalStateException("no keyed state backend behind " + ctx.getClass().getName());
        return (KeyedStateBackend<?>) backend;
    }

    /** The first non-null field of {@code o} (its class or a superclass) declared of type {@code type}. */
    static Object field(Object o, Class<?> type) throws Exception {
        for (Class<?> c = o.getClass(); c != null && c != Object.class; c = c.getSuperclass()) {
            for (Field f : c.getDeclaredFields()) {
                if (Modifier.isStatic(f.getModifiers()) || !type.isAssignableFrom(f.getType())) continue;
                f.setAccessible(true);
                Object v = f.get(o);
                if (v != null) return v;
            }
        }
        return null;
    }

    static Object read(State state) throws Exception {
        if (state instanceof ValueState) return ((ValueState<?>) state).value();
        if (state instanceof MapState) {
            Map<Object, Object> m = new LinkedHashMap<>();
            Iterable<? extends Map.Entry<?, ?>> it = ((MapState<?, ?>) state).entries();
            if (it != null) for (Map.Entry<?, ?> e : it) m.put(e.getKey(), e.getValue());
            return m.isEmpty() ? null : m;
        }
        if (state instanceof AppendingState) {
            Object v = ((AppendingState<?, ?>) state).get();
            if (v instanceof Iterable) {
                List<Object> l = new ArrayList<>();
                for (Object x : (Iterable<?>) v) l.add(x);
                return l.isEmpty() ? null : l;
            }
            return v;
        }
        throw new IllegalArgumentException("cannot dump a " + state.getClass().getName());
    }

    // ------------------------------------------------------------------ canonical JSON

    /**
     * Canonical JSON of a value: null, booleans, numbers (integers as integers), strings (chars
     * too), enums by name, java.time values as ISO-8601 strings (Duration and Period too),
     * arrays, collections and iterables as lists, maps as objects with sorted keys (a non-string
     * key as its JSON), other JDK values as their toString, and any other object (a POJO, a
     * Tuple, a Kryo-serialized class) as an object of its non-static, non-transient fields by
     * name (superclasses' too).
     */
    public static String json(Object v) {
        StringBuilder b = new StringBuilder();
        write(b, v);
        return b.toString();
    }

    static void write(StringBuilder b, Object v) {
        if (v == null) {
            b.append("null");
        } else if (v instanceof String || v instanceof Character) {
            string(b, v.toString());
        } else if (v instanceof Boolean || v instanceof Long || v instanceof Integer || v instanceof Short
                || v instanceof Byte || v instanceof BigInteger) {
            b.append(v);
        } else if (v instanceof BigDecimal) {
            b.append(((BigDecimal) v).toPlainString());
        } else if (v instanceof Double || v instanceof Float) {
            double d = ((Number) v).doubleValue();
            if (Double.isNaN(d) || Double.isInfinite(d)) string(b, v.toString());
            else b.append(v);
        } else if (v instanceof Enum) {
            string(b, ((Enum<?>) v).name());
        } else if (v instanceof Instant) {
            string(b, DateTimeFormatter.ISO_INSTANT.format((Instant) v));
        } else if (v instanceof LocalDate) {
            string(b, DateTimeFormatter.ISO_LOCAL_DATE.format((LocalDate) v));
        } else if (v instanceof LocalTime) {
            string(b, DateTimeFormatter.ISO_LOCAL_TIME.format((LocalTime) v));
        } else if (v instanceof LocalDateTime) {
            string(b, DateTimeFormatter.ISO_LOCAL_DATE_TIME.format((LocalDateTime) v));
        } else if (v instanceof OffsetDateTime) {
            string(b, DateTimeFormatter.ISO_OFFSET_DATE_TIME.format((OffsetDateTime) v));
        } else if (v instanceof OffsetTime) {
            string(b, DateTimeFormatter.ISO_OFFSET_TIME.format((OffsetTime) v));
        } else if (v instanceof ZonedDateTime) {
            string(b, DateTimeFormatter.ISO_ZONED_DATE_TIME.format((ZonedDateTime) v));
        } else if (v instanceof Map) {
            Map<String, Object> sorted = new TreeMap<>();
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet())
                sorted.put(e.getKey() instanceof String ? (String) e.getKey() : json(e.getKey()), e.getValue());
            object(b, sorted);
        } else if (v instanceof Iterable) {
            b.append('[');
            int n = 0;
            for (Object x : (Iterable<?>) v) {
                if (n++ > 0) b.append(',');
                write(b, x);
            }
            b.append(']');
        } else if (v.getClass().isArray()) {
            b.append('[');
            for (int i = 0; i < Array.getLength(v); i++) {
                if (i > 0) b.append(',');
                write(b, Array.get(v, i));
            }
            b.append(']');
        } else if (v.getClass().getName().startsWith("java.")) {
            string(b, v.toString());  // Duration, Period, ZoneId, UUID, ...
        } else {
            Map<String, Object> fields = new TreeMap<>();
            for (Class<?> c = v.getClass(); c != null && c != Object.class; c = c.getSuperclass()) {
                for (Field f : c.getDeclaredFields()) {
                    int m = f.getModifiers();
                    if (Modifier.isStatic(m) || Modifier.isTransient(m) || f.isSynthetic()) continue;
                    try {
                        f.setAccessible(true);
                        fields.putIfAbsent(f.getName(), f.get(v));
                    } catch (ReflectiveOperationException | RuntimeException e) {
                        throw new IllegalStateException("cannot read " + c.getName() + "." + f.getName(), e);
                    }
                }
            }
            object(b, fields);
        }
    }

    static void object(StringBuilder b, Map<String, Object> fields) {
        b.append('{');
        int n = 0;
        for (Map.Entry<String, Object> e : fields.entrySet()) {
            if (n++ > 0) b.append(',');
            string(b, e.getKey());
            b.append(':');
            write(b, e.getValue());
        }
        b.append('}');
    }

    static void string(StringBuilder b, String s) {
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
                    else b.append(c);
            }
        }
        b.append('"');
    }
}
