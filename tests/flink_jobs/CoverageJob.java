import java.io.File;
import java.lang.reflect.Array;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.sql.Timestamp;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.ZoneId;
import java.time.ZonedDateTime;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.Collection;
import java.util.Currency;
import java.util.Date;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.flink.api.common.JobStatus;
import org.apache.flink.api.common.eventtime.Watermark;
import org.apache.flink.api.common.eventtime.WatermarkGenerator;
import org.apache.flink.api.common.eventtime.WatermarkOutput;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.AggregateFunction;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichFlatMapFunction;
import org.apache.flink.api.common.state.AggregatingState;
import org.apache.flink.api.common.state.AggregatingStateDescriptor;
import org.apache.flink.api.common.state.BroadcastState;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ReadOnlyBroadcastState;
import org.apache.flink.api.common.state.ReducingState;
import org.apache.flink.api.common.state.ReducingStateDescriptor;
import org.apache.flink.api.common.state.StateTtlConfig;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.BasicArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple;
import org.apache.flink.api.java.tuple.Tuple0;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.api.java.typeutils.EitherTypeInfo;
import org.apache.flink.api.java.typeutils.GenericTypeInfo;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.PipelineOptions;
import org.apache.flink.connector.file.src.FileSource;
import org.apache.flink.connector.file.src.reader.TextLineInputFormat;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.core.fs.Path;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.co.BroadcastProcessFunction;
import org.apache.flink.streaming.api.functions.windowing.ProcessWindowFunction;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.types.Either;
import org.apache.flink.types.IntValue;
import org.apache.flink.types.Row;
import org.apache.flink.types.StringValue;
import org.apache.flink.util.Collector;

/**
 * The coverage job of statectl's type decoders (tests/flink_coverage.py): Flink itself is the
 * ground truth for every type statectl decodes.
 *
 * <p>{@code java CoverageJob OUT} starts one MiniCluster and, in it:
 * <ol>
 * <li>generates: the job reads {@code NKEYS} keys (two records each, from a file it writes) and
 *     keeps one state of each type (below), with values chosen for edge cases (nulls, empty
 *     collections, extreme numbers, negative instants, nanoseconds). Two runs: the hashmap backend
 *     (a retained checkpoint and a canonical savepoint) and RocksDB with incremental checkpoints (a
 *     canonical and a native savepoint and a retained incremental checkpoint): five snapshots;</li>
 * <li>verifies: restores each snapshot with the same job in verify mode (one probe record per key)
 *     and writes what Flink restored as one JSON line per (operator, state, key[, namespace])
 *     in statectl's canonical JSON forms (docs/flink-types.md) to {@code OUT/reference/<kind>.jsonl};
 *     timers and windows are printed when they fire (a final watermark after the probes).</li>
 * </ol>
 * {@code OUT/result.json} names the snapshots and the timings. Operators (uid = name):
 * pojo-keyed, types-keyed, kryo-keyed, kryo-opaque (String keys), tuple-keyed (Tuple2 key),
 * pojo-key (POJO key), window-agg (TimeWindow namespace), op-state (operator list state),
 * broadcast-fn (broadcast state).
 */
public class CoverageJob {

    static final int NKEYS = Integer.getInteger("coverage.keys", 20);
    static final int PARALLELISM = 2;
    static final int MAX_PARALLELISM = 128;
    static final long TS_BASE = 1_700_000_000_000L;

    // ------------------------------------------------------------------ the types kept in state

    public enum Status { ACTIVE, SUSPENDED, CLOSED }

    /** Nested POJO (list, map and nested values). */
    public static class Inner {
        public String label;
        public long n;
        public Status st;

        public Inner() {}

        Inner(String label, long n, Status st) {
            this.label = label;
            this.n = n;
            this.st = st;
        }
    }

    /** The big POJO: every field type a POJO may hold. */
    public static class Big {
        public String name;
        public int id;
        public long big;
        public double score;
        public Integer maybe;
        public Inner inner;
        public List<String> tags;
        public Map<String, Long> counts;
        public Set<Integer> ids;
        public Date date;
        public LocalDate day;
        public LocalDateTime ldt;
        public LocalTime lt;
        public Instant at;
        public int[] ints;
        public double[] doubles;
        public byte[] bytes;
        public Status status;
        public BigDecimal dec;

        public Big() {}
    }

    /** A POJO stored as itself or as a subclass. */
    public static class Base {
        public int id;
        public String tag;

        public Base() {}
    }

    /** A subclass registered with Flink (pipeline.serialization-config, type pojo). */
    public static class SubReg extends Base {
        public double extra;

        public SubReg() {}
    }

    /** A subclass Flink does not know in advance (its class name is written). */
    public static class SubUnreg extends Base {
        public long more;
        public Status st;

        public SubUnreg() {}
    }

    /** A POJO key (equals/hashCode of its fields, as Flink requires of a key). */
    public static class KeyPojo {
        public String name;
        public int n;

        public KeyPojo() {}

        KeyPojo(String name, int n) {
            this.name = name;
            this.n = n;
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof KeyPojo && Objects.equals(name, ((KeyPojo) o).name) && n == ((KeyPojo) o).n;
        }

        @Override
        public int hashCode() {
            return Objects.hash(name, n);
        }
    }

    /** No POJO (final private fields, no no-arg constructor): only Kryo's FieldSerializer knows it. */
    public static class Opaque {
        private final String secret;
        private final int level;

        Opaque(String secret, int level) {
            this.secret = secret;
            this.level = level;
        }
    }

    // ------------------------------------------------------------------ deterministic values

    static String user(int j) {
        return "k" + j;
    }

    static Big big(int j, int i) {
        Big b = new Big();
        b.name = j == 0 ? null : j == 3 ? "\u00fc\u20ac\ud834\udd1e-" + i : "name-" + j + "-" + i;
        b.id = j;
        b.big = j == 2 ? Long.MIN_VALUE : j * 1_000_000_007L * (j % 2 == 0 ? -1 : 1);
        b.score = j == 2 ? Double.MAX_VALUE : j == 4 ? Double.MIN_VALUE : -j * 1.5;
        b.maybe = j % 3 == 0 ? null : j * 7 - 10;
        b.inner = j == 0 ? null : new Inner("in" + j, -j, j == 5 ? null : Status.values()[j % 3]);
        b.tags = j == 0 ? null : j == 1 ? new ArrayList<>() : new ArrayList<>(Arrays.asList("a" + j, j == 4 ? null : "b", ""));
        if (j == 0) b.counts = null;
        else {
            b.counts = new HashMap<>();
            if (j != 1) {
                b.counts.put("x", (long) j);
                b.counts.put("y", -(long) j);
                if (j == 5) b.counts.put("z", null);
            }
        }
        b.ids = j == 0 ? null : j == 1 ? new HashSet<>() : new HashSet<>(Arrays.asList(j, -j, 0));
        b.date = j == 0 ? null : new Date(-86_400_000L * j + 123);
        b.day = j == 0 ? null : j == 2 ? LocalDate.of(1, 1, 1) : j == 6 ? LocalDate.of(9999, 12, 31) : LocalDate.of(1969 + j, 12, 31);
        b.ldt = j == 0 ? null : LocalDateTime.of(2024, 2, 29, 23, 59, 59, 999_999_999 - j);
        b.lt = j == 0 ? null : j == 1 ? LocalTime.MIDNIGHT : LocalTime.of(j % 24, 30, j % 2 == 0 ? 0 : 15, j * 1000);
        b.at = j == 0 ? null : j == 2 ? Instant.ofEpochSecond(1_700_000_000L, 1) : Instant.ofEpochSecond(-1 - j, 123_456_789);
        b.ints = j == 0 ? null : j == 1 ? new int[0] : new int[] {j, -j, Integer.MIN_VALUE};
        b.doubles = j == 0 ? null : j == 1 ? new double[0] : new double[] {0.5, -j, 1e300};
        b.bytes = j == 0 ? null : j == 1 ? new byte[0] : new byte[] {0, -1, (byte) j, 127};
        b.status = j == 0 ? null : Status.values()[j % 3];
        b.dec = j == 0 ? null : j == 3 ? new BigDecimal("1E+5") : j == 4 ? BigDecimal.valueOf(0, 10)
                : new BigDecimal("-12345678901234567890.000123").add(BigDecimal.valueOf(j));
        return b;
    }

    static Base base(int j, boolean registered) {
        Base b;
        if (j % 2 == 0) b = new Base();
        else if (registered) {
            SubReg s = new SubReg();
            s.extra = -j / 4.0;
            b = s;
        } else {
            SubUnreg s = new SubUnreg();
            s.more = Long.MAX_VALUE - j;
            s.st = j == 1 ? null : Status.CLOSED;
            b = s;
        }
        b.id = -j;
        b.tag = j == 0 ? null : "t" + j;
        return b;
    }

    // ------------------------------------------------------------------ JSON (canonical forms)

    static String js(String s) {
        if (s == null) return "null";
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20 || c > 0x7e) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    /** HH:mm:ss and the fraction as LocalTime.toString writes it (3, 6 or 9 digits). */
    static String timeText(LocalTime t) {
        String text = String.format("%02d:%02d:%02d", t.getHour(), t.getMinute(), t.getSecond());
        int nano = t.getNano();
        if (nano == 0) return text;
        if (nano % 1_000_000 == 0) return text + String.format(".%03d", nano / 1_000_000);
        if (nano % 1000 == 0) return text + String.format(".%06d", nano / 1000);
        return text + String.format(".%09d", nano);
    }

    static boolean isPojo(Class<?> c) {
        return c.getName().startsWith("CoverageJob$") && !c.isEnum() && c != Opaque.class;
    }

    static String json(Object o) {
        if (o == null) return "null";
        if (o instanceof String) return js((String) o);
        if (o instanceof Boolean || o instanceof Integer || o instanceof Long || o instanceof Short
                || o instanceof Byte || o instanceof BigInteger) return o.toString();
        if (o instanceof Double || o instanceof Float) {
            double d = ((Number) o).doubleValue();
            if (Double.isNaN(d)) return "\"NaN\"";
            if (Double.isInfinite(d)) return d > 0 ? "\"Infinity\"" : "\"-Infinity\"";
            return o.toString();
        }
        if (o instanceof Character) return js(o.toString());
        if (o instanceof BigDecimal) return js(o.toString());
        if (o instanceof Enum) return js(((Enum<?>) o).name());
        if (o instanceof Instant) return String.valueOf(((Instant) o).toEpochMilli());
        if (o instanceof Date) return String.valueOf(((Date) o).getTime());  // util, sql Date, Timestamp
        // statectl's ISO-8601 text: Java's toString, but the seconds always written
        if (o instanceof LocalTime) return js(timeText((LocalTime) o));
        if (o instanceof LocalDateTime) return js(((LocalDateTime) o).toLocalDate() + "T" + timeText(((LocalDateTime) o).toLocalTime()));
        if (o instanceof ZonedDateTime) {
            // ZonedDateTime.toString, the offset from its seconds: Kryo 2.24 restores a
            // ZoneOffset without its (transient) id
            ZonedDateTime z = (ZonedDateTime) o;
            String offset = java.time.ZoneOffset.ofTotalSeconds(z.getOffset().getTotalSeconds()).getId();
            String zone = z.getZone().getId();
            return js(z.toLocalDateTime() + offset + (zone.equals(offset) ? "" : "[" + zone + "]"));
        }
        if (o instanceof LocalDate || o instanceof Duration || o instanceof UUID) return js(o.toString());
        if (o instanceof Currency) return js(((Currency) o).getCurrencyCode());
        if (o instanceof IntValue) return String.valueOf(((IntValue) o).getValue());
        if (o instanceof StringValue) return js(o.toString());
        if (o instanceof byte[]) return js(Base64.getEncoder().encodeToString((byte[]) o));
        if (o instanceof Either) {
            Either<?, ?> e = (Either<?, ?>) o;
            return e.isLeft() ? "{\"left\":" + json(e.left()) + "}" : "{\"right\":" + json(e.right()) + "}";
        }
        if (o instanceof Tuple) {
            Tuple t = (Tuple) o;
            List<String> parts = new ArrayList<>();
            for (int i = 0; i < t.getArity(); i++) parts.add(json(t.getField(i)));
            return "[" + String.join(",", parts) + "]";
        }
        if (o instanceof Row) {
            Row r = (Row) o;
            List<String> parts = new ArrayList<>();
            for (int i = 0; i < r.getArity(); i++) parts.add(json(r.getField(i)));
            return "[" + String.join(",", parts) + "]";
        }
        if (o.getClass().isArray()) {
            List<String> parts = new ArrayList<>();
            for (int i = 0; i < Array.getLength(o); i++) parts.add(json(Array.get(o, i)));
            return "[" + String.join(",", parts) + "]";
        }
        if (o instanceof EnumSet) {  // Kryo writes the ordinals, not the names: statectl's form
            TreeSet<String> parts = new TreeSet<>();
            for (Object x : (Set<?>) o) {
                Enum<?> e = (Enum<?>) x;
                parts.add("{\"enum\":" + js(e.getDeclaringClass().getName()) + ",\"ordinal\":" + e.ordinal() + "}");
            }
            return "[" + String.join(",", parts) + "]";
        }
        if (o instanceof Set) {
            TreeSet<String> parts = new TreeSet<>();
            for (Object x : (Set<?>) o) parts.add(json(x));
            return "[" + String.join(",", parts) + "]";
        }
        if (o instanceof Collection) {
            List<String> parts = new ArrayList<>();
            for (Object x : (Collection<?>) o) parts.add(json(x));
            return "[" + String.join(",", parts) + "]";
        }
        if (o instanceof Map) return mapJson((Map<?, ?>) o);
        if (isPojo(o.getClass())) {
            TreeMap<String, String> fields = new TreeMap<>();
            for (Field f : o.getClass().getFields()) {
                if (Modifier.isStatic(f.getModifiers()) || Modifier.isTransient(f.getModifiers())) continue;
                try {
                    fields.put(f.getName(), json(f.get(o)));
                } catch (IllegalAccessException e) {
                    throw new IllegalStateException(e);
                }
            }
            // a value of a POJO type that has subclasses names its class
            if (o instanceof Base) fields.put("@class", js(o.getClass().getName()));
            List<String> parts = new ArrayList<>();
            for (Map.Entry<String, String> e : fields.entrySet()) parts.add(js(e.getKey()) + ":" + e.getValue());
            return "{" + String.join(",", parts) + "}";
        }
        throw new IllegalArgumentException("no JSON form for " + o.getClass());
    }

    /** A map: an object when every key is a string, else [{"key", "value"}] sorted by key. */
    static String mapJson(Map<?, ?> m) {
        boolean strings = true;
        for (Object k : m.keySet()) strings &= k instanceof String;
        TreeMap<String, String> sorted = new TreeMap<>();
        for (Map.Entry<?, ?> e : m.entrySet()) {
            String k = strings ? js((String) e.getKey()) : json(e.getKey());
            sorted.put(k, json(e.getValue()));
        }
        List<String> parts = new ArrayList<>();
        for (Map.Entry<String, String> e : sorted.entrySet()) {
            parts.add(strings ? e.getKey() + ":" + e.getValue()
                    : "{\"key\":" + e.getKey() + ",\"value\":" + e.getValue() + "}");
        }
        return strings ? "{" + String.join(",", parts) + "}" : "[" + String.join(",", parts) + "]";
    }

    // ------------------------------------------------------------------ verify-mode output

    /** What the restored job printed (tasks run in this JVM, parent-first: statics are shared). */
    static final ConcurrentLinkedQueue<String> LINES = new ConcurrentLinkedQueue<>();
    static final AtomicInteger PROCESSED = new AtomicInteger();
    static final List<String> OP_LIST = java.util.Collections.synchronizedList(new ArrayList<>());
    static final AtomicBoolean BROADCAST_DUMPED = new AtomicBoolean();
    static volatile boolean FIRE = false;

    static void emit(String op, String state, String kind, Object key, Object ns, Object value) {
        LINES.add("{\"op\":" + js(op) + ",\"state\":" + js(state) + ",\"kind\":" + js(kind)
                + ",\"key\":" + json(key) + (ns == null ? "" : ",\"ns\":" + json(ns))
                + ",\"value\":" + json(value) + "}");
    }

    static void emitUndecodable(String op, String state, Object key, Object value) {
        LINES.add("{\"op\":" + js(op) + ",\"state\":" + js(state) + ",\"kind\":\"value\",\"key\":" + json(key)
                + ",\"undecodable\":" + js(value.getClass().getName()) + "}");
    }

    static <T> List<T> listOf(Iterable<T> it) {
        List<T> out = new ArrayList<>();
        if (it != null) for (T x : it) out.add(x);
        return out;
    }

    static <K, V> Map<K, V> mapOf(MapState<K, V> state) throws Exception {
        Map<K, V> out = new LinkedHashMap<>();
        Iterable<Map.Entry<K, V>> es = state.entries();
        if (es != null) for (Map.Entry<K, V> e : es) out.put(e.getKey(), e.getValue());
        return out;
    }

    // ------------------------------------------------------------------ the operators

    /** A record: (key index j, record index i (-1: a probe), event time). */
    public static class Parse extends RichFlatMapFunction<String, Tuple3<Integer, Integer, Long>> {
        @Override
        public void flatMap(String line, Collector<Tuple3<Integer, Integer, Long>> out) {
            if (line.isEmpty()) return;
            String[] p = line.split(",");
            int j = Integer.parseInt(p[0]);
            int i = Integer.parseInt(p[1]);
            long ts = j == 2 ? -3 * 3_600_000L + i : TS_BASE + (j % 5) * 3_600_000L + i * 3_000_000L;
            out.collect(Tuple3.of(j, i, ts));
        }
    }

    /** Emits no watermark until FIRE (verify mode, after the probes): then Long.MAX_VALUE. */
    public static class SignalWatermarks implements WatermarkGenerator<Tuple3<Integer, Integer, Long>> {
        @Override
        public void onEvent(Tuple3<Integer, Integer, Long> e, long ts, WatermarkOutput out) {}

        @Override
        public void onPeriodicEmit(WatermarkOutput out) {
            if (FIRE) out.emitWatermark(new Watermark(Long.MAX_VALUE));
        }
    }

    static final TypeInformation<Tuple2<Long, Long>> AGG_TYPE = Types.TUPLE(Types.LONG, Types.LONG);

    /** Sum and count of the record indexes; the result is the accumulator itself. */
    public static class SumCount implements AggregateFunction<Long, Tuple2<Long, Long>, Tuple2<Long, Long>> {
        @Override
        public Tuple2<Long, Long> createAccumulator() {
            return Tuple2.of(0L, 0L);
        }

        @Override
        public Tuple2<Long, Long> add(Long v, Tuple2<Long, Long> acc) {
            return Tuple2.of(acc.f0 + v, acc.f1 + 1);
        }

        @Override
        public Tuple2<Long, Long> getResult(Tuple2<Long, Long> acc) {
            return acc;
        }

        @Override
        public Tuple2<Long, Long> merge(Tuple2<Long, Long> a, Tuple2<Long, Long> b) {
            return Tuple2.of(a.f0 + b.f0, a.f1 + b.f1);
        }
    }

    /** POJOs: value, list, map (Long key), reducing, aggregating, TTL value, event-time timers. */
    public static class PojoKeyed extends KeyedProcessFunction<String, Tuple3<Integer, Integer, Long>, String> {
        final boolean verify;
        transient ValueState<Big> bigState;
        transient ListState<Inner> list;
        transient MapState<Long, Inner> map;
        transient ReducingState<Long> reducing;
        transient AggregatingState<Long, Tuple2<Long, Long>> aggregating;
        transient ValueState<String> ttl;

        PojoKeyed(boolean verify) {
            this.verify = verify;
        }

        @Override
        public void open(OpenContext ctx) {
            bigState = getRuntimeContext().getState(new ValueStateDescriptor<>("big-pojo", TypeInformation.of(Big.class)));
            list = getRuntimeContext().getListState(new ListStateDescriptor<>("pojo-list", TypeInformation.of(Inner.class)));
            map = getRuntimeContext().getMapState(new MapStateDescriptor<>("pojo-map", Types.LONG, TypeInformation.of(Inner.class)));
            reducing = getRuntimeContext().getReducingState(new ReducingStateDescriptor<>("reducing", Long::sum, Types.LONG));
            aggregating = getRuntimeContext().getAggregatingState(new AggregatingStateDescriptor<>("aggregating", new SumCount(), AGG_TYPE));
            ValueStateDescriptor<String> t = new ValueStateDescriptor<>("ttl-value", Types.STRING);
            t.enableTimeToLive(StateTtlConfig.newBuilder(Duration.ofDays(3650))
                    .setUpdateType(StateTtlConfig.UpdateType.OnCreateAndWrite)
                    .setStateVisibility(StateTtlConfig.StateVisibility.NeverReturnExpired).build());
            ttl = getRuntimeContext().getState(t);
        }

        @Override
        public void processElement(Tuple3<Integer, Integer, Long> r, Context ctx, Collector<String> out) throws Exception {
            String k = ctx.getCurrentKey();
            int j = r.f0;
            if (verify) {
                String op = "pojo-keyed";
                if (bigState.value() != null) emit(op, "big-pojo", "value", k, null, bigState.value());
                List<Inner> l = listOf(list.get());
                if (!l.isEmpty()) emit(op, "pojo-list", "list", k, null, l);
                Map<Long, Inner> m = mapOf(map);
                if (!m.isEmpty()) emit(op, "pojo-map", "map", k, null, m);
                if (reducing.get() != null) emit(op, "reducing", "reducing", k, null, reducing.get());
                if (aggregating.get() != null) emit(op, "aggregating", "aggregating", k, null, aggregating.get());
                if (ttl.value() != null) emit(op, "ttl-value", "value", k, null, ttl.value());
                out.collect("probe " + k);  // lets watermark-done register its timer
            } else {
                int i = r.f1;
                bigState.update(big(j, i));
                if (j != 1) list.add(new Inner(j == 3 ? null : "l" + j + "-" + i, (long) j * 100 + i, Status.values()[(j + i) % 3]));
                if (j != 1) map.put(i == 0 ? Long.MIN_VALUE + j : (long) -j * i, new Inner("m" + i, i, i == 1 ? null : Status.ACTIVE));
                reducing.add((long) j * 10 - i);
                aggregating.add((long) j - 7 * i);
                if (j % 4 != 0) ttl.update("ttl-" + j + "-" + i);
                ctx.timerService().registerEventTimeTimer(1000L * j + 7);
                if (j % 3 == 0) ctx.timerService().registerEventTimeTimer(-1000L - j);
            }
            PROCESSED.incrementAndGet();
        }

        @Override
        public void onTimer(long timestamp, OnTimerContext ctx, Collector<String> out) {
            if (verify) emit("pojo-keyed", "_timer_state/event_user-timers", "timer", ctx.getCurrentKey(), null, timestamp);
        }
    }

    static final TypeInformation<Either<String, Long>> EITHER = new EitherTypeInfo<>(Types.STRING, Types.LONG);
    static final TypeInformation<Row> ROW = Types.ROW(Types.STRING, Types.LONG, Types.DOUBLE);
    static final TypeInformation<Row> ROW_NAMED = Types.ROW_NAMED(new String[] {"name", "count"}, Types.STRING, Types.INT);

    /** Value states of Flink's own serializers: tuples, Either, rows, arrays, java.sql, big numbers, Value types, subclasses. */
    public static class TypesKeyed extends KeyedProcessFunction<String, Tuple3<Integer, Integer, Long>, String> {
        final boolean verify;
        final Map<String, ValueState<Object>> states = new LinkedHashMap<>();

        TypesKeyed(boolean verify) {
            this.verify = verify;
        }

        @SuppressWarnings({"unchecked", "rawtypes"})
        private void add(String name, TypeInformation<?> type) {
            states.put(name, getRuntimeContext().getState(new ValueStateDescriptor(name, type)));
        }

        @Override
        public void open(OpenContext ctx) {
            states.clear();
            add("tuple3", Types.TUPLE(Types.STRING, Types.LONG, Types.DOUBLE));
            add("tuple0", TypeInformation.of(Tuple0.class));
            add("either", EITHER);
            add("row", ROW);
            add("row-named", ROW_NAMED);
            add("string-array", BasicArrayTypeInfo.STRING_ARRAY_TYPE_INFO);
            add("integer-array", BasicArrayTypeInfo.INT_ARRAY_TYPE_INFO);
            add("sql-timestamp", Types.SQL_TIMESTAMP);
            add("sql-date", Types.SQL_DATE);
            add("big-integer", Types.BIG_INT);
            add("local-date-time", Types.LOCAL_DATE_TIME);
            add("int-value", TypeInformation.of(IntValue.class));
            add("string-value", TypeInformation.of(StringValue.class));
            add("sub-registered", TypeInformation.of(Base.class));
            add("sub-unregistered", TypeInformation.of(Base.class));
        }

        static Object value(String name, int j, int i) {
            switch (name) {
                case "tuple3": return Tuple3.of(j == 0 ? null : "t" + j, j == 2 ? Long.MAX_VALUE : (long) -j, j * 0.1 + i);
                case "tuple0": return Tuple0.INSTANCE;
                case "either": return j % 2 == 0 ? Either.Left("l" + j) : Either.Right((long) -j * 1_000_000_000_000L);
                case "row": return Row.of(j == 0 ? null : "r" + j, (long) j - 10, j % 3 == 0 ? null : 1.5 * j);
                case "row-named": {
                    // positional: RowSerializer writes fields by position (a name-based Row is refused)
                    return Row.of("n" + j, j % 4 == 0 ? null : -j);
                }
                case "string-array": return j == 1 ? new String[0] : new String[] {"s" + j, null, ""};
                case "integer-array": return j == 1 ? new Integer[0] : new Integer[] {j, null, Integer.MAX_VALUE};
                case "sql-timestamp": {
                    Timestamp t = new Timestamp((j % 2 == 0 ? 1 : -1) * 1_000_000_000L * j);
                    t.setNanos(123_456_789 + j);
                    return t;
                }
                case "sql-date": return new java.sql.Date(-86_400_000L * j);
                case "big-integer": return j == 2 ? BigInteger.TWO.pow(200) : new BigInteger("-123456789012345678901234567890").multiply(BigInteger.valueOf(j));
                case "local-date-time": return LocalDateTime.of(1900 + j, 1, 1, 0, 0, 0, j % 2 == 0 ? 0 : 1000 * j);
                case "int-value": return new IntValue(-j);
                case "string-value": return new StringValue("sv" + j);
                case "sub-registered": return base(j, true);
                case "sub-unregistered": return base(j, false);
                default: throw new IllegalArgumentException(name);
            }
        }

        @Override
        public void processElement(Tuple3<Integer, Integer, Long> r, Context ctx, Collector<String> out) throws Exception {
            String k = ctx.getCurrentKey();
            for (Map.Entry<String, ValueState<Object>> e : states.entrySet()) {
                if (verify) {
                    Object v = e.getValue().value();
                    if (v != null) emit("types-keyed", e.getKey(), "value", k, null, v);
                } else {
                    e.getValue().update(value(e.getKey(), r.f0, r.f1));
                }
            }
            PROCESSED.incrementAndGet();
        }
    }

    /** Kryo as whole states (GenericTypeInfo). */
    public static class KryoKeyed extends KeyedProcessFunction<String, Tuple3<Integer, Integer, Long>, String> {
        final boolean verify;
        final Map<String, ValueState<Object>> states = new LinkedHashMap<>();

        KryoKeyed(boolean verify) {
            this.verify = verify;
        }

        @SuppressWarnings({"unchecked", "rawtypes"})
        private void add(String name, Class<?> c) {
            states.put(name, getRuntimeContext().getState(new ValueStateDescriptor(name, new GenericTypeInfo(c))));
        }

        @Override
        public void open(OpenContext ctx) {
            states.clear();
            add("uuid", UUID.class);
            add("array-list", ArrayList.class);
            add("hash-map", HashMap.class);
            add("tree-map", TreeMap.class);
            add("hash-set", HashSet.class);
            add("linked-list", LinkedList.class);
            add("zoned-date-time", ZonedDateTime.class);
            add("duration", Duration.class);
            add("currency", Currency.class);
            add("enum-set", EnumSet.class);
        }

        static Object value(String name, int j, int i) {
            switch (name) {
                case "uuid": return new UUID(j * 0x0123456789abcdefL, -j);
                case "array-list": return j == 1 ? new ArrayList<>() : new ArrayList<>(Arrays.asList("a" + j, (long) j, j == 3 ? null : "z"));
                case "hash-map": {
                    HashMap<String, Object> m = new HashMap<>();
                    if (j != 1) {
                        m.put("k", (long) j);
                        m.put("s", "v" + j);
                    }
                    return m;
                }
                case "tree-map": {
                    TreeMap<String, Long> m = new TreeMap<>();
                    for (int x = 0; x < j % 4; x++) m.put("e" + x, (long) x * j);
                    return m;
                }
                case "hash-set": return j == 1 ? new HashSet<>() : new HashSet<>(Arrays.asList("h" + j, "x"));
                case "linked-list": return new LinkedList<>(Arrays.asList(j, -j, Integer.MIN_VALUE));
                case "zoned-date-time": return ZonedDateTime.of(2024, 3, 31, 2, 30, 0, j, ZoneId.of(j % 2 == 0 ? "Europe/Berlin" : "America/New_York"));
                case "duration": return Duration.ofSeconds(-j, 5);
                case "currency": return Currency.getInstance(j % 2 == 0 ? "EUR" : "JPY");
                case "enum-set": return j % 4 == 0 ? EnumSet.noneOf(Status.class) : EnumSet.of(Status.values()[j % 3], Status.CLOSED);
                default: throw new IllegalArgumentException(name);
            }
        }

        @Override
        public void processElement(Tuple3<Integer, Integer, Long> r, Context ctx, Collector<String> out) throws Exception {
            String k = ctx.getCurrentKey();
            for (Map.Entry<String, ValueState<Object>> e : states.entrySet()) {
                if (verify) {
                    Object v = e.getValue().value();
                    if (v != null) emit("kryo-keyed", e.getKey(), "value", k, null, v);
                } else {
                    e.getValue().update(value(e.getKey(), r.f0, r.f1));
                }
            }
            PROCESSED.incrementAndGet();
        }
    }

    /** A class only Kryo's FieldSerializer knows: statectl must report it undecodable, by name. */
    public static class KryoOpaque extends KeyedProcessFunction<String, Tuple3<Integer, Integer, Long>, String> {
        final boolean verify;
        transient ValueState<Opaque> opaque;

        KryoOpaque(boolean verify) {
            this.verify = verify;
        }

        @Override
        public void open(OpenContext ctx) {
            opaque = getRuntimeContext().getState(new ValueStateDescriptor<>("opaque", new GenericTypeInfo<>(Opaque.class)));
        }

        @Override
        public void processElement(Tuple3<Integer, Integer, Long> r, Context ctx, Collector<String> out) throws Exception {
            if (verify) {
                if (opaque.value() != null) emitUndecodable("kryo-opaque", "opaque", ctx.getCurrentKey(), opaque.value());
            } else {
                opaque.update(new Opaque("s" + r.f0, r.f1));
            }
            PROCESSED.incrementAndGet();
        }
    }

    /** A Tuple2 key. */
    public static class TupleKeyed extends KeyedProcessFunction<Tuple2<String, Integer>, Tuple3<Integer, Integer, Long>, String> {
        final boolean verify;
        transient ValueState<Long> count;

        TupleKeyed(boolean verify) {
            this.verify = verify;
        }

        @Override
        public void open(OpenContext ctx) {
            count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.LONG));
        }

        @Override
        public void processElement(Tuple3<Integer, Integer, Long> r, Context ctx, Collector<String> out) throws Exception {
            Long c = count.value();
            if (verify) {
                if (c != null) emit("tuple-keyed", "count", "value", ctx.getCurrentKey(), null, c);
            } else {
                count.update((c == null ? 0L : c) + r.f0 - 5);
            }
            PROCESSED.incrementAndGet();
        }
    }

    /** A POJO key. */
    public static class PojoKey extends KeyedProcessFunction<KeyPojo, Tuple3<Integer, Integer, Long>, String> {
        final boolean verify;
        transient ValueState<String> label;

        PojoKey(boolean verify) {
            this.verify = verify;
        }

        @Override
        public void open(OpenContext ctx) {
            label = getRuntimeContext().getState(new ValueStateDescriptor<>("label", Types.STRING));
        }

        @Override
        public void processElement(Tuple3<Integer, Integer, Long> r, Context ctx, Collector<String> out) throws Exception {
            if (verify) {
                if (label.value() != null) emit("pojo-key", "label", "value", ctx.getCurrentKey(), null, label.value());
            } else {
                label.update("label-" + r.f0 + "-" + r.f1);
            }
            PROCESSED.incrementAndGet();
        }
    }

    /** Counts a window's records; the window state holds the count. */
    public static class CountAgg implements AggregateFunction<Tuple3<Integer, Integer, Long>, Long, Long> {
        @Override
        public Long createAccumulator() {
            return 0L;
        }

        @Override
        public Long add(Tuple3<Integer, Integer, Long> r, Long acc) {
            PROCESSED.incrementAndGet();
            return acc + 1;
        }

        @Override
        public Long getResult(Long acc) {
            return acc;
        }

        @Override
        public Long merge(Long a, Long b) {
            return a + b;
        }
    }

    /** Prints a fired window: its contents (the accumulator) and its timer. */
    public static class EmitWindow extends ProcessWindowFunction<Long, String, String, TimeWindow> {
        @Override
        public void process(String key, Context ctx, Iterable<Long> counts, Collector<String> out) {
            Tuple2<Long, Long> ns = Tuple2.of(ctx.window().getStart(), ctx.window().getEnd());
            for (Long n : counts) emit("window-agg", "window-contents", "window", key, ns, n);
            emit("window-agg", "_timer_state/event_window-timers", "timer", key, ns, ctx.window().maxTimestamp());
        }
    }

    /** Operator list state (split-distribute): the records each subtask saw. */
    public static class OpState extends RichFlatMapFunction<Tuple3<Integer, Integer, Long>, String> implements CheckpointedFunction {
        final boolean verify;
        transient ListState<String> seen;
        transient List<String> local;

        OpState(boolean verify) {
            this.verify = verify;
        }

        @Override
        public void flatMap(Tuple3<Integer, Integer, Long> r, Collector<String> out) {
            if (!verify) local.add("seen-" + r.f0 + "-" + r.f1);
            PROCESSED.incrementAndGet();
        }

        @Override
        public void snapshotState(FunctionSnapshotContext context) throws Exception {
            seen.update(local);
        }

        @Override
        public void initializeState(FunctionInitializationContext context) throws Exception {
            seen = context.getOperatorStateStore().getListState(new ListStateDescriptor<>("op-list", Types.STRING));
            local = new ArrayList<>();
            for (String s : seen.get()) local.add(s);
            if (verify && context.isRestored()) OP_LIST.addAll(local);
        }
    }

    static final MapStateDescriptor<String, Long> RULES = new MapStateDescriptor<>("rules", Types.STRING, Types.LONG);

    /** Broadcast state. */
    public static class Bcast extends BroadcastProcessFunction<Tuple3<Integer, Integer, Long>, Tuple3<Integer, Integer, Long>, String> {
        final boolean verify;

        Bcast(boolean verify) {
            this.verify = verify;
        }

        @Override
        public void processElement(Tuple3<Integer, Integer, Long> r, ReadOnlyContext ctx, Collector<String> out) throws Exception {
            if (verify && BROADCAST_DUMPED.compareAndSet(false, true)) {
                ReadOnlyBroadcastState<String, Long> s = ctx.getBroadcastState(RULES);
                Map<String, Long> m = new LinkedHashMap<>();
                for (Map.Entry<String, Long> e : s.immutableEntries()) m.put(e.getKey(), e.getValue());
                LINES.add("{\"op\":\"broadcast-fn\",\"state\":\"rules\",\"kind\":\"broadcast\",\"key\":null,\"value\":" + mapJson(m) + "}");
            }
            PROCESSED.incrementAndGet();
        }

        @Override
        public void processBroadcastElement(Tuple3<Integer, Integer, Long> r, Context ctx, Collector<String> out) throws Exception {
            if (!verify) {
                BroadcastState<String, Long> s = ctx.getBroadcastState(RULES);
                s.put("rule-" + r.f0, (long) r.f0 * r.f0 - 5 + r.f1);
            }
        }
    }

    /** Verify mode: sets WATERMARK_DONE once the final watermark went through every operator
     *  (the union of their outputs), i.e. after every timer and window of theirs has fired. */
    public static class WatermarkDone extends KeyedProcessFunction<Integer, String, String> {
        @Override
        public void processElement(String s, Context ctx, Collector<String> out) {
            ctx.timerService().registerEventTimeTimer(Long.MAX_VALUE);
        }

        @Override
        public void onTimer(long timestamp, OnTimerContext ctx, Collector<String> out) {
            WATERMARK_DONE = true;
        }
    }

    static volatile boolean WATERMARK_DONE = false;

    /** Records each keyed operator counts once per record (generate; verify: without window-agg). */
    static final int COUNTING_OPERATORS = 8;

    // ------------------------------------------------------------------ the job

    static MiniCluster cluster;
    static int restPort;

    static Configuration config(String base, String backend, boolean incremental, String restore, boolean checkpoints) {
        Configuration conf = new Configuration();
        conf.setString("state.backend.type", backend);
        conf.setString("state.backend", backend);
        for (String k : new String[] {"execution.checkpointing.incremental", "state.backend.incremental"})
            conf.setString(k, String.valueOf(incremental));
        for (String k : new String[] {"execution.checkpointing.dir", "state.checkpoints.dir"})
            conf.setString(k, "file://" + base + "/checkpoints");
        for (String k : new String[] {"execution.checkpointing.savepoint-dir", "state.savepoints.dir"})
            conf.setString(k, "file://" + base + "/savepoints");
        if (checkpoints) conf.setString("execution.checkpointing.interval", "1s");
        conf.setString("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION");
        for (String k : new String[] {"execution.checkpointing.num-retained", "state.checkpoints.num-retained"})
            conf.setString(k, "1");
        conf.setString("pipeline.max-parallelism", String.valueOf(MAX_PARALLELISM));
        conf.setString("parallelism.default", String.valueOf(PARALLELISM));
        conf.setString("restart-strategy.type", "none");
        conf.setString("restart-strategy", "none");
        conf.setString("pipeline.auto-watermark-interval", "100ms");
        conf.set(PipelineOptions.SERIALIZATION_CONFIG, List.of(SubReg.class.getName() + ": {type: pojo}"));
        if (restore != null) {
            for (String k : new String[] {"execution.state-recovery.path", "execution.savepoint.path"})
                conf.setString(k, restore);
        }
        conf.setString("execution.target", "remote");
        conf.setString("rest.address", "localhost");
        conf.setString("rest.port", String.valueOf(restPort));
        return conf;
    }

    static JobClient submit(String base, String backend, boolean incremental, String restore, boolean verify) throws Exception {
        StreamExecutionEnvironment env = new StreamExecutionEnvironment(config(base, backend, incremental, restore, !verify));
        env.setParallelism(PARALLELISM);
        env.setMaxParallelism(MAX_PARALLELISM);
        FileSource<String> src = FileSource.forRecordStreamFormat(new TextLineInputFormat("UTF-8"), new Path(base + "/input"))
                .monitorContinuously(Duration.ofMillis(200)).build();
        DataStream<Tuple3<Integer, Integer, Long>> recs = env
                .fromSource(src, WatermarkStrategy.noWatermarks(), "file-source").uid("file-source").setParallelism(1)
                .flatMap(new Parse()).uid("parse").name("parse")
                .assignTimestampsAndWatermarks(WatermarkStrategy.<Tuple3<Integer, Integer, Long>>forGenerator(c -> new SignalWatermarks())
                        .withTimestampAssigner((r, t) -> r.f2)).uid("assign-ts").name("assign-ts");
        KeySelector<Tuple3<Integer, Integer, Long>, String> byUser = r -> user(r.f0);
        List<DataStream<String>> outs = new ArrayList<>();
        outs.add(recs.keyBy(byUser, Types.STRING).process(new PojoKeyed(verify)).uid("pojo-keyed").name("pojo-keyed"));
        outs.add(recs.keyBy(byUser, Types.STRING).process(new TypesKeyed(verify)).uid("types-keyed").name("types-keyed"));
        outs.add(recs.keyBy(byUser, Types.STRING).process(new KryoKeyed(verify)).uid("kryo-keyed").name("kryo-keyed"));
        outs.add(recs.keyBy(byUser, Types.STRING).process(new KryoOpaque(verify)).uid("kryo-opaque").name("kryo-opaque"));
        outs.add(recs.keyBy((KeySelector<Tuple3<Integer, Integer, Long>, Tuple2<String, Integer>>) r -> Tuple2.of(user(r.f0), r.f0 % 3 - 1),
                        Types.TUPLE(Types.STRING, Types.INT))
                .process(new TupleKeyed(verify)).uid("tuple-keyed").name("tuple-keyed"));
        outs.add(recs.keyBy((KeySelector<Tuple3<Integer, Integer, Long>, KeyPojo>) r -> new KeyPojo(user(r.f0), -r.f0),
                        TypeInformation.of(KeyPojo.class))
                .process(new PojoKey(verify)).uid("pojo-key").name("pojo-key"));
        outs.add(recs.filter(r -> r.f1 >= 0).uid("window-filter").name("window-filter")
                .keyBy(byUser, Types.STRING)
                .window(TumblingEventTimeWindows.of(Duration.ofHours(1)))
                .aggregate(new CountAgg(), new EmitWindow(), Types.LONG, Types.LONG, Types.STRING).uid("window-agg").name("window-agg"));
        outs.add(recs.rebalance().flatMap(new OpState(verify)).uid("op-state").name("op-state"));
        outs.add(recs.connect(recs.broadcast(RULES)).process(new Bcast(verify)).uid("broadcast-fn").name("broadcast-fn"));
        DataStream<String> all = outs.get(0);
        for (DataStream<String> o : outs.subList(1, outs.size())) all = all.union(o);
        all.keyBy(x -> 0, Types.INT).process(new WatermarkDone()).uid("watermark-done").name("watermark-done")
                .print().uid("print-sink").name("print-sink");
        return env.executeAsync((verify ? "coverage-verify-" : "coverage-generate-") + new File(base).getName());
    }

    /** Waits until done, failing at the timeout or as soon as one of the jobs given has ended
     * (also the SQL coverage job's: SqlCoverageJob). */
    static void waitFor(String what, java.util.function.BooleanSupplier done, long timeoutMs, JobClient... jobs) throws Exception {
        long deadline = System.currentTimeMillis() + timeoutMs;
        for (int n = 0; !done.getAsBoolean(); n++) {
            if (System.currentTimeMillis() > deadline) throw new IllegalStateException("timed out waiting for " + what);
            if (n % 10 == 9) {
                for (JobClient job : jobs) {
                    JobStatus st = job.getJobStatus().get();
                    if (!st.isGloballyTerminalState()) continue;
                    String why = "";
                    try {
                        job.getJobExecutionResult().get();
                    } catch (Exception e) {
                        Throwable c = e;
                        while (c.getCause() != null) c = c.getCause();
                        why = ": " + c;
                    }
                    throw new IllegalStateException("the job ended (" + st + ") while waiting for " + what + why);
                }
            }
            Thread.sleep(50);
        }
    }

    static void cancel(JobClient client) throws Exception {
        client.cancel().get();
        waitFor("the job to end", () -> {
            try {
                return client.getJobStatus().get().isGloballyTerminalState();
            } catch (Exception e) {
                return true;
            }
        }, 60_000);
    }

    /** The highest checkpoint id under base/checkpoints/<job id>/ (completed: with _metadata). */
    static long lastCheckpoint(String base, boolean completed) {
        long max = 0;
        File[] jobs = new File(base, "checkpoints").listFiles();
        if (jobs == null) return 0;
        for (File job : jobs) {
            File[] chks = job.listFiles();
            if (chks == null) continue;
            for (File chk : chks) {
                if (!chk.getName().startsWith("chk-")) continue;
                if (completed && !new File(chk, "_metadata").isFile()) continue;
                max = Math.max(max, Long.parseLong(chk.getName().substring(4)));
            }
        }
        return max;
    }

    static File checkpointDir(String base, long id) {
        for (File job : Objects.requireNonNull(new File(base, "checkpoints").listFiles())) {
            File chk = new File(job, "chk-" + id);
            if (new File(chk, "_metadata").isFile()) return chk;
        }
        throw new IllegalStateException("no chk-" + id + " under " + base);
    }

    static void writeInput(String base, boolean verify) throws Exception {
        File dir = new File(base, "input");
        dir.mkdirs();
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < (verify ? 1 : 2); i++)
            for (int j = 0; j < NKEYS; j++) b.append(j).append(',').append(verify ? -1 : i).append('\n');
        File tmp = new File(dir, ".part-0.tmp");
        Files.writeString(tmp.toPath(), b.toString(), StandardCharsets.UTF_8);
        Files.move(tmp.toPath(), new File(dir, "part-0.txt").toPath());
    }

    /** Runs the job on a fresh input until every record went through every operator, then snapshots. */
    static Map<String, String> generate(String out, String backend, boolean incremental, Map<String, Long> timings) throws Exception {
        long t0 = System.currentTimeMillis();
        String base = out + "/gen-" + backend;
        writeInput(base, false);
        PROCESSED.set(0);
        JobClient client = submit(base, backend, incremental, null, false);
        int expected = 2 * NKEYS * (COUNTING_OPERATORS + 1);
        waitFor("generation (" + backend + ")", () -> PROCESSED.get() >= expected, 90_000, client);
        long triggered = lastCheckpoint(base, false);
        Map<String, String> snaps = new LinkedHashMap<>();
        String kind = backend.equals("hashmap") ? "heap" : "rocksdb";
        snaps.put(kind + "-savepoint-canonical", client.triggerSavepoint("file://" + base + "/savepoints/canonical",
                SavepointFormatType.CANONICAL).get());
        if (!backend.equals("hashmap")) {
            snaps.put(kind + "-savepoint-native", client.triggerSavepoint("file://" + base + "/savepoints/native",
                    SavepointFormatType.NATIVE).get());
        }
        waitFor("a checkpoint (" + backend + ")", () -> lastCheckpoint(base, true) > triggered, 30_000, client);
        cancel(client);
        snaps.put(kind + "-checkpoint" + (incremental ? "-incremental" : ""),
                checkpointDir(base, lastCheckpoint(base, true)).getAbsolutePath());
        timings.put("generate-" + backend + "-ms", System.currentTimeMillis() - t0);
        return snaps;
    }

    /** Restores a snapshot in verify mode and writes Flink's reading of every key's state. */
    static void verify(String out, String kind, String snapshot, String backend, Map<String, Long> timings) throws Exception {
        long t0 = System.currentTimeMillis();
        String base = out + "/verify-" + kind;
        writeInput(base, true);
        LINES.clear();
        OP_LIST.clear();
        BROADCAST_DUMPED.set(false);
        PROCESSED.set(0);
        FIRE = false;
        WATERMARK_DONE = false;
        String restore = snapshot.startsWith("file:") ? snapshot : "file://" + snapshot;
        JobClient client = submit(base, backend, false, restore, true);
        int expected = NKEYS * COUNTING_OPERATORS;
        waitFor("verification of " + kind, () -> PROCESSED.get() >= expected, 90_000, client);
        FIRE = true;
        // timers and windows fire on the final watermark, before it goes on downstream
        waitFor("the final watermark (" + kind + ")", () -> WATERMARK_DONE, 60_000, client);
        cancel(client);
        List<String> lines = new ArrayList<>(LINES);
        List<String> ops = new ArrayList<>(OP_LIST);
        java.util.Collections.sort(ops);
        if (!ops.isEmpty()) lines.add("{\"op\":\"op-state\",\"state\":\"op-list\",\"kind\":\"operator-list\",\"key\":null,\"value\":" + json(ops) + "}");
        java.util.Collections.sort(lines);
        new File(out, "reference").mkdirs();
        Files.writeString(new File(out, "reference/" + kind + ".jsonl").toPath(), String.join("\n", lines) + "\n", StandardCharsets.UTF_8);
        timings.put("verify-" + kind + "-ms", System.currentTimeMillis() - t0);
    }

    public static void main(String[] args) {
        try {
            run(args);
        } catch (Throwable e) {
            e.printStackTrace();
            System.out.println("FAILED " + e);
            System.exit(1);
        }
        System.exit(0);
    }

    static void run(String[] args) throws Exception {
        String out = new File(args[0]).getAbsolutePath();
        long t0 = System.currentTimeMillis();
        startCluster(out);
        Map<String, Long> timings = new LinkedHashMap<>();
        if (args.length > 1 && args[1].equals("--verify")) {
            // verify only: restore each KIND=PATH (e.g. a savepoint statectl wrote) and write
            // OUT/reference/KIND.jsonl, as for the generated snapshots
            for (int i = 2; i < args.length; i++) {
                String[] kv = args[i].split("=", 2);
                verify(out, kv[0], kv[1], "hashmap", timings);
            }
            cluster.close();
            System.out.println("DONE");
            return;
        }
        Map<String, String> snaps = new LinkedHashMap<>();
        snaps.putAll(generate(out, "hashmap", false, timings));
        snaps.putAll(generate(out, "rocksdb", true, timings));
        for (Map.Entry<String, String> s : snaps.entrySet()) {
            verify(out, s.getKey(), s.getValue().replaceFirst("^file:", ""), s.getKey().startsWith("heap") ? "hashmap" : "rocksdb", timings);
        }
        timings.put("total-ms", System.currentTimeMillis() - t0);
        StringBuilder b = new StringBuilder("{\"snapshots\":{");
        List<String> parts = new ArrayList<>();
        for (Map.Entry<String, String> s : snaps.entrySet())
            parts.add(js(s.getKey()) + ":" + js(s.getValue().replaceFirst("^file:(//)?", "")));
        b.append(String.join(",", parts)).append("},\"timings\":{");
        parts.clear();
        for (Map.Entry<String, Long> t : timings.entrySet()) parts.add(js(t.getKey()) + ":" + t.getValue());
        b.append(String.join(",", parts)).append("},\"keys\":").append(NKEYS).append("}\n");
        Files.writeString(new File(out, "result.json").toPath(), b.toString(), StandardCharsets.UTF_8);
        cluster.close();
        System.out.println("DONE");
    }

    /** The one MiniCluster of the run (REST on a free port). */
    static void startCluster(String out) throws Exception {
        Configuration cc = new Configuration();
        cc.setString("rest.bind-port", "0");
        cc.setString("rest.address", "localhost");
        cc.setString("taskmanager.memory.managed.size", "256m");
        cc.setString("io.tmp.dirs", out + "/tmp");
        new File(out, "tmp").mkdirs();
        cluster = new MiniCluster(new MiniClusterConfiguration.Builder().setConfiguration(cc)
                .setNumTaskManagers(1).setNumSlotsPerTaskManager(PARALLELISM).build());
        cluster.start();
        restPort = cluster.getRestAddress().get().getPort();
    }
}
