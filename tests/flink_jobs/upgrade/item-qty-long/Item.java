package upgrade.job;

/** The POJO kept in ValueState<Item> "pojo": qty is a long instead of an int. */
public class Item {
    public long id;
    public String name;
    public long qty;

    public Item() {}

    public static Item of(long key, long value, Item previous) {
        Item i = new Item();
        i.id = key;
        i.name = "item-" + key;
        i.qty = (previous == null ? 0 : previous.qty) + value + 1;
        return i;
    }
}
