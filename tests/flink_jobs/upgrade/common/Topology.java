package upgrade.job;

import java.time.Duration;
import java.util.Map;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.connector.file.src.FileSource;
import org.apache.flink.connector.file.src.reader.TextLineInputFormat;
import org.apache.flink.core.fs.Path;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * The upgrade job's graph, one version of it: a file source of "KEY,VALUE" lines, the keyed
 * operator {@code stateful} (its states: {@link Stateful}) and the keyed operator {@code second}
 * (a running sum). What varies between the versions of a case is either a class of this package
 * (an overlay directory replaces its file) or one of the settings the driver passes:
 * <ul>
 *   <li>{@code maxp} the max parallelism, set explicitly (128);</li>
 *   <li>{@code key} the key of {@code stateful}: {@code long}, {@code string} ("k" + key),
 *       {@code tuple} (a Tuple2 of both) or {@code pojo} ({@link KeyPojo} of both);</li>
 *   <li>{@code uid} the uid of {@code stateful}; {@code second} whether {@code second} is in the
 *       graph, {@code third} whether an operator {@code third} (a second running sum) is;</li>
 *   <li>{@code count}, {@code color}, {@code added}: the states {@link Stateful} registers.</li>
 * </ul>
 * Returns the number of stateful operators (each calls {@code Probe.processed} once a record).
 */
public final class Topology {
    private Topology() {}

    public static int build(StreamExecutionEnvironment env, Map<String, String> s, String input) {
        int maxp = Integer.parseInt(s.getOrDefault("maxp", "128"));
        env.setParallelism(1);
        env.setMaxParallelism(maxp);
        FileSource<String> src = FileSource.forRecordStreamFormat(new TextLineInputFormat("UTF-8"), new Path(input))
                .monitorContinuously(Duration.ofMillis(100)).build();
        DataStream<Tuple2<Long, Long>> recs = env.fromSource(src, WatermarkStrategy.noWatermarks(), "source")
                .uid("source").name("source")
                .map(new Parse()).uid("parse").name("parse");
        String uid = s.getOrDefault("uid", "stateful");
        String key = s.getOrDefault("key", "long");
        switch (key) {
            case "long":
                recs.keyBy(r -> r.f0, Types.LONG).process(new Stateful<Long>(s), Types.STRING).uid(uid).name(uid);
                break;
            case "string":
                recs.keyBy(r -> "k" + r.f0, Types.STRING).process(new Stateful<String>(s), Types.STRING).uid(uid).name(uid);
                break;
            case "tuple":
                recs.keyBy(r -> Tuple2.of("k" + r.f0, r.f0), Types.TUPLE(Types.STRING, Types.LONG))
                        .process(new Stateful<Tuple2<String, Long>>(s), Types.STRING).uid(uid).name(uid);
                break;
            case "pojo":
                recs.keyBy(r -> new KeyPojo("k" + r.f0, r.f0), TypeInformation.of(KeyPojo.class))
                        .process(new Stateful<KeyPojo>(s), Types.STRING).uid(uid).name(uid);
                break;
            default:
                throw new IllegalArgumentException("key " + key);
        }
        int operators = 1;
        if (Boolean.parseBoolean(s.getOrDefault("second", "true"))) {
            recs.keyBy(r -> r.f0, Types.LONG).process(new Sum("second"), Types.STRING).uid("second").name("second");
            operators++;
        }
        if (Boolean.parseBoolean(s.getOrDefault("third", "false"))) {
            recs.keyBy(r -> r.f0, Types.LONG).process(new Sum("third"), Types.STRING).uid("third").name("third");
            operators++;
        }
        return operators;
    }

    /** "KEY,VALUE" -> (KEY, VALUE); "KEY,dump" -> (KEY, Probe.DUMP_MARKER), the dump's marker. */
    public static final class Parse implements MapFunction<String, Tuple2<Long, Long>> {
        @Override
        public Tuple2<Long, Long> map(String line) {
            String[] f = line.split(",");
            long key = Long.parseLong(f[0].trim());
            return Tuple2.of(key, f[1].trim().equals("dump") ? upgrade.driver.Probe.DUMP_MARKER : Long.parseLong(f[1].trim()));
        }
    }
}
