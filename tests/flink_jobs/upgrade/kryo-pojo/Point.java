package upgrade.job;

/** The same class as a POJO (public fields, a default constructor). */
public class Point {
    public int x;
    public int y;

    public Point() {}

    public static Point at(int x, int y) {
        Point p = new Point();
        p.x = x;
        p.y = y;
        return p;
    }
}
