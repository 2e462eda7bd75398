package upgrade.driver;

import java.io.File;
import java.lang.reflect.InvocationTargetException;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;
import javax.tools.JavaCompiler;
import javax.tools.StandardJavaFileManager;
import javax.tools.ToolProvider;
import org.apache.flink.api.common.JobStatus;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.PipelineOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.SerializedThrowable;

/**
 * Flink's own outcome of job upgrades: {@code java upgrade.driver.UpgradeDriver SPEC OUT}.
 *
 * <p>One MiniCluster; the job's versions are compiled here (javax.tools), each into its own class
 * directory (the versions hold classes of the same names with different fields), and each job
 * is submitted through the cluster's REST endpoint with its version's directory as its class
 * path ({@code pipeline.classpaths}): its own user class loader. SPEC lines (tab-separated):
 * <ul>
 *   <li>{@code VARIANT name source...}: compile the sources into OUT/classes/name;</li>
 *   <li>{@code CLASSES name dir}: the variant {@code name} already compiled into {@code dir};</li>
 *   <li>{@code JOB id variant settings}: run that version fresh (settings {@code k=v;k=v}, see
 *       upgrade.job.Topology) over a few records per key until every stateful operator
 *       processed them, take a canonical savepoint and move it to OUT/jobs/id/savepoint, then
 *       feed the dump's marker (the input line {@code 0,dump}): every stateful operator dumps
 *       its keyed state (upgrade.driver.Probe) into OUT/jobs/id/old-state.json (the state of
 *       the savepoint: no record came in between);</li>
 *   <li>{@code CASE name old new}: the job {@code new} restores the savepoint of job {@code old}
 *       (or the directory {@code old}, if absolute) without allowNonRestoredState, restart
 *       strategy none, and is fed the same records: restored once every stateful operator
 *       processed them and a checkpoint completed after that; refused when the job fails
 *       (or its submission does) first: the cause chain.</li>
 *   <li>{@code RESTORE name job savepoint backend}: the job {@code job} restores the directory
 *       {@code savepoint} on {@code backend} (hashmap | rocksdb) without allowNonRestoredState,
 *       fed no records: restored once a checkpoint completed and every stateful operator dumped
 *       its keyed state on the marker (into OUT/restores/name.json); refused when the job fails
 *       (or its submission does) first.</li>
 * </ul>
 * OUT/result.tsv: {@code JOB id path ms}, {@code CASE name restored|refused ms cause...} and
 * {@code RESTORE name restored|refused ms dump cause...}
 * (each cause {@code class: first line of its message}, outermost first), values escaped
 * (backslash, tab, newline).
 */
public final class UpgradeDriver {
    static final int KEYS = 4;
    static final int RECORDS_PER_KEY = 2;
    static final long TIMEOUT_MS = 90_000;

    static MiniCluster cluster;
    static int restPort;
    static String out;
    static final Map<String, URLClassLoader> LOADERS = new LinkedHashMap<>();
    static final Map<String, File> CLASSES = new LinkedHashMap<>();
    static final Map<String, String[]> JOBS = new LinkedHashMap<>();  // id -> variant, settings
    static final Map<String, String> SAVEPOINTS = new LinkedHashMap<>();
    static final List<String> RESULT = new ArrayList<>();

    public static void main(String[] args) {
        try {
            run(args[0], args[1]);
        } catch (Throwable e) {
            e.printStackTrace();
            System.out.println("FAILED " + e);
            System.exit(1);
        }
        System.exit(0);
    }

    static void run(String spec, String outDir) throws Exception {
        out = new File(outDir).getAbsolutePath();
        long t0 = System.currentTimeMillis();
        // the cluster starts while the versions compile
        CompletableFuture<Void> started = CompletableFuture.runAsync(() -> {
            try {
                startCluster();
            } catch (Exception e) {
                throw new CompletionException(e);
            }
            System.out.println("CLUSTER " + (System.currentTimeMillis() - t0) + " ms");
        });
        for (String line : Files.readAllLines(new File(spec).toPath(), StandardCharsets.UTF_8)) {
            if (line.isBlank()) continue;
            String[] f = line.split("\t");
            if (!f[0].equals("VARIANT") && !f[0].equals("CLASSES")) started.get();
            long t = System.currentTimeMillis();
            switch (f[0]) {
                case "VARIANT":
                    compile(f[1], List.of(f).subList(2, f.length));
                    break;
                case "CLASSES":
                    load(f[1], new File(f[2]));
                    break;
                case "JOB":
                    JOBS.put(f[1], new String[] {f[2], f.length > 3 ? f[3] : ""});
                    break;
                case "CASE":
                    outcome(f[1], f[2], f[3]);
                    break;
                case "RESTORE":
                    restore(f[1], f[2], f[3], f[4]);
                    break;
                default:
                    throw new IllegalArgumentException("spec line " + line);
            }
            System.out.println(f[0] + " " + f[1] + " " + (System.currentTimeMillis() - t) + " ms");
        }
        started.get();
        StringBuilder b = new StringBuilder();
        for (String r : RESULT) b.append(r).append('\n');
        b.append("TOTAL\t").append(System.currentTimeMillis() - t0).append('\n');
        Files.writeString(new File(out, "result.tsv").toPath(), b.toString(), StandardCharsets.UTF_8);
        cluster.close();
        System.out.println("DONE");
    }

    // ------------------------------------------------------------------ the versions

    static JavaCompiler JAVAC;
    static StandardJavaFileManager FILES;

    static void compile(String variant, List<String> sources) throws Exception {
        File dir = new File(out, "classes/" + variant);
        dir.mkdirs();
        if (JAVAC == null) {
            JAVAC = ToolProvider.getSystemJavaCompiler();
            FILES = JAVAC.getStandardFileManager(null, null, StandardCharsets.UTF_8);
        }
        List<String> options = List.of("-nowarn", "-implicit:none", "-proc:none", "-d", dir.getPath(),
                "-cp", System.getProperty("java.class.path"), "-sourcepath", "");
        boolean ok = JAVAC.getTask(null, FILES, null, options, null, FILES.getJavaFileObjectsFromStrings(sources)).call();
        if (!ok) throw new IllegalStateException("javac of " + variant + " failed");
        load(variant, dir);
    }

    static void load(String variant, File dir) throws Exception {
        if (!new File(dir, "upgrade/job/Topology.class").isFile()) throw new IllegalArgumentException("no classes in " + dir);
        CLASSES.put(variant, dir);
        LOADERS.put(variant, new URLClassLoader(new URL[] {dir.toURI().toURL()}, UpgradeDriver.class.getClassLoader()));
    }

    static Map<String, String> settings(String spec) {
        Map<String, String> s = new LinkedHashMap<>();
        for (String kv : spec.split(";")) {
            if (kv.isBlank()) continue;
            String[] p = kv.split("=", 2);
            s.put(p[0].trim(), p[1].trim());
        }
        return s;
    }

    // ------------------------------------------------------------------ the runs

    static Configuration config(String base, String variant, String restore, String backend) throws Exception {
        Configuration conf = new Configuration();
        conf.setString("state.backend.type", backend);
        conf.setString("state.backend", backend);
        for (String k : new String[] {"execution.checkpointing.dir", "state.checkpoints.dir"})
            conf.setString(k, "file://" + base + "/checkpoints");
        for (String k : new String[] {"execution.checkpointing.savepoint-dir", "state.savepoints.dir"})
            conf.setString(k, "file://" + base + "/savepoints");
        if (restore != null) {
            conf.setString("execution.checkpointing.interval", "200ms");
            for (String k : new String[] {"execution.state-recovery.path", "execution.savepoint.path"})
                conf.setString(k, restore);
        }
        conf.setString("restart-strategy.type", "none");
        conf.setString("restart-strategy", "none");
        conf.set(PipelineOptions.CLASSPATHS, List.of(CLASSES.get(variant).toURI().toURL().toString()));
        conf.setString("execution.target", "remote");
        conf.setString("rest.address", "localhost");
        conf.setString("rest.port", String.valueOf(restPort));
        return conf;
    }

    /**
     * Submits job {@code id} over a fresh input (the records, or none), on {@code backend};
     * returns the number of its stateful operators.
     */
    static int submit(String id, String base, String restore, String backend, boolean records, JobClient[] client) throws Exception {
        String[] job = JOBS.get(id);
        if (job == null) throw new IllegalArgumentException("no job " + id);
        URLClassLoader loader = LOADERS.get(job[0]);
        if (loader == null) throw new IllegalArgumentException("no variant " + job[0]);
        File input = new File(base, "input");
        input.mkdirs();
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < RECORDS_PER_KEY; i++)
            for (int k = 0; k < KEYS; k++) b.append(k).append(',').append(i).append('\n');
        if (records) Files.writeString(new File(input, "part-0.txt").toPath(), b.toString(), StandardCharsets.UTF_8);
        Probe.reset();
        ClassLoader previous = Thread.currentThread().getContextClassLoader();
        Thread.currentThread().setContextClassLoader(loader);
        try {
            StreamExecutionEnvironment env = new StreamExecutionEnvironment(config(base, job[0], restore, backend), loader);
            int operators = (Integer) Class.forName("upgrade.job.Topology", true, loader)
                    .getMethod("build", StreamExecutionEnvironment.class, Map.class, String.class)
                    .invoke(null, env, settings(job[1]), input.getPath());
            client[0] = env.executeAsync("upgrade-" + id + "-" + new File(base).getName());
            return operators;
        } catch (InvocationTargetException e) {
            throw (Exception) e.getCause();
        } finally {
            Thread.currentThread().setContextClassLoader(previous);
        }
    }

    /** The savepoint of job {@code id} run fresh (taken once). */
    static String savepoint(String id) throws Exception {
        if (SAVEPOINTS.containsKey(id)) return SAVEPOINTS.get(id);
        long t0 = System.currentTimeMillis();
        String base = out + "/runs/job-" + id;
        JobClient[] client = new JobClient[1];
        int operators = submit(id, base, null, "hashmap", true, client);
        int expected = operators * KEYS * RECORDS_PER_KEY;
        waitFor("job " + id + " to process its records", () -> Probe.PROCESSED.get() >= expected, client[0]);
        String sp = client[0].triggerSavepoint("file://" + base + "/savepoints", SavepointFormatType.CANONICAL)
                .get(TIMEOUT_MS, TimeUnit.MILLISECONDS);
        mark(base);
        waitFor("job " + id + " to dump its state", () -> Probe.DUMPED.get() >= operators, client[0]);
        cancel(client[0]);
        File from = new File(sp.replaceFirst("^file:(//)?", ""));
        File to = new File(out, "jobs/" + id + "/savepoint");
        to.getParentFile().mkdirs();
        Files.move(from.toPath(), to.toPath());
        writeDump(new File(to.getParentFile(), "old-state.json"));
        SAVEPOINTS.put(id, to.getPath());
        RESULT.add(String.join("\t", "JOB", esc(id), esc(to.getPath()), String.valueOf(System.currentTimeMillis() - t0)));
        return to.getPath();
    }

    static void outcome(String name, String oldJob, String newJob) throws Exception {
        String old = oldJob.startsWith("/") ? oldJob : savepoint(oldJob);
        savepoint(newJob);
        long t0 = System.currentTimeMillis();
        String base = out + "/runs/case-" + name;
        JobClient[] client = new JobClient[1];
        Throwable failure = null;
        boolean restored = false;
        try {
            int expected = submit(newJob, base, "file://" + old, "hashmap", true, client) * KEYS * RECORDS_PER_KEY;
            long deadline = System.currentTimeMillis() + TIMEOUT_MS;
            long triggered = -1;
            while (true) {
                JobStatus st = client[0].getJobStatus().get();
                if (st.isGloballyTerminalState()) {
                    try {
                        client[0].getJobExecutionResult().get();
                    } catch (Exception e) {
                        failure = e;
                    }
                    if (failure == null) throw new Broken("job " + newJob + " ended " + st + " without a failure");
                    break;
                }
                if (triggered < 0 && Probe.PROCESSED.get() >= expected) triggered = lastCheckpoint(base, false);
                if (triggered >= 0 && lastCheckpoint(base, true) > triggered) {
                    restored = true;
                    break;
                }
                if (System.currentTimeMillis() > deadline)
                    throw new Broken("timed out: case " + name + " (job " + st + ", processed "
                            + Probe.PROCESSED.get() + " of " + expected + ")");
                Thread.sleep(50);
            }
        } catch (Broken e) {
            throw e;
        } catch (Exception e) {  // the submission failed
            failure = e;
        }
        if (client[0] != null && !client[0].getJobStatus().get().isGloballyTerminalState()) cancel(client[0]);
        List<String> row = new ArrayList<>(List.of("CASE", esc(name), restored ? "restored" : "refused",
                String.valueOf(System.currentTimeMillis() - t0)));
        causes(failure, row);
        RESULT.add(String.join("\t", row));
    }

    /** Appends the cause chain of {@code failure} (if any), outermost first. */
    static void causes(Throwable failure, List<String> row) {
        Set<Throwable> seen = Collections.newSetFromMap(new IdentityHashMap<>());
        for (Throwable t = failure; t != null && seen.add(t); t = t.getCause()) {
            String cls = t instanceof SerializedThrowable ? ((SerializedThrowable) t).getOriginalErrorClassName() : t.getClass().getName();
            String msg = t.getMessage() == null ? "" : t.getMessage().strip();
            int nl = msg.indexOf('\n');
            row.add(esc(cls + ": " + (nl < 0 ? msg : msg.substring(0, nl))));
        }
    }

    /**
     * RESTORE: job {@code job} restores {@code savepoint} on {@code backend}, fed no records;
     * once a checkpoint completed, the marker: every stateful operator dumps its keyed state.
     */
    static void restore(String name, String job, String savepoint, String backend) throws Exception {
        long t0 = System.currentTimeMillis();
        String base = out + "/runs/restore-" + name;
        JobClient[] client = new JobClient[1];
        Throwable failure = null;
        boolean restored = false;
        File dump = new File(out, "restores/" + name + ".json");
        try {
            int operators = submit(job, base, "file://" + new File(savepoint).getAbsolutePath(), backend, false, client);
            long deadline = System.currentTimeMillis() + TIMEOUT_MS;
            boolean marked = false;
            while (true) {
                JobStatus st = client[0].getJobStatus().get();
                if (st.isGloballyTerminalState()) {
                    try {
                        client[0].getJobExecutionResult().get();
                    } catch (Exception e) {
                        failure = e;
                    }
                    if (failure == null) throw new Broken("job " + job + " ended " + st + " without a failure");
                    break;
                }
                if (!marked && lastCheckpoint(base, true) > 0) {
                    mark(base);
                    marked = true;
                }
                if (marked && Probe.DUMPED.get() >= operators) {
                    restored = true;
                    break;
                }
                if (System.currentTimeMillis() > deadline)
                    throw new Broken("timed out: restore " + name + " (job " + st + ", marked " + marked + ", dumped "
                            + Probe.DUMPED.get() + " of " + operators + ")");
                Thread.sleep(50);
            }
        } catch (Broken e) {
            throw e;
        } catch (Exception e) {  // the submission failed
            failure = e;
        }
        if (client[0] != null && !client[0].getJobStatus().get().isGloballyTerminalState()) cancel(client[0]);
        if (!restored) Probe.DUMP.clear();
        writeDump(dump);
        List<String> row = new ArrayList<>(List.of("RESTORE", esc(name), restored ? "restored" : "refused",
                String.valueOf(System.currentTimeMillis() - t0), esc(dump.getPath())));
        causes(failure, row);
        RESULT.add(String.join("\t", row));
    }

    /** Feeds the running job of {@code base} the dump's marker (a new input file, renamed into place). */
    static void mark(String base) throws Exception {
        File tmp = new File(base, "input/.marker");
        Files.writeString(tmp.toPath(), "0,dump\n", StandardCharsets.UTF_8);
        Files.move(tmp.toPath(), new File(base, "input/marker.txt").toPath());
    }

    /** Writes what the stateful operators dumped (Probe.DUMP) as a JSON list, sorted by operator, state, key. */
    static void writeDump(File file) throws Exception {
        List<String[]> entries;
        synchronized (Probe.DUMP) {
            entries = new ArrayList<>(Probe.DUMP);
        }
        entries.sort((a, b) -> {
            for (int i = 0; i < 3; i++) {
                int c = a[i].compareTo(b[i]);
                if (c != 0) return c;
            }
            return 0;
        });
        StringBuilder b = new StringBuilder("[");
        for (int i = 0; i < entries.size(); i++) {
            String[] e = entries.get(i);
            b.append(i == 0 ? "\n" : ",\n").append("{\"operator\": ").append(Probe.json(e[0])).append(", \"state\": ")
                    .append(Probe.json(e[1])).append(", \"key\": ").append(e[2]).append(", \"value\": ").append(e[3]).append('}');
        }
        b.append("\n]\n");
        file.getParentFile().mkdirs();
        Files.writeString(file.toPath(), b.toString(), StandardCharsets.UTF_8);
    }

    /** The driver's own failure (not Flink's outcome): ends the run. */
    static final class Broken extends RuntimeException {
        Broken(String message) {
            super(message);
        }
    }

    interface Check {
        boolean done() throws Exception;
    }

    static void waitFor(String what, Check done, JobClient job) throws Exception {
        long deadline = System.currentTimeMillis() + TIMEOUT_MS;
        for (int n = 0; !done.done(); n++) {
            if (System.currentTimeMillis() > deadline) throw new IllegalStateException("timed out waiting for " + what);
            if (n % 10 == 9 && job.getJobStatus().get().isGloballyTerminalState()) {
                String why = "";
                try {
                    job.getJobExecutionResult().get();
                } catch (Exception e) {
                    Throwable c = e;
                    while (c.getCause() != null) c = c.getCause();
                    why = ": " + c;
                }
                throw new IllegalStateException("the job ended while waiting for " + what + why);
            }
            Thread.sleep(20);
        }
    }

    static void cancel(JobClient client) throws Exception {
        try {
            client.cancel().get();
        } catch (Exception e) {
            // ended meanwhile
        }
        waitFor("the job to end", () -> {
            try {
                return client.getJobStatus().get().isGloballyTerminalState();
            } catch (Exception e) {
                return true;
            }
        }, client);
    }

    /** The highest checkpoint id under base/checkpoints/<job id>/ (completed: with _metadata). */
    static long lastCheckpoint(String base, boolean completed) {
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

    static String esc(String s) {
        return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n");
    }

    static void startCluster() throws Exception {
        Configuration cc = new Configuration();
        cc.setString("rest.bind-port", "0");
        cc.setString("rest.address", "localhost");
        cc.setString("taskmanager.memory.managed.size", "64m");
        cc.setString("io.tmp.dirs", out + "/tmp");
        new File(out, "tmp").mkdirs();
        cluster = new MiniCluster(new MiniClusterConfiguration.Builder().setConfiguration(cc)
                .setNumTaskManagers(1).setNumSlotsPerTaskManager(2).build());
        cluster.start();
        restPort = cluster.getRestAddress().get().getPort();
    }
}
