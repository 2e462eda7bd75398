package upgrade.job;

/** An enum kept in ValueState<Color> "color". */
public enum Color {
    RED, GREEN, BLUE
}
