import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.regex.Pattern;

import org.apache.flink.api.common.JobStatus;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.file.src.FileSource;
import org.apache.flink.connector.file.src.reader.TextLineInputFormat;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.fs.Path;
import org.apache.flink.runtime.execution.ExecutionState;
import org.apache.flink.runtime.executiongraph.AccessExecutionGraph;
import org.apache.flink.runtime.executiongraph.AccessExecutionVertex;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.StatementSet;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Restores Flink snapshots in verification mode, many in one JVM, one after the other (statectl's
 * test harness, tests/flink_restore.py, drives it); also generates snapshots (mode=generate).
 *
 * <p>Each line on stdin is one case: tab-separated key=value pairs (values with \t, \n, \\
 * escaped as \\t, \\n, \\\\). Keys: id, kind (java | types | sql | bootstrap), base (a fresh directory
 * whose input/ already holds the verification records), restore (file:// URI of the snapshot),
 * parallelism, max_parallelism, backend (hashmap | rocksdb), ttl_now_ms (optional: the backend's
 * TTL clock starts at this epoch millisecond, see TtlClockBackend), prefix and nkeys (the FIX_* input
 * parameters), out (file for the job's stdout), expect (number of output lines matching
 * count_regex after which the job has printed everything), count_regex, timeout_ms, quiet_ms
 * (once every task has restored its state, give up waiting for more lines after this long
 * without one), staged (a file moved to input/part-1.txt once every task has restored, when the
 * verification records must not arrive earlier). For each case one line goes to stdout: {@code RESULT<TAB>key=value...} with
 * status (done | failed | timeout), the job's final status, the counted lines, millisecond
 * timestamps (start, submitted, running, restored (every task RUNNING), first_line, last_line,
 * end), this JVM's CPU time during the case and until restored (cpu_ms, cpu_restored_ms), the
 * byte range of the Flink log written during the case (log_from, log_to) and the error.
 *
 * <p>All cases run on one MiniCluster started here (8 slots, -Dstatectl.slots), reached through
 * its REST endpoint like a remote cluster, so DataStream and SQL jobs are submitted the ordinary
 * way, each with its own configuration (state backend, restore path); its start-up (about a
 * second) is paid once. The job topologies are those of the fixture jobs (JavaStateJob.main,
 * TypesJob.main, job_sql.py), built here from their own classes with the same uids, names, key
 * selectors and state, so that Flink maps the snapshot's state onto them exactly as onto the
 * originals (an operator whose state finds no match fails the restore). What differs: no fixed
 * sleeps (the verification records are in place before the job starts and the job is cancelled
 * as soon as it printed every expected line), no restarts (restart-strategy none: a failed restore
 * fails the case at once), no periodic checkpoints during the short run, and no System.exit.
 */
public class RestoreDriver {

    private static final Logger LOG = LoggerFactory.getLogger(RestoreDriver.class);

    /** Slots of the shared MiniCluster: the highest parallelism a case may ask for. */
    static final int SLOTS = Integer.getInteger("statectl.slots", 8);
    /** One MiniCluster for all cases (-Dstatectl.shared-cluster=false: one per case, as
     *  executeAsync does by default; its start-up costs about a second per case). */
    static final boolean SHARED_CLUSTER = Boolean.parseBoolean(System.getProperty("statectl.shared-cluster", "true"));
    static MiniCluster cluster;
    static int restPort;

    /** Starts the shared MiniCluster (once); jobs reach it through its REST endpoint like a
     *  remote cluster, so every kind (DataStream and SQL) is submitted the ordinary way. */
    static void startCluster() throws Exception {
        if (cluster != null) return;
        Configuration cc = new Configuration();
        cc.setString("rest.bind-port", "0");
        cc.setString("rest.address", "localhost");
        cc.setString("taskmanager.memory.managed.size", System.getProperty("statectl.managed-memory", "512m"));
        String tmp = System.getProperty("statectl.tmp");
        if (tmp != null) cc.setString("io.tmp.dirs", tmp);
        cluster = new MiniCluster(new MiniClusterConfiguration.Builder().setConfiguration(cc)
                .setNumTaskManagers(1).setNumSlotsPerTaskManager(SLOTS).build());
        cluster.start();
        restPort = cluster.getRestAddress().get().getPort();
        LOG.info("statectl-restore shared MiniCluster at port {} with {} slots", restPort, SLOTS);
    }

    /** System.out of the jobs: every line goes to the current case's file and is counted. */
    static final class Router extends OutputStream {
        private final ByteArrayOutputStream line = new ByteArrayOutputStream();
        private OutputStream target;
        private Pattern pattern;
        private long matched;
        private long firstLine;
        private long lastLine;

        synchronized void start(OutputStream target, Pattern pattern) {
            this.target = target;
            this.pattern = pattern;
            matched = 0;
            firstLine = 0;
            lastLine = 0;
            line.reset();
        }

        synchronized void stop() throws IOException {
            flushLine();
            if (target != null) target.close();
            target = null;
        }

        synchronized long matched() {
            return matched;
        }

        synchronized long firstLine() {
            return firstLine;
        }

        synchronized long lastLine() {
            return lastLine;
        }

        @Override
        public synchronized void write(int b) throws IOException {
            line.write(b);
            if (b == '\n') flushLine();
        }

        @Override
        public synchronized void write(byte[] b, int off, int len) throws IOException {
            for (int i = off; i < off + len; i++) write(b[i]);
        }

        private void flushLine() throws IOException {
            if (line.size() == 0) return;
            byte[] bytes = line.toByteArray();
            line.reset();
            if (target == null) return;          // output between cases is dropped
            target.write(bytes);
            String text = new String(bytes, StandardCharsets.UTF_8);
            if (pattern.matcher(text).find()) {
                long now = System.currentTimeMillis();
                if (matched == 0) firstLine = now;
                lastLine = now;
                matched++;
            }
        }
    }

    static Map<String, String> parse(String line) {
        Map<String, String> m = new LinkedHashMap<>();
        for (String field : line.split("\t")) {
            int eq = field.indexOf('=');
            if (eq > 0) m.put(field.substring(0, eq), unescape(field.substring(eq + 1)));
        }
        return m;
    }

    static String unescape(String s) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '\\' && i + 1 < s.length()) {
                char n = s.charAt(++i);
                b.append(n == 't' ? '\t' : n == 'n' ? '\n' : n);
            } else {
                b.append(c);
            }
        }
        return b.toString();
    }

    static String escape(String s) {
        return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "");
    }

    /** CPU time of this JVM so far, in milliseconds (all its threads: Flink's and ours). */
    static long cpuMillis() {
        java.lang.management.OperatingSystemMXBean os = java.lang.management.ManagementFactory.getOperatingSystemMXBean();
        return os instanceof com.sun.management.OperatingSystemMXBean
                ? ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime() / 1_000_000 : 0;
    }

    static long logSize() {
        String f = System.getProperty("log.file");
        return f == null ? 0 : new File(f).length();
    }

    /** Whether every task of the job is RUNNING, i.e. has restored its state (on the shared
     *  cluster; a per-case cluster does not say, so: true). */
    static boolean allTasksRunning(JobClient client) {
        if (cluster == null) return true;
        try {
            AccessExecutionGraph g = cluster.getExecutionGraph(client.getJobID()).get();
            for (AccessExecutionVertex v : g.getAllExecutionVertices()) {
                if (v.getExecutionState() != ExecutionState.RUNNING) return false;
            }
            return true;
        } catch (Exception e) {
            return false;
        }
    }

    /** The configuration of the fixture jobs (for a verification run unless said otherwise). */
    static Configuration config(Map<String, String> c) {
        String base = c.get("base");
        Configuration conf = new Configuration();
        conf.setString("state.backend.type", c.getOrDefault("backend", "hashmap"));
        String ttlNow = c.getOrDefault("ttl_now_ms", "");
        if (!ttlNow.isEmpty()) {  // the backend, its TTL clock starting at ttl_now_ms
            conf.setString("state.backend.type", "TtlClockBackend$Factory");  // Flink 2.x only
            conf.setString("statectl.ttl-clock.backend", c.getOrDefault("backend", "hashmap"));
            conf.setString("statectl.ttl-clock.now-ms", ttlNow);
        }
        conf.setString("execution.checkpointing.incremental", c.getOrDefault("incremental", "false"));
        conf.setString("execution.checkpointing.dir", "file://" + base + "/checkpoints");
        conf.setString("execution.checkpointing.savepoint-dir", "file://" + base + "/savepoints");
        // the fixture jobs checkpoint every second; a verification run needs no checkpoint
        conf.setString("execution.checkpointing.interval", c.getOrDefault("checkpoint_interval", "1h"));
        conf.setString("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION");
        conf.setString("execution.checkpointing.num-retained", "1");
        conf.setString("pipeline.max-parallelism", c.get("max_parallelism"));
        conf.setString("parallelism.default", c.get("parallelism"));
        conf.setString("restart-strategy.type", "none");
        conf.setString("io.tmp.dirs", base + "/tmp");
        String inline = c.getOrDefault("inline_threshold", "");
        if (!inline.isEmpty()) conf.setString("execution.checkpointing.data-inline-threshold", inline);
        String restore = c.getOrDefault("restore", "");
        if (!restore.isEmpty()) conf.setString("execution.state-recovery.path", restore);
        // Flink 1.15 to 1.19 know these settings by their old keys (a release ignores keys it
        // does not know; 1.20 knows both)
        conf.setString("state.backend", c.getOrDefault("backend", "hashmap"));
        conf.setString("state.backend.incremental", c.getOrDefault("incremental", "false"));
        conf.setString("state.checkpoints.dir", "file://" + base + "/checkpoints");
        conf.setString("state.savepoints.dir", "file://" + base + "/savepoints");
        conf.setString("state.checkpoints.num-retained", "1");
        if (!inline.isEmpty()) conf.setString("state.storage.fs.memory-threshold", inline);
        if (!restore.isEmpty()) conf.setString("execution.savepoint.path", restore);
        if (SHARED_CLUSTER) {
            conf.setString("execution.target", "remote");
            conf.setString("rest.address", "localhost");
            conf.setString("rest.port", String.valueOf(restPort));
        }
        return conf;
    }

    /** The highest checkpoint id whose directory exists under base/checkpoints/<job id>/. */
    static long lastCheckpointId(String base, boolean completed) {
        long max = 0;
        File[] jobs = new File(base, "checkpoints").listFiles();
        if (jobs == null) return 0;
        for (File job : jobs) {
            File[] chks = job.listFiles();
            if (chks == null) continue;
            for (File chk : chks) {
                if (!chk.getName().startsWith("chk-")) continue;
                if (completed && !new File(chk, "_metadata").isFile()) continue;
                max = Math.max(max, Long.parseLong(chk.getName().substring(4)));
            }
        }
        return max;
    }

    /**
     * Generation (mode=generate): the job reads the whole input (base/input, no restore) until the
     * line matching count_regex (the last input record's output) appeared expect times; every
     * snapshot taken after that holds all records (their barriers follow the last record in every
     * channel). Then, as asked: a canonical savepoint (savepoint=canonical) and/or a checkpoint
     * triggered after that point (checkpoint=yes), before cancelling (the checkpoint is retained).
     */
    static void generate(Map<String, String> c, JobClient client, Map<String, String> r) throws Exception {
        String base = c.get("base");
        r.put("processed", String.valueOf(System.currentTimeMillis()));
        long triggered = lastCheckpointId(base, false);
        if (c.getOrDefault("savepoint", "").equals("canonical")) {
            String sp = client.triggerSavepoint("file://" + base + "/savepoints/canonical",
                    org.apache.flink.core.execution.SavepointFormatType.CANONICAL).get();
            r.put("savepoint", sp);
            r.put("savepoint_done", String.valueOf(System.currentTimeMillis()));
        }
        if (c.getOrDefault("checkpoint", "").equals("yes")) {
            long deadline = System.currentTimeMillis() + Long.parseLong(c.getOrDefault("timeout_ms", "120000"));
            while (lastCheckpointId(base, true) <= triggered) {
                if (System.currentTimeMillis() > deadline) throw new IllegalStateException("no checkpoint completed");
                Thread.sleep(100);
            }
            r.put("checkpoint_id", String.valueOf(lastCheckpointId(base, true)));
            r.put("checkpoint_done", String.valueOf(System.currentTimeMillis()));
        }
    }

    /** A DataStream environment for the case: on the shared MiniCluster (getExecutionEnvironment
     *  would always start a local one) or on one of its own. */
    static StreamExecutionEnvironment environment(Map<String, String> c) {
        return SHARED_CLUSTER ? new StreamExecutionEnvironment(config(c))
                : StreamExecutionEnvironment.getExecutionEnvironment(config(c));
    }

    /** JavaStateJob.main's topology. */
    static JobClient submitJava(Map<String, String> c) throws Exception {
        String base = c.get("base");
        int parallelism = Integer.parseInt(c.get("parallelism"));
        int maxPar = Integer.parseInt(c.get("max_parallelism"));
        final String prefix = c.getOrDefault("prefix", "k");
        final int prefixLen = prefix.length();
        final java.util.Set<Long> probes = JavaStateJob.probes(Integer.parseInt(c.getOrDefault("nkeys", "100")));
        StreamExecutionEnvironment env = environment(c);
        env.setParallelism(parallelism);
        env.setMaxParallelism(maxPar);

        FileSource<String> src = FileSource.forRecordStreamFormat(new TextLineInputFormat(), new Path(base + "/input"))
                .monitorContinuously(Duration.ofMillis(500)).build();
        FileSource<String> rulesSrc = FileSource.forRecordStreamFormat(new TextLineInputFormat(), new Path(base + "/rules"))
                .monitorContinuously(Duration.ofMillis(500)).build();
        DataStream<Tuple2<String, Integer>> recs = env
                .fromSource(src, WatermarkStrategy.noWatermarks(), "file-source").uid("file-source")
                .map(new JavaStateJob.Parse()).uid("parse").name("parse");
        recs.rebalance().map(new JavaStateJob.CountingMap()).uid("op-state-map").name("op-state-map");
        DataStream<String> o1 = recs.keyBy((KeySelector<Tuple2<String, Integer>, String>) t -> t.f0)
                .process(new JavaStateJob.StrKeyed(prefixLen, probes)).uid("str-keyed").name("str-keyed");
        DataStream<String> o2 = recs.keyBy((KeySelector<Tuple2<String, Integer>, Long>) t -> Long.parseLong(t.f0.substring(prefixLen)))
                .process(new JavaStateJob.LongKeyed(probes)).uid("long-keyed").name("long-keyed");
        DataStream<String> o3 = recs.keyBy((KeySelector<Tuple2<String, Integer>, Integer>) t -> Integer.parseInt(t.f0.substring(prefixLen)))
                .process(new JavaStateJob.IntKeyed(probes)).uid("int-keyed").name("int-keyed");
        DataStream<Tuple2<String, Integer>> rules = env
                .fromSource(rulesSrc, WatermarkStrategy.noWatermarks(), "rules-source").uid("rules-source")
                .map(new JavaStateJob.Parse()).uid("rules-parse").name("rules-parse");
        DataStream<String> o4 = recs.connect(rules.broadcast(JavaStateJob.RULES)).process(new JavaStateJob.Bcast(prefix + "0"))
                .uid("broadcast-fn").name("broadcast-fn");
        o1.union(o2, o3, o4).print().uid("print-sink");
        return env.executeAsync("restore-java-" + c.get("id"));
    }

    /** A topology compiled apart (TypesTopology, BootstrapJob: they need Flink 1.19 or later,
     *  and this driver also runs on older releases), called by name. */
    static JobClient submitOptional(String className, Map<String, String> c) throws Exception {
        Class<?> cls;
        try {
            cls = Class.forName(className);
        } catch (ClassNotFoundException e) {
            throw new IllegalStateException(className + " is not compiled for this Flink release "
                    + "(it needs a newer Flink API)");
        }
        try {
            return (JobClient) cls.getMethod("submit", Map.class).invoke(null, c);
        } catch (java.lang.reflect.InvocationTargetException e) {
            Throwable cause = e.getCause();
            if (cause instanceof Exception) throw (Exception) cause;
            throw e;
        }
    }

    /** job_sql.py's statement set. */
    static JobClient submitSql(Map<String, String> c) throws Exception {
        String base = c.get("base");
        int subFrom = c.getOrDefault("prefix", "k").length() + 1;
        // on the case's StreamExecutionEnvironment (the shared cluster, as the java job): Flink
        // 1.18 and older start a local cluster of their own for a plain TableEnvironment
        StreamTableEnvironment t = StreamTableEnvironment.create(environment(c),
                EnvironmentSettings.newInstance().inStreamingMode().build());
        t.executeSql("CREATE TABLE src (k STRING, v INT) WITH ("
                + "'connector' = 'filesystem', 'path' = 'file://" + base + "/input', 'format' = 'csv', "
                + "'source.monitor-interval' = '500ms')");
        t.executeSql("CREATE TABLE sink_str (k STRING, cnt BIGINT, s BIGINT, mx INT, dres BIGINT) "
                + "WITH ('connector' = 'print', 'print-identifier' = 'STR')");
        t.executeSql("CREATE TABLE sink_int (ik INT, cnt BIGINT, s BIGINT) "
                + "WITH ('connector' = 'print', 'print-identifier' = 'INT')");
        StatementSet ss = t.createStatementSet();
        ss.addInsertSql("INSERT INTO sink_str SELECT k, COUNT(*), SUM(CAST(v AS BIGINT)), MAX(v), "
                + "COUNT(DISTINCT v % 3) FROM src GROUP BY k");
        ss.addInsertSql("INSERT INTO sink_int SELECT CAST(SUBSTRING(k FROM " + subFrom + ") AS INT) AS ik, "
                + "COUNT(*), SUM(CAST(v AS BIGINT)) FROM src GROUP BY CAST(SUBSTRING(k FROM " + subFrom + ") AS INT)");
        return ss.execute().getJobClient().orElseThrow();
    }

    /** The innermost cause first (usually the reason), then the chain from the outside. */
    static String rootCause(Throwable e) {
        Throwable root = e;
        StringBuilder chain = new StringBuilder();
        for (Throwable x = e; x != null; x = x.getCause()) {
            root = x;
            if (chain.length() < 3000) chain.append(" <- ").append(x.getClass().getName()).append(": ")
                    .append(String.valueOf(x.getMessage()).split("\n", 2)[0]);
            if (x.getCause() == x) break;
        }
        return root.getClass().getName() + ": " + root.getMessage() + " [" + chain.substring(4) + "]";
    }

    static Map<String, String> runCase(Map<String, String> c, Router router) {
        Map<String, String> r = new LinkedHashMap<>();
        r.put("id", c.get("id"));
        long start = System.currentTimeMillis();
        long cpuStart = cpuMillis();
        long logFrom = logSize();
        LOG.info("statectl-restore case {} begin: {}", c.get("id"), c);
        long timeout = Long.parseLong(c.getOrDefault("timeout_ms", "120000"));
        long quiet = Long.parseLong(c.getOrDefault("quiet_ms", "3000"));
        long expect = Long.parseLong(c.getOrDefault("expect", "1"));
        String kind = c.get("kind");
        String status = "done";
        String jobStatus = "";
        String error = "";
        long submitted = 0;
        long running = 0;
        JobClient client = null;
        try {
            router.start(new FileOutputStream(c.get("out")), Pattern.compile(c.get("count_regex")));
            if (SHARED_CLUSTER) {
                if (Integer.parseInt(c.get("parallelism")) > SLOTS) {
                    throw new IllegalArgumentException("parallelism " + c.get("parallelism") + " > the "
                            + SLOTS + " slots of the harness' MiniCluster (-Dstatectl.slots)");
                }
                startCluster();
            }
            switch (kind) {
                case "java": client = submitJava(c); break;
                case "types": client = submitOptional("TypesTopology", c); break;
                case "sql": client = submitSql(c); break;
                case "bootstrap": client = submitOptional("BootstrapJob", c); break;
                default: throw new IllegalArgumentException("unknown kind " + kind);
            }
            submitted = System.currentTimeMillis();
            long deadline = start + timeout;
            long typesExtra = Long.parseLong(c.getOrDefault("types_extra", "0"));
            long restored = 0;
            String staged = c.getOrDefault("staged", "");
            while (true) {
                JobStatus s = client.getJobStatus().get();
                long now = System.currentTimeMillis();
                if (s == JobStatus.RUNNING && running == 0) running = now;
                if (s.isGloballyTerminalState()) {
                    jobStatus = s.name();
                    status = "failed";
                    try {
                        client.getJobExecutionResult().get();
                    } catch (Exception e) {
                        error = rootCause(e);
                    }
                    break;
                }
                if (kind.equals("types") && typesExtra > 0) {
                    // fire every restored window once the extra records arrived (TypesJob's
                    // verification mode)
                    Class.forName("TypesTopology").getMethod("fireWhenSeen", int.class).invoke(null, (int) typesExtra);
                }
                if (router.matched() >= expect) break;
                // not all lines: give up once every task has restored and nothing came for `quiet`
                if (restored == 0 && allTasksRunning(client)) {
                    restored = now;
                    r.put("restored", String.valueOf(now));
                    r.put("cpu_restored_ms", String.valueOf(cpuMillis() - cpuStart));
                    if (!staged.isEmpty()) {   // verification records held back until restored
                        java.nio.file.Files.move(java.nio.file.Paths.get(staged),
                                java.nio.file.Paths.get(c.get("base"), "input", "part-1.txt"));
                    }
                }
                long last = router.lastLine();
                if (restored > 0 && now - Math.max(last, restored) > quiet
                        && (last > 0 || now - restored > 3 * quiet)) break;
                if (now > deadline) {
                    status = "timeout";
                    break;
                }
                Thread.sleep(20);
            }
            if (status.equals("done") && c.getOrDefault("mode", "verify").equals("generate")) {
                if (router.matched() < expect) {
                    status = "failed";
                    error = "the job stopped printing before the last input record";
                } else {
                    generate(c, client, r);
                }
            }
        } catch (Throwable e) {
            status = "failed";
            error = rootCause(e);
            if (client == null) jobStatus = "FAILED";     // Flink refused the job (e.g. its restore)
        }
        if (client != null && jobStatus.isEmpty()) {
            try {
                client.cancel().get();
                jobStatus = "CANCELED";
                // the per-job MiniCluster goes away with the job; its status may vanish first
                for (int i = 0; i < 500; i++) {
                    if (client.getJobStatus().get().isGloballyTerminalState()) break;
                    Thread.sleep(20);
                }
            } catch (Throwable e) {
                if (jobStatus.isEmpty()) jobStatus = "CANCEL FAILED: " + rootCause(e);
            }
        }
        try {
            router.stop();
        } catch (IOException e) {
            error += " (output: " + e + ")";
        }
        LOG.info("statectl-restore case {} end: {}", c.get("id"), status);
        r.put("status", status);
        r.put("job_status", jobStatus);
        r.put("lines", String.valueOf(router.matched()));
        r.put("start", String.valueOf(start));
        r.put("submitted", String.valueOf(submitted));
        r.put("running", String.valueOf(running));
        r.put("first_line", String.valueOf(router.firstLine()));
        r.put("last_line", String.valueOf(router.lastLine()));
        r.put("end", String.valueOf(System.currentTimeMillis()));
        r.put("cpu_ms", String.valueOf(cpuMillis() - cpuStart));
        r.put("log_from", String.valueOf(logFrom));
        r.put("log_to", String.valueOf(logSize()));
        r.put("error", error);
        return r;
    }

    public static void main(String[] args) throws Exception {
        PrintStream proto = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        Router router = new Router();
        System.setOut(new PrintStream(router, true, StandardCharsets.UTF_8));
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        proto.println("READY");
        for (String line; (line = in.readLine()) != null; ) {
            if (line.isBlank()) continue;
            Map<String, String> r = runCase(parse(line), router);
            StringBuilder b = new StringBuilder("RESULT");
            for (Map.Entry<String, String> e : r.entrySet()) {
                b.append('\t').append(e.getKey()).append('=').append(escape(e.getValue()));
            }
            proto.println(b);
        }
        System.exit(0);
    }
}
