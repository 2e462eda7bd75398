package upgrade.job;

import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.State;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.Collector;
import upgrade.driver.Probe;

/**
 * The keyed operator whose states change between versions. It registers, in open():
 * <ul>
 *   <li>ValueState<Item> "pojo" (always);</li>
 *   <li>"count" as the setting {@code count} says: {@code value-long} ValueState<Long> (default),
 *       {@code value-string} ValueState<String>, {@code list-long} ListState<Long>,
 *       {@code none} not registered;</li>
 *   <li>ValueState<Color> "color" unless {@code color=false};</li>
 *   <li>ValueState<Long> "added" if {@code added=true}.</li>
 * </ul>
 * The marker record ({@link Probe#DUMP_MARKER}) dumps them all (every key) instead.
 */
public class Stateful<K> extends KeyedProcessFunction<K, Tuple2<Long, Long>, String> {
    private final String uid;
    private final String count;
    private final boolean color;
    private final boolean added;
    private transient ValueState<Item> pojoState;
    private transient ValueState<Long> countLong;
    private transient ValueState<String> countString;
    private transient ListState<Long> countList;
    private transient ValueState<Color> colorState;
    private transient ValueState<Long> addedState;
    private transient Map<String, State> states;

    public Stateful(Map<String, String> s) {
        uid = s.getOrDefault("uid", "stateful");
        count = s.getOrDefault("count", "value-long");
        color = Boolean.parseBoolean(s.getOrDefault("color", "true"));
        added = Boolean.parseBoolean(s.getOrDefault("added", "false"));
    }

    @Override
    public void open(OpenContext ctx) {
        pojoState = getRuntimeContext().getState(new ValueStateDescriptor<>("pojo", TypeInformation.of(Item.class)));
        switch (count) {
            case "value-long":
                countLong = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.LONG));
                break;
            case "value-string":
                countString = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.STRING));
                break;
            case "list-long":
                countList = getRuntimeContext().getListState(new ListStateDescriptor<>("count", Types.LONG));
                break;
            case "none":
                break;
            default:
                throw new IllegalArgumentException("count " + count);
        }
        if (color) colorState = getRuntimeContext().getState(new ValueStateDescriptor<>("color", TypeInformation.of(Color.class)));
        if (added) addedState = getRuntimeContext().getState(new ValueStateDescriptor<>("added", Types.LONG));
        states = new LinkedHashMap<>();
        states.put("pojo", pojoState);
        for (State st : new State[] {countLong, countString, countList}) if (st != null) states.put("count", st);
        if (colorState != null) states.put("color", colorState);
        if (addedState != null) states.put("added", addedState);
    }

    @Override
    public void processElement(Tuple2<Long, Long> r, Context ctx, Collector<String> out) throws Exception {
        if (r.f1 == Probe.DUMP_MARKER) {
            Probe.dump(uid, getRuntimeContext(), states);
            return;
        }
        pojoState.update(Item.of(r.f0, r.f1, pojoState.value()));
        if (countLong != null) {
            Long c = countLong.value();
            countLong.update(c == null ? 1L : c + 1);
        }
        if (countString != null) {
            String c = countString.value();
            countString.update(c == null ? "1" : String.valueOf(Long.parseLong(c) + 1));
        }
        if (countList != null) countList.add(r.f1);
        if (colorState != null) {
            Color[] all = Color.values();
            colorState.update(all[(int) ((r.f0 + r.f1) % all.length)]);
        }
        if (addedState != null) addedState.update(r.f1 * 10);
        Probe.processed();
    }
}
