package upgrade.job;

import java.util.Map;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.Collector;
import upgrade.driver.Probe;

/** A keyed running sum of the values: ValueState<Long> "sum"; the marker record dumps it. */
public class Sum extends KeyedProcessFunction<Long, Tuple2<Long, Long>, String> {
    private final String uid;
    private transient ValueState<Long> sum;

    public Sum(String uid) {
        this.uid = uid;
    }

    @Override
    public void open(OpenContext ctx) {
        sum = getRuntimeContext().getState(new ValueStateDescriptor<>("sum", Types.LONG));
    }

    @Override
    public void processElement(Tuple2<Long, Long> r, Context ctx, Collector<String> out) throws Exception {
        if (r.f1 == Probe.DUMP_MARKER) {
            Probe.dump(uid, getRuntimeContext(), Map.of("sum", sum));
            return;
        }
        Long s = sum.value();
        sum.update((s == null ? 0L : s) + r.f1);
        Probe.processed();
    }
}
