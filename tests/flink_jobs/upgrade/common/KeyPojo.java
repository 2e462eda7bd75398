package upgrade.job;

/** A POJO key. */
public class KeyPojo {
    public String name;
    public long id;

    public KeyPojo() {}

    public KeyPojo(String name, long id) {
        this.name = name;
        this.id = id;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof KeyPojo && ((KeyPojo) o).id == id && java.util.Objects.equals(((KeyPojo) o).name, name);
    }

    @Override
    public int hashCode() {
        return java.util.Objects.hash(name, id);
    }
}
