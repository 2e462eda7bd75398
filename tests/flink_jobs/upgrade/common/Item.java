package upgrade.job;

/** The POJO kept in ValueState<Item> "pojo". */
public class Item {
    public long id;
    public String name;
    public int qty;

    public Item() {}

    public static Item of(long key, long value, Item previous) {
        Item i = new Item();
        i.id = key;
        i.name = "item-" + key;
        i.qty = (previous == null ? 0 : previous.qty) + (int) value + 1;
        return i;
    }
}
