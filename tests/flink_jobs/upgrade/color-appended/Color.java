package upgrade.job;

/** An enum kept in ValueState<Color> "color": a constant appended. */
public enum Color {
    RED, GREEN, BLUE, YELLOW
}
