package upgrade.driver;

import java.util.concurrent.atomic.AtomicInteger;

/**
 * Shared between the driver and the jobs' classes: loaded by the application class loader (the
 * parent of every job's class loader), so the driver sees how many records the stateful
 * operators of the running job processed.
 */
public final class Probe {
    static final AtomicInteger PROCESSED = new AtomicInteger();

    private Probe() {}

    /** Called by a stateful operator once per record, after it updated its state. */
    public static void processed() {
        PROCESSED.incrementAndGet();
    }
}
