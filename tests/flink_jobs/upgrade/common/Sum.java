package upgrade.job;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.Collector;
import upgrade.driver.Probe;

/** A keyed running sum of the values: ValueState<Long> "sum". */
public class Sum extends KeyedProcessFunction<Long, Tuple2<Long, Long>, String> {
    private transient ValueState<Long> sum;

    @Override
    public void open(OpenContext ctx) {
        sum = getRuntimeContext().getState(new ValueStateDescriptor<>("sum", Types.LONG));
    }

    @Override
    public void processElement(Tuple2<Long, Long> r, Context ctx, Collector<String> out) throws Exception {
        Long s = sum.value();
        sum.update((s == null ? 0L : s) + r.f1);
        Probe.processed();
    }
}
