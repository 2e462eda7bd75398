import java.time.Duration;
import java.util.Map;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.connector.file.src.FileSource;
import org.apache.flink.connector.file.src.reader.TextLineInputFormat;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.fs.Path;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;

/**
 * TypesJob.main's topology for RestoreDriver (kind=types). A class of its own: TypesJob needs
 * Flink 1.19 or later (OpenContext, Duration windows), and RestoreDriver also runs on older
 * releases, where this class is not compiled and the kind is refused.
 */
public class TypesTopology {

    /** TypesJob.main's topology. */
    public static JobClient submit(Map<String, String> c) throws Exception {
        String base = c.get("base");
        int parallelism = Integer.parseInt(c.get("parallelism"));
        int maxPar = Integer.parseInt(c.get("max_parallelism"));
        final String prefix = c.getOrDefault("prefix", "k");
        final int nkeys = Integer.parseInt(c.getOrDefault("nkeys", "100"));
        TypesJob.FIRE = false;
        TypesJob.WINDOW_EXTRA_SEEN.set(0);
        StreamExecutionEnvironment env = RestoreDriver.environment(c);
        env.setParallelism(parallelism);
        env.setMaxParallelism(maxPar);

        FileSource<String> src = FileSource.forRecordStreamFormat(new TextLineInputFormat("UTF-8"), new Path(base + "/input"))
                .monitorContinuously(Duration.ofMillis(500)).build();
        DataStream<TypesJob.Event> events = env
                .fromSource(src, WatermarkStrategy.noWatermarks(), "file-source").uid("file-source")
                .map(new TypesJob.Parse(prefix.length())).uid("parse").name("parse");
        DataStream<String> o1 = events.keyBy((KeySelector<TypesJob.Event, String>) e -> e.user, Types.STRING)
                .process(new TypesJob.PojoKeyed(prefix.length(), TypesJob.probes(nkeys))).uid("pojo-keyed").name("pojo-keyed");
        DataStream<String> o2 = events
                .keyBy((KeySelector<TypesJob.Event, Tuple2<String, Integer>>) e -> Tuple2.of(e.user, (int) (e.amount % 3)),
                        Types.TUPLE(Types.STRING, Types.INT))
                .process(new TypesJob.TupleKeyed()).uid("tuple-keyed").name("tuple-keyed");
        WatermarkStrategy<TypesJob.Event> wms = WatermarkStrategy.<TypesJob.Event>forGenerator(x -> new TypesJob.SignalWatermarks())
                .withTimestampAssigner((e, t) -> e.ts.toEpochMilli());
        DataStream<String> o3 = events.assignTimestampsAndWatermarks(wms).uid("assign-ts").name("assign-ts")
                .keyBy((KeySelector<TypesJob.Event, String>) e -> e.user, Types.STRING)
                .window(TumblingEventTimeWindows.of(Duration.ofHours(1)))
                .aggregate(new TypesJob.CountAgg(), new TypesJob.EmitWindow()).uid("window-agg").name("window-agg");
        o1.union(o2, o3).print().uid("print-sink").name("print-sink");
        return env.executeAsync("restore-types-" + c.get("id"));
    }

    /** Fires every restored window once the window operator has seen {@code extra} records. */
    public static void fireWhenSeen(int extra) {
        if (!TypesJob.FIRE && TypesJob.WINDOW_EXTRA_SEEN.get() >= extra) TypesJob.FIRE = true;
    }
}
