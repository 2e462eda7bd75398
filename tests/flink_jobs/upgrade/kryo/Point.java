package upgrade.job;

/** Not a POJO (final fields, no default constructor): Flink treats it as a generic type (Kryo). */
public final class Point {
    private final int x;
    private final int y;

    private Point(int x, int y) {
        this.x = x;
        this.y = y;
    }

    public static Point at(int x, int y) {
        return new Point(x, y);
    }

    public int x() {
        return x;
    }
}
