package upgrade.job;

import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The POJO kept in ValueState<Item> "pojo", for the cross-release case: java.time fields (Flink
 * 1.20 serializes ZonedDateTime and Duration with Kryo; Instant and LocalDate with its own
 * serializers), a List and a Map field (Kryo generic types on Flink 1.x).
 */
public class Item {
    public long id;
    public String name;
    public int qty;
    public Instant at;
    public LocalDate day;
    public ZonedDateTime when;
    public Duration took;
    public List<String> tags;
    public Map<String, Long> counts;

    public Item() {}

    public static Item of(long key, long value, Item previous) {
        Item i = new Item();
        i.id = key;
        i.name = "item-" + key;
        i.qty = (previous == null ? 0 : previous.qty) + (int) value + 1;
        i.at = Instant.ofEpochMilli(1_700_000_000_000L + key * 1000 + value);
        i.day = LocalDate.of(2024, 1, 1 + (int) key);
        i.when = ZonedDateTime.of(2024, 2, 3, 4, 5, 6, 0, ZoneOffset.UTC).plusMinutes(key);
        i.took = Duration.ofSeconds(key * 60 + value);
        i.tags = new ArrayList<>(previous == null || previous.tags == null ? List.of() : previous.tags);
        i.tags.add("v" + value);
        i.counts = new HashMap<>(previous == null || previous.counts == null ? Map.of() : previous.counts);
        i.counts.merge("n", 1L, Long::sum);
        return i;
    }
}
