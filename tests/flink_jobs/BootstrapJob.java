import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.connector.file.src.FileSource;
import org.apache.flink.connector.file.src.reader.TextLineInputFormat;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.fs.Path;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ReducingState;
import org.apache.flink.api.common.state.ReducingStateDescriptor;
import org.apache.flink.api.common.state.State;
import org.apache.flink.api.common.state.StateDescriptor;
import org.apache.flink.api.common.state.StateTtlConfig;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.Collector;

/**
 * The Flink job that restores a savepoint statectl converted from a {@code statectl build}
 * checkpoint (statectl's tests: tests/test_flink_restore.py), and prints every key's state.
 *
 * <p>It declares the states {@code build} keeps, by name, kind and type, from a spec: comma
 * separated {@code name:kind:type[:type]} with kind value | reducing | list | map and types
 * long | string (e.g. {@code count:reducing:long,list_page:list:string,map_channel:map:string:long}),
 * each with TTL when {@code ttlMillis > 0} (OnCreateAndWrite, NeverReturnExpired, as statectl's
 * default). Keys are Strings. For every input line (a key) it prints
 * {@code BOOT {"key":..., "state": {name: value, ...}}}: a value or reduced value as a number or
 * string (null when absent), a list as a JSON array, a map as a JSON object with sorted keys.
 */
public class BootstrapJob {

    /** BootstrapJob: a savepoint statectl converted from a `statectl build` checkpoint. The
     *  keyed operator has the build's uid; the spec names its states (BootstrapJob's doc). */
    public static JobClient submit(Map<String, String> c) throws Exception {
        String base = c.get("base");
        StreamExecutionEnvironment env = RestoreDriver.environment(c);
        env.setParallelism(Integer.parseInt(c.get("parallelism")));
        env.setMaxParallelism(Integer.parseInt(c.get("max_parallelism")));
        FileSource<String> src = FileSource.forRecordStreamFormat(new TextLineInputFormat("UTF-8"), new Path(base + "/input"))
                .monitorContinuously(Duration.ofMillis(500)).build();
        String uid = c.getOrDefault("uid", "build");
        env.fromSource(src, WatermarkStrategy.noWatermarks(), "keys").uid("bootstrap-keys")
                .keyBy((KeySelector<String, String>) k -> k, Types.STRING)
                .process(new PrintState(c.get("states"), Long.parseLong(c.getOrDefault("ttl_ms", "0"))))
                .uid(uid).name(uid)
                .print().uid("bootstrap-print");
        return env.executeAsync("restore-bootstrap-" + c.get("id"));
    }


    /** One state of the spec. */
    static final class Spec implements java.io.Serializable {
        final String name, kind, type, valueType;

        Spec(String text) {
            String[] p = text.split(":");
            name = p[0];
            kind = p[1];
            type = p[2];
            valueType = p.length > 3 ? p[3] : null;
        }
    }

    static List<Spec> parse(String spec) {
        List<Spec> out = new ArrayList<>();
        for (String s : spec.split(",")) {
            if (!s.isEmpty()) {
                out.add(new Spec(s));
            }
        }
        return out;
    }

    @SuppressWarnings("unchecked")
    static <T> TypeInformation<T> type(String name) {
        switch (name) {
            case "long": return (TypeInformation<T>) Types.LONG;
            case "string": return (TypeInformation<T>) Types.STRING;
            default: throw new IllegalArgumentException("unknown type " + name);
        }
    }

    /** Prints the restored state of each key it sees. */
    public static final class PrintState extends KeyedProcessFunction<String, String, String> {
        private final List<Spec> specs;
        private final long ttlMillis;
        private transient List<State> states;

        public PrintState(String spec, long ttlMillis) {
            this.specs = parse(spec);
            this.ttlMillis = ttlMillis;
        }

        private <D extends StateDescriptor<?, ?>> D ttl(D d) {
            if (ttlMillis > 0) {
                d.enableTimeToLive(StateTtlConfig.newBuilder(Duration.ofMillis(ttlMillis))
                        .setUpdateType(StateTtlConfig.UpdateType.OnCreateAndWrite)
                        .setStateVisibility(StateTtlConfig.StateVisibility.NeverReturnExpired)
                        .build());
            }
            return d;
        }

        @Override
        public void open(OpenContext context) {
            states = new ArrayList<>();
            for (Spec s : specs) {
                switch (s.kind) {
                    case "value":
                        states.add(getRuntimeContext().getState(ttl(new ValueStateDescriptor<>(s.name, type(s.type)))));
                        break;
                    case "reducing":
                        ReducingStateDescriptor<Long> r = new ReducingStateDescriptor<>(s.name, Long::sum, Types.LONG);
                        states.add(getRuntimeContext().getReducingState(ttl(r)));
                        break;
                    case "list":
                        states.add(getRuntimeContext().getListState(ttl(new ListStateDescriptor<>(s.name, type(s.type)))));
                        break;
                    case "map":
                        states.add(getRuntimeContext().getMapState(ttl(
                                new MapStateDescriptor<>(s.name, type(s.type), type(s.valueType)))));
                        break;
                    default:
                        throw new IllegalArgumentException("unknown kind " + s.kind);
                }
            }
        }

        @Override
        @SuppressWarnings("unchecked")
        public void processElement(String key, Context ctx, Collector<String> out) throws Exception {
            StringBuilder b = new StringBuilder("BOOT {\"key\":").append(json(ctx.getCurrentKey())).append(",\"state\":{");
            for (int i = 0; i < specs.size(); i++) {
                Spec s = specs.get(i);
                if (i > 0) {
                    b.append(',');
                }
                b.append(json(s.name)).append(':');
                State st = states.get(i);
                switch (s.kind) {
                    case "value": b.append(json(((ValueState<Object>) st).value())); break;
                    case "reducing": b.append(json(((ReducingState<Long>) st).get())); break;
                    case "list": {
                        Iterable<Object> items = ((ListState<Object>) st).get();
                        List<String> parts = new ArrayList<>();
                        if (items != null) {
                            for (Object o : items) {
                                parts.add(json(o));
                            }
                        }
                        b.append('[').append(String.join(",", parts)).append(']');
                        break;
                    }
                    default: {
                        Map<String, String> sorted = new TreeMap<>();
                        for (Map.Entry<Object, Object> e : ((MapState<Object, Object>) st).entries()) {
                            sorted.put(String.valueOf(e.getKey()), json(e.getValue()));
                        }
                        List<String> parts = new ArrayList<>();
                        for (Map.Entry<String, String> e : sorted.entrySet()) {
                            parts.add(json(e.getKey()) + ":" + e.getValue());
                        }
                        b.append('{').append(String.join(",", parts)).append('}');
                    }
                }
            }
            out.collect(b.append("}}").toString());
        }
    }

    static String json(Object value) {
        if (value == null) {
            return "null";
        }
        if (value instanceof Number || value instanceof Boolean) {
            return value.toString();
        }
        StringBuilder b = new StringBuilder("\"");
        for (char c : value.toString().toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }
}
