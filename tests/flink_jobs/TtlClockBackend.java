import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.ReadableConfig;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.state.AsyncKeyedStateBackend;
import org.apache.flink.runtime.state.CheckpointableKeyedStateBackend;
import org.apache.flink.runtime.state.KeyedStateBackendParametersImpl;
import org.apache.flink.runtime.state.OperatorStateBackend;
import org.apache.flink.runtime.state.StateBackend;
import org.apache.flink.runtime.state.StateBackendFactory;
import org.apache.flink.runtime.state.StateBackendLoader;
import org.apache.flink.runtime.state.ttl.TtlTimeProvider;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Flink's own state backend (hashmap or rocksdb, unchanged) whose TTL clock starts at a given
 * time instead of now (statectl's restore tests: tests/flink_restore.py, {@code ttl_now_ms}).
 *
 * <p>TTL state expires by the wall clock: {@code lastAccess + ttl <= now} hides a value
 * ({@code NeverReturnExpired}). A snapshot holding TTL state, restored more than its TTL after it
 * was taken, shows that state as absent, whatever its bytes. Restored with this backend, the job
 * runs as on the day the snapshot was taken: the TTL clock reads {@code statectl.ttl-clock.now-ms}
 * plus the time elapsed since the backend was created, so a value is visible exactly when its
 * stored last-access timestamp is within the TTL before that time, which proves the timestamp was
 * restored, not only the value. Everything else (restore, state, snapshots) is the delegate's:
 * {@link #createKeyedStateBackend} hands it the same parameters but for the TTL time provider
 * ({@code KeyedStateBackendParametersImpl.setTtlTimeProvider}, which Flink's own tests use).
 *
 * <p>Configured as {@code state.backend.type: TtlClockBackend$Factory} (Flink loads a backend
 * factory by class name), {@code statectl.ttl-clock.backend: hashmap|rocksdb},
 * {@code statectl.ttl-clock.now-ms: <epoch ms>}.
 */
public class TtlClockBackend implements StateBackend {

    private static final long serialVersionUID = 1L;
    private static final Logger LOG = LoggerFactory.getLogger(TtlClockBackend.class);

    public static final ConfigOption<String> BACKEND =
            ConfigOptions.key("statectl.ttl-clock.backend").stringType().defaultValue("hashmap");
    public static final ConfigOption<Long> NOW_MS =
            ConfigOptions.key("statectl.ttl-clock.now-ms").longType().noDefaultValue();

    private final StateBackend delegate;
    private final long nowMs;
    private final long createdMs = System.currentTimeMillis();

    TtlClockBackend(StateBackend delegate, long nowMs) {
        this.delegate = delegate;
        this.nowMs = nowMs;
    }

    /** Loads the delegate as Flink would from {@code state.backend.type}. */
    public static final class Factory implements StateBackendFactory<TtlClockBackend> {
        @Override
        public TtlClockBackend createFromConfig(ReadableConfig config, ClassLoader classLoader) {
            Configuration own = Configuration.fromMap(config.toMap());
            own.set(StateBackendOptions.STATE_BACKEND, config.get(BACKEND));
            long now = config.getOptional(NOW_MS).orElseThrow(
                    () -> new IllegalArgumentException(NOW_MS.key() + " is not set"));
            try {
                StateBackend delegate = StateBackendLoader.loadStateBackendFromConfig(own, classLoader, LOG);
                LOG.info("statectl TTL clock at {} over {}", now, delegate.getClass().getSimpleName());
                return new TtlClockBackend(delegate, now);
            } catch (Exception e) {
                throw new IllegalStateException("cannot load the state backend " + config.get(BACKEND), e);
            }
        }
    }

    private TtlTimeProvider clock() {
        final long offset = nowMs - createdMs;
        return () -> System.currentTimeMillis() + offset;
    }

    @Override
    public String getName() {
        return delegate.getName();
    }

    @Override
    public <K> CheckpointableKeyedStateBackend<K> createKeyedStateBackend(
            KeyedStateBackendParameters<K> parameters) throws Exception {
        return delegate.createKeyedStateBackend(
                new KeyedStateBackendParametersImpl<>(parameters).setTtlTimeProvider(clock()));
    }

    @Override
    public <K> AsyncKeyedStateBackend<K> createAsyncKeyedStateBackend(
            KeyedStateBackendParameters<K> parameters) throws Exception {
        return delegate.createAsyncKeyedStateBackend(
                new KeyedStateBackendParametersImpl<>(parameters).setTtlTimeProvider(clock()));
    }

    @Override
    public boolean supportsAsyncKeyedStateBackend() {
        return delegate.supportsAsyncKeyedStateBackend();
    }

    @Override
    public OperatorStateBackend createOperatorStateBackend(OperatorStateBackendParameters parameters)
            throws Exception {
        return delegate.createOperatorStateBackend(parameters);
    }

    @Override
    public boolean useManagedMemory() {
        return delegate.useManagedMemory();
    }

    @Override
    public boolean supportsNoClaimRestoreMode() {
        return delegate.supportsNoClaimRestoreMode();
    }

    @Override
    public boolean supportsSavepointFormat(SavepointFormatType formatType) {
        return delegate.supportsSavepointFormat(formatType);
    }
}
