import java.io.File;
import java.io.OutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.flink.configuration.Configuration;
import org.apache.logging.log4j.Level;
import org.apache.logging.log4j.core.config.Configurator;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.table.api.Schema;
import org.apache.flink.table.api.StatementSet;
import org.apache.flink.table.api.Table;
import org.apache.flink.table.api.TableDescriptor;
import org.apache.flink.table.api.TableResult;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;

/**
 * The SQL coverage job: one statement set with a query per stateful SQL operator family, over a
 * deterministic input, snapshotted the four ways of issue 40 (heap: a retained checkpoint and a
 * canonical savepoint; RocksDB with incremental checkpoints: a native savepoint and a retained
 * incremental checkpoint; plus a RocksDB canonical savepoint).
 *
 * <p>Two variants run side by side in one MiniCluster, each a job of its own: {@code plain} (group
 * aggregates, joins, windows, Top-N, deduplication, over aggregates, MATCH_RECOGNIZE,
 * ChangelogNormalize, the sink upsert materializer, a file sink) and {@code minibatch} (the same
 * families the planner turns into local/global aggregates, split distinct aggregates and
 * mini-batch deduplication, joins and Top-N).
 *
 * <p>{@code java SqlCoverageJob OUT} writes OUT/result.json: {"snapshots": {"VARIANT/KIND": path},
 * "timings": {...}, "records": n}. What the snapshots hold is read by {@code SqlStateReader} (Flink's
 * own classes), never by statectl. The job compiles against Flink 1.20 and 2.3.
 *
 * <p>{@code java SqlCoverageJob OUT --restore-many MANIFEST [CONCURRENCY]} restores snapshots (e.g.
 * statectl's rewrites of these) into the jobs and snapshots them again, all in one JVM: {@link #restoreMany}.
 */
public class SqlCoverageJob {

    static final int PARALLELISM = 2;
    static final int MAX_PARALLELISM = 128;
    static final long TS_BASE = 1_700_000_000_000L;
    static final int BIDS = 600;
    static final int AUCTIONS = 30;
    static final int PERSONS = 20;
    static final String[] CHANNELS = {"app", "web", "ios", "android"};
    static final String[] CITIES = {"Lyon", "Oslo", "Kyoto", "Quito", "Perth"};

    static MiniCluster cluster;
    static int restPort;
    /** Whether a job's plan is compiled into BASE/plan.json (planning the statement set a second time). */
    static boolean explain = true;

    /** Counts of the "done" sinks, per job tag, read from the print sink's lines (same JVM). */
    static final Map<String, AtomicLong> DONE = new java.util.concurrent.ConcurrentHashMap<>();

    // ------------------------------------------------------------------ input

    static String ts(long ms) {
        java.time.LocalDateTime t = java.time.LocalDateTime.ofEpochSecond(ms / 1000, (int) (ms % 1000) * 1_000_000, java.time.ZoneOffset.UTC);
        return t.format(java.time.format.DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm:ss.SSS", Locale.ROOT));
    }

    static void write(File dir, String name, List<String> lines) throws Exception {
        dir.mkdirs();
        File tmp = new File(dir, "." + name + ".tmp");
        Files.writeString(tmp.toPath(), String.join("\n", lines) + "\n", StandardCharsets.UTF_8);
        Files.move(tmp.toPath(), new File(dir, name).toPath());
    }

    /** Writes the input (two files per table, so that both source readers have a split). */
    static int writeInput(String base) throws Exception {
        List<List<String>> persons = List.of(new ArrayList<>(), new ArrayList<>());
        for (int i = 0; i < PERSONS * 2; i++) {
            int id = 1 + i % PERSONS;
            persons.get(i % 2).add(id + ",p" + id + "," + CITIES[(i / PERSONS + id) % CITIES.length] + ",S" + (id % 3) + "," + ts(TS_BASE + i * 7_000L));
        }
        List<List<String>> auctions = List.of(new ArrayList<>(), new ArrayList<>());
        for (int k = 0; k < AUCTIONS; k++) {
            long dt = TS_BASE + k * 9_000L;
            String reserve = (k * 137 % 10000) / 100 + "." + String.format(Locale.ROOT, "%02d", k * 137 % 100);
            String big = "1234567890123456789" + k + "." + String.format(Locale.ROOT, "%06d", k * 7919);
            auctions.get(k % 2).add((1000 + k) + ",item" + k + "," + (k * 11 + 5) + "," + reserve + "," + big + "," + ts(dt) + "," + ts(dt + 3_600_000L)
                    + "," + (1 + k % PERSONS) + "," + (k % 5));
        }
        List<List<String>> bids = List.of(new ArrayList<>(), new ArrayList<>());
        for (int i = 0; i < BIDS; i++) {
            long dt = TS_BASE + i * 500L + (i % 7) * 13L;
            bids.get(i % 2).add((1000 + (i * 7) % AUCTIONS) + "," + (1 + (i * 3) % PERSONS) + "," + ((i * 37) % 1000 + 1) + "," + CHANNELS[i % 4]
                    + ",u" + (i % 50) + "," + ts(dt) + "," + String.format(Locale.ROOT, "%d.%02d", i % 90, i % 100));
        }
        List<String> cdc = new ArrayList<>();
        for (int i = 0; i < 40; i++) {
            int id = i % 15;
            String after = "{\"id\":" + id + ",\"name\":\"c" + id + "\",\"v\":" + i + "}";
            String before = "{\"id\":" + id + ",\"name\":\"c" + id + "\",\"v\":" + (i - 15) + "}";
            cdc.add(i < 15 ? "{\"before\":null,\"after\":" + after + ",\"op\":\"c\"}"
                    : "{\"before\":" + before + ",\"after\":" + after + ",\"op\":\"u\"}");
            if (i % 10 == 3) cdc.add(cdc.get(cdc.size() - 1)); // a duplicated event
        }
        for (int f = 0; f < 2; f++) {
            write(new File(base, "input/person"), "part-" + f + ".csv", persons.get(f));
            write(new File(base, "input/auction"), "part-" + f + ".csv", auctions.get(f));
            write(new File(base, "input/bid"), "part-" + f + ".csv", bids.get(f));
        }
        write(new File(base, "input/cdc"), "part-0.json", cdc);
        return PERSONS * 2 + AUCTIONS + BIDS;
    }

    // ------------------------------------------------------------------ the jobs

    static Configuration config(String base, String backend, boolean minibatch, String restore, int parallelism, int maxParallelism) {
        Configuration conf = new Configuration();
        if (restore != null) {
            for (String k : new String[] {"execution.state-recovery.path", "execution.savepoint.path"})
                conf.setString(k, restore);
        }
        conf.setString("state.backend.type", backend);
        conf.setString("state.backend", backend);
        for (String k : new String[] {"execution.checkpointing.incremental", "state.backend.incremental"})
            conf.setString(k, String.valueOf(backend.equals("rocksdb")));
        for (String k : new String[] {"execution.checkpointing.dir", "state.checkpoints.dir"})
            conf.setString(k, "file://" + base + "/checkpoints");
        for (String k : new String[] {"execution.checkpointing.savepoint-dir", "state.savepoints.dir"})
            conf.setString(k, "file://" + base + "/savepoints");
        conf.setString("execution.checkpointing.interval", "1s");
        conf.setString("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION");
        for (String k : new String[] {"execution.checkpointing.num-retained", "state.checkpoints.num-retained"})
            conf.setString(k, "1");
        conf.setString("pipeline.max-parallelism", String.valueOf(maxParallelism));
        conf.setString("parallelism.default", String.valueOf(parallelism));
        conf.setString("restart-strategy.type", "none");
        conf.setString("restart-strategy", "none");
        conf.setString("pipeline.auto-watermark-interval", "100ms");
        conf.setString("table.exec.source.idle-timeout", "500 ms");
        conf.setString("table.exec.source.cdc-events-duplicate", "true");
        conf.setString("table.exec.sink.upsert-materialize", "FORCE");
        conf.setString("table.exec.state.ttl", "0");
        if (minibatch) {
            conf.setString("table.exec.mini-batch.enabled", "true");
            conf.setString("table.exec.mini-batch.allow-latency", "200 ms");
            conf.setString("table.exec.mini-batch.size", "100");
            conf.setString("table.optimizer.agg-phase-strategy", "TWO_PHASE");
            conf.setString("table.optimizer.distinct-agg.split.enabled", "true");
        }
        conf.setString("execution.target", "remote");
        conf.setString("rest.address", "localhost");
        conf.setString("rest.port", String.valueOf(restPort));
        return conf;
    }

    static void ddl(StreamTableEnvironment t, String base) {
        String csv = "'format' = 'csv', 'source.monitor-interval' = '200ms'";
        t.executeSql("CREATE TABLE person (id BIGINT, name STRING, city STRING, state STRING, dt TIMESTAMP(3), "
                + "pt AS PROCTIME(), WATERMARK FOR dt AS dt - INTERVAL '1' SECOND) WITH ('connector' = 'filesystem', "
                + "'path' = 'file://" + base + "/input/person', " + csv + ")");
        t.executeSql("CREATE TABLE auction (id BIGINT, item STRING, initial_bid BIGINT, reserve DECIMAL(10, 2), "
                + "big DECIMAL(30, 6), dt TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category INT, "
                + "WATERMARK FOR dt AS dt - INTERVAL '1' SECOND) WITH ('connector' = 'filesystem', "
                + "'path' = 'file://" + base + "/input/auction', " + csv + ")");
        t.executeSql("CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING, "
                + "dt TIMESTAMP(3), fee DECIMAL(5, 2), pt AS PROCTIME(), WATERMARK FOR dt AS dt - INTERVAL '1' SECOND) "
                + "WITH ('connector' = 'filesystem', 'path' = 'file://" + base + "/input/bid', " + csv + ")");
        t.executeSql("CREATE TABLE cdc (id INT, name STRING, v INT, PRIMARY KEY (id) NOT ENFORCED) WITH ("
                + "'connector' = 'filesystem', 'path' = 'file://" + base + "/input/cdc', 'format' = 'debezium-json', "
                + "'source.monitor-interval' = '200ms')");
        t.executeSql("CREATE VIEW person_v AS SELECT id, name, city, dt FROM (SELECT *, ROW_NUMBER() OVER "
                + "(PARTITION BY id ORDER BY dt DESC) AS rn FROM person) WHERE rn = 1");
    }

    /** The plain variant's queries: name -> SELECT (each into a sink of its own). */
    static Map<String, String> plainQueries() {
        Map<String, String> q = new LinkedHashMap<>();
        q.put("agg_plain", "SELECT auction, COUNT(*) AS c, MAX(price) AS mx, SUM(price) AS s, AVG(price) AS a, "
                + "MIN(dt) AS first_dt, MAX(fee) AS max_fee FROM bid GROUP BY auction");
        q.put("agg_distinct_filter", "SELECT channel, COUNT(DISTINCT bidder) AS bidders, "
                + "COUNT(DISTINCT bidder) FILTER (WHERE price > 500) AS rich, SUM(price) FILTER (WHERE price < 100) AS small, "
                + "COLLECT(url) AS urls, LISTAGG(DISTINCT url) AS url_list FROM bid GROUP BY channel");
        q.put("agg_retract", "SELECT c, COUNT(*) AS n, MAX(mx) AS top, MIN(mx) AS bottom FROM "
                + "(SELECT auction, COUNT(*) AS c, MAX(price) AS mx FROM bid GROUP BY auction) GROUP BY c");
        q.put("agg_global", "SELECT COUNT(*) AS c, SUM(price) AS s, MAX(dt) AS last_dt FROM bid");
        q.put("join_inner", "SELECT b.auction, b.price, a.item, a.reserve, a.big, b.dt FROM bid b JOIN auction a ON b.auction = a.id");
        q.put("join_left_unique", "SELECT a.id, a.item, m.mp FROM auction a LEFT JOIN "
                + "(SELECT auction, MAX(price) AS mp FROM bid GROUP BY auction) m ON a.id = m.auction");
        q.put("join_full", "SELECT p.id, p.name, a.id AS auction, a.expires FROM person p FULL OUTER JOIN auction a ON p.id = a.seller");
        q.put("join_interval", "SELECT b.auction, b.price, a.item FROM bid b, auction a WHERE b.auction = a.id "
                + "AND b.dt BETWEEN a.dt AND a.dt + INTERVAL '30' SECOND");
        q.put("join_temporal", "SELECT b.auction, b.bidder, p.city FROM bid b JOIN person_v FOR SYSTEM_TIME AS OF b.dt AS p "
                + "ON b.bidder = p.id");
        q.put("window_tumble", "SELECT auction, window_start, window_end, COUNT(*) AS c, MAX(price) AS mx FROM "
                + "TABLE(TUMBLE(TABLE bid, DESCRIPTOR(dt), INTERVAL '10' SECOND)) GROUP BY auction, window_start, window_end");
        q.put("window_hop_global", "SELECT window_start, window_end, COUNT(*) AS c, SUM(price) AS s FROM "
                + "TABLE(HOP(TABLE bid, DESCRIPTOR(dt), INTERVAL '5' SECOND, INTERVAL '20' SECOND)) GROUP BY window_start, window_end");
        q.put("window_cumulate", "SELECT channel, window_start, window_end, COUNT(DISTINCT bidder) AS bidders FROM "
                + "TABLE(CUMULATE(TABLE bid, DESCRIPTOR(dt), INTERVAL '10' SECOND, INTERVAL '60' SECOND)) "
                + "GROUP BY channel, window_start, window_end");
        q.put("window_session", "SELECT auction, window_start, window_end, COUNT(*) AS c FROM "
                + "TABLE(SESSION(TABLE bid PARTITION BY auction, DESCRIPTOR(dt), INTERVAL '4' SECOND)) "
                + "GROUP BY auction, window_start, window_end");
        q.put("window_legacy", "SELECT channel, TUMBLE_START(dt, INTERVAL '10' SECOND) AS ws, COUNT(*) AS c, SUM(price) AS s "
                + "FROM bid GROUP BY TUMBLE(dt, INTERVAL '10' SECOND), channel");
        q.put("window_join", "SELECT l.auction, l.window_start, l.c, r.c AS rc FROM "
                + "(SELECT auction, window_start, window_end, COUNT(*) AS c FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(dt), "
                + "INTERVAL '10' SECOND)) GROUP BY auction, window_start, window_end) l JOIN "
                + "(SELECT id, window_start, window_end, COUNT(*) AS c FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(dt), "
                + "INTERVAL '10' SECOND)) GROUP BY id, window_start, window_end) r "
                + "ON l.auction = r.id AND l.window_start = r.window_start AND l.window_end = r.window_end");
        q.put("window_topn", "SELECT window_start, window_end, auction, c, rn FROM (SELECT *, ROW_NUMBER() OVER "
                + "(PARTITION BY window_start, window_end ORDER BY c DESC) AS rn FROM (SELECT auction, window_start, window_end, "
                + "COUNT(*) AS c FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(dt), INTERVAL '10' SECOND)) "
                + "GROUP BY auction, window_start, window_end)) WHERE rn <= 3");
        q.put("window_dedup", "SELECT window_start, window_end, bidder, price FROM (SELECT *, ROW_NUMBER() OVER "
                + "(PARTITION BY window_start, window_end, bidder ORDER BY dt ASC) AS rn FROM "
                + "TABLE(TUMBLE(TABLE bid, DESCRIPTOR(dt), INTERVAL '10' SECOND))) WHERE rn = 1");
        q.put("rank_append", "SELECT channel, auction, price, rn FROM (SELECT *, ROW_NUMBER() OVER "
                + "(PARTITION BY channel ORDER BY price DESC) AS rn FROM bid) WHERE rn <= 3");
        q.put("rank_update_fast", "SELECT category, auction, c FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY category "
                + "ORDER BY c DESC) AS rn FROM (SELECT a.category, b.auction, COUNT(*) AS c FROM bid b JOIN auction a "
                + "ON b.auction = a.id GROUP BY a.category, b.auction)) WHERE rn <= 2");
        q.put("rank_retract", "SELECT c, auction, av FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY c ORDER BY av DESC) AS rn "
                + "FROM (SELECT auction, COUNT(*) AS c, AVG(price) AS av FROM bid GROUP BY auction)) WHERE rn <= 2");
        q.put("dedup_first_proctime", "SELECT bidder, auction, price FROM (SELECT *, ROW_NUMBER() OVER "
                + "(PARTITION BY bidder ORDER BY pt ASC) AS rn FROM bid) WHERE rn = 1");
        q.put("dedup_last_rowtime", "SELECT auction, bidder, price, dt FROM (SELECT *, ROW_NUMBER() OVER "
                + "(PARTITION BY auction ORDER BY dt DESC) AS rn FROM bid) WHERE rn = 1");
        q.put("over_rows", "SELECT auction, price, SUM(price) OVER (PARTITION BY auction ORDER BY dt "
                + "ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS s3 FROM bid");
        q.put("over_range", "SELECT channel, price, MAX(price) OVER (PARTITION BY channel ORDER BY dt "
                + "RANGE BETWEEN INTERVAL '10' SECOND PRECEDING AND CURRENT ROW) AS mx FROM bid");
        q.put("match_recognize", "SELECT * FROM bid MATCH_RECOGNIZE (PARTITION BY auction ORDER BY dt "
                + "MEASURES FIRST(A.price) AS start_price, LAST(B.price) AS top_price, C.price AS end_price "
                + "ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+ C) "
                + "DEFINE B AS B.price > A.price, C AS C.price < LAST(B.price))");
        q.put("changelog_normalize", "SELECT id, name, v FROM cdc");
        return q;
    }

    /** The mini-batch variant's queries (local/global, split distinct, mini-batch operators). */
    static Map<String, String> minibatchQueries() {
        Map<String, String> q = new LinkedHashMap<>();
        q.put("mb_agg", "SELECT auction, COUNT(*) AS c, MAX(price) AS mx, SUM(fee) AS fees FROM bid GROUP BY auction");
        q.put("mb_agg_distinct", "SELECT channel, COUNT(DISTINCT bidder) AS bidders, SUM(DISTINCT price) AS sp, "
                + "COUNT(*) AS c FROM bid GROUP BY channel");
        q.put("mb_agg_global", "SELECT COUNT(*) AS c, COUNT(DISTINCT auction) AS auctions FROM bid");
        q.put("mb_window", "SELECT auction, window_start, window_end, COUNT(*) AS c FROM "
                + "TABLE(TUMBLE(TABLE bid, DESCRIPTOR(dt), INTERVAL '10' SECOND)) GROUP BY auction, window_start, window_end");
        q.put("mb_window_global", "SELECT window_start, window_end, COUNT(*) AS c, MAX(price) AS mx FROM "
                + "TABLE(CUMULATE(TABLE bid, DESCRIPTOR(dt), INTERVAL '5' SECOND, INTERVAL '20' SECOND)) GROUP BY window_start, window_end");
        q.put("mb_dedup_first_rowtime", "SELECT auction, bidder, price FROM (SELECT *, ROW_NUMBER() OVER "
                + "(PARTITION BY auction ORDER BY dt ASC) AS rn FROM bid) WHERE rn = 1");
        q.put("mb_dedup_last_proctime", "SELECT bidder, auction, price FROM (SELECT *, ROW_NUMBER() OVER "
                + "(PARTITION BY bidder ORDER BY pt DESC) AS rn FROM bid) WHERE rn = 1");
        q.put("mb_join", "SELECT b.auction, b.price, a.item FROM bid b JOIN auction a ON b.auction = a.id");
        q.put("mb_topn", "SELECT channel, auction, price FROM (SELECT *, ROW_NUMBER() OVER "
                + "(PARTITION BY channel ORDER BY price DESC) AS rn FROM bid) WHERE rn <= 2");
        return q;
    }

    /**
     * Submits the job of a variant: checkpoints under base, input read from input (a restore reads
     * the generation's input, which its restored source state says was read). Operator chaining is
     * off: a SQL job has no uids, and Flink's hash of an operator counts its chained outputs, so with
     * chaining the operators of the job at parallelism 1 (where more of them chain) would get other
     * OperatorIDs than at 2, and no snapshot of it could be restored at another parallelism.
     */
    static JobClient submit(String base, String input, String backend, boolean minibatch, String tag, String restore,
                            int parallelism, int maxParallelism) throws Exception {
        StreamExecutionEnvironment env = new StreamExecutionEnvironment(config(base, backend, minibatch, restore, parallelism, maxParallelism));
        env.setParallelism(parallelism);
        env.setMaxParallelism(maxParallelism);
        env.disableOperatorChaining();
        StreamTableEnvironment t = StreamTableEnvironment.create(env);
        ddl(t, input);
        StatementSet set = t.createStatementSet();
        Map<String, String> queries = minibatch ? minibatchQueries() : plainQueries();
        for (Map.Entry<String, String> q : queries.entrySet()) {
            Table table = t.sqlQuery(q.getValue());
            Schema.Builder schema = Schema.newBuilder().fromResolvedSchema(table.getResolvedSchema());
            if (q.getKey().equals("changelog_normalize")) {
                // a sink keyed otherwise than its input: the planner adds the upsert materializer
                schema = Schema.newBuilder().fromResolvedSchema(table.getResolvedSchema()).primaryKey("id");
            }
            set.add(table.insertInto(TableDescriptor.forConnector("blackhole").schema(schema.build()).build()));
        }
        if (!minibatch) {
            Table files = t.sqlQuery("SELECT auction, bidder, price, channel FROM bid");
            set.add(files.insertInto(TableDescriptor.forConnector("filesystem").schema(Schema.newBuilder()
                    .fromResolvedSchema(files.getResolvedSchema()).build())
                    .option("path", "file://" + base + "/files").option("format", "csv")
                    .option("sink.rolling-policy.rollover-interval", "1 h").build()));
        }
        // progress: a global count of every record read, printed (the same JVM reads it)
        Table done = t.sqlQuery("SELECT COUNT(*) AS n FROM (SELECT id FROM person UNION ALL SELECT id FROM auction "
                + "UNION ALL SELECT auction AS id FROM bid)");
        set.add(done.insertInto(TableDescriptor.forConnector("print").schema(Schema.newBuilder()
                .fromResolvedSchema(done.getResolvedSchema()).build()).option("print-identifier", "DONE-" + tag).build()));
        if (explain) {
            // the plan as Flink compiles it (COMPILE PLAN's JSON), beside the generation's snapshots:
            // statectl names the SQL operators' state by it (--plan). Planned apart from the execution,
            // its node ids are the executed job's less a constant (one static counter per JVM).
            String plan;
            try {
                plan = set.compilePlan().asJsonString();
            } catch (Throwable e) {
                plan = "{\"error\": " + js(String.valueOf(e)) + "}";
            }
            Files.writeString(new File(base, "plan.json").toPath(), plan, StandardCharsets.UTF_8);
        }
        TableResult result = set.execute();
        return result.getJobClient().orElseThrow();
    }

    // ------------------------------------------------------------------ snapshots

    /** Runs both variants on one backend until every record was counted, then snapshots each. */
    static Map<String, String> generate(String out, String backend, Map<String, Long> timings) throws Exception {
        long t0 = System.currentTimeMillis();
        String kind = backend.equals("hashmap") ? "heap" : "rocksdb";
        Map<String, String> bases = new LinkedHashMap<>();
        Map<String, JobClient> clients = new LinkedHashMap<>();
        int records = 0;
        for (String variant : new String[] {"plain", "minibatch"}) {
            String base = out + "/gen-" + kind + "-" + variant;
            records = writeInput(base);
            String tag = kind + "-" + variant;
            DONE.put(tag, new AtomicLong());
            bases.put(variant, base);
            clients.put(variant, submit(base, base, backend, variant.equals("minibatch"), tag, null, PARALLELISM, MAX_PARALLELISM));
        }
        JobClient[] all = clients.values().toArray(new JobClient[0]);
        final int expected = records;
        CoverageJob.waitFor("every record (" + backend + ")", () -> DONE.get(kind + "-plain").get() >= expected
                && DONE.get(kind + "-minibatch").get() >= expected, 180_000, all);
        Thread.sleep(2_000); // watermarks and the last mini-batches go through
        Map<String, String> snaps = new LinkedHashMap<>();
        for (Map.Entry<String, JobClient> c : clients.entrySet()) {
            String base = bases.get(c.getKey());
            String prefix = c.getKey() + "/" + kind;
            long triggered = CoverageJob.lastCheckpoint(base, false);
            snaps.put(prefix + "-savepoint-canonical", c.getValue().triggerSavepoint("file://" + base + "/savepoints/canonical",
                    SavepointFormatType.CANONICAL).get());
            if (!backend.equals("hashmap")) {
                snaps.put(prefix + "-savepoint-native", c.getValue().triggerSavepoint("file://" + base + "/savepoints/native",
                        SavepointFormatType.NATIVE).get());
            }
            CoverageJob.waitFor("a checkpoint (" + prefix + ")", () -> CoverageJob.lastCheckpoint(base, true) > triggered + 1, 60_000, all);
        }
        for (Map.Entry<String, JobClient> c : clients.entrySet()) {
            CoverageJob.cancel(c.getValue());
            String base = bases.get(c.getKey());
            snaps.put(c.getKey() + "/" + kind + "-checkpoint" + (backend.equals("rocksdb") ? "-incremental" : ""),
                    CoverageJob.checkpointDir(base, CoverageJob.lastCheckpoint(base, true)).getAbsolutePath());
        }
        timings.put("generate-" + backend + "-ms", System.currentTimeMillis() - t0);
        return snaps;
    }

    /** Tees stdout: the print sinks' "DONE-tag> +I[n]" lines set {@link #DONE}. */
    static void watchStdout() {
        PrintStream real = System.out;
        OutputStream tee = new OutputStream() {
            final StringBuilder line = new StringBuilder();

            @Override
            public synchronized void write(int b) {
                real.write(b);
                if (b != '\n') {
                    line.append((char) b);
                    return;
                }
                String l = line.toString();
                line.setLength(0);
                int at = l.indexOf("> ");
                if (l.startsWith("DONE-") && at > 0) {
                    String tag = l.substring(5, at).replaceFirst(":[0-9]+$", "");
                    String v = l.substring(at + 2).replaceAll("[^0-9]", "");
                    AtomicLong n = DONE.get(tag);
                    if (n != null && !v.isEmpty() && !l.substring(at + 2).startsWith("-")) n.accumulateAndGet(Long.parseLong(v), Math::max);
                }
            }
        };
        System.setOut(new PrintStream(tee, true));
    }

    public static void main(String[] args) {
        try {
            run(args);
        } catch (Throwable e) {
            e.printStackTrace();
            System.out.println("FAILED " + e);
            System.exit(1);
        }
        System.exit(0);
    }

    /** A JSON string (control characters escaped). */
    static String js(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c == '\n') b.append("\\n");
            else if (c < 0x20) b.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    /**
     * Restores a snapshot (e.g. one statectl rewrote) into the job of VARIANT on BACKEND at PARALLELISM
     * and MAX_PARALLELISM, reading the input of the generation that took the source (INPUT_BASE), waits
     * until two checkpoints completed after the restore, takes a canonical savepoint and returns its
     * path. The restored source state says that input was read, so the state goes on as it was.
     * Checkpoints and the savepoint go under OUT/restore. A job that fails or stalls is cancelled (a
     * restore of many cases goes on in the same MiniCluster).
     */
    static String restore(String out, String variant, String backend, int parallelism, int maxParallelism,
                          String input, String path, String tag) throws Exception {
        String base = out + "/restore";
        DONE.put(tag, new AtomicLong());
        String pointer = path.startsWith("file:") ? path : "file://" + path;
        JobClient client;
        synchronized (PLANNING) { // one job planned at a time; the jobs run side by side
            client = submit(base, input, backend, variant.equals("minibatch"), tag, pointer, parallelism, maxParallelism);
        }
        try {
            long start = CoverageJob.lastCheckpoint(base, true);
            CoverageJob.waitFor("two checkpoints after the restore", () -> CoverageJob.lastCheckpoint(base, true) >= start + 2, 120_000, client);
            String savepoint = client.triggerSavepoint("file://" + base + "/savepoints/after", SavepointFormatType.CANONICAL).get(120, TimeUnit.SECONDS);
            CoverageJob.cancel(client);
            return savepoint.replaceFirst("^file:(//)?", "/").replaceFirst("^//+", "/");
        } catch (Throwable e) {
            try {
                if (!client.getJobStatus().get(30, TimeUnit.SECONDS).isGloballyTerminalState()) CoverageJob.cancel(client);
            } catch (Throwable ignored) {
                // the job ended meanwhile: its slots are free
            }
            throw e;
        }
    }

    static final Object PLANNING = new Object();

    /** The size of Flink's log file (-Dlog.file, flushed per line): where a case's part begins or ends. */
    static long logSize() {
        String log = System.getProperty("log.file");
        return log == null ? -1 : new File(log).length();
    }

    /**
     * Restores every case of MANIFEST (one per line, tab-separated: NAME VARIANT BACKEND PARALLELISM
     * MAX_PARALLELISM INPUT_BASE PATH) in this JVM and one MiniCluster, CONCURRENCY jobs at a time
     * (planned one after the other), each as {@link #restore} under OUT/NAME. Writes OUT/NAME/result.json
     * per case: {"savepoint": path or null, "error": the failure's stack trace or null, "log_from",
     * "log_to": the byte offsets of Flink's log while the case ran, "ms"}. A failed case fails alone.
     */
    static void restoreMany(String out, String manifest, int concurrency) throws Exception {
        List<String[]> cases = new ArrayList<>();
        int slots = 1;
        for (String line : Files.readAllLines(new File(manifest).toPath(), StandardCharsets.UTF_8)) {
            if (line.isBlank()) continue;
            String[] f = line.split("\t");
            if (f.length != 7) throw new IllegalArgumentException("a manifest line of 7 fields: " + line);
            cases.add(f);
            slots = Math.max(slots, Integer.parseInt(f[3]));
        }
        // planning is most of a restore: plans are not explained, and Flink's per-task lines (a
        // MB of log per case) are left out; warnings, errors and each case's failure are kept
        explain = false;
        for (String logger : new String[] {"org.apache.flink.runtime.taskmanager.Task",
                "org.apache.flink.runtime.executiongraph.ExecutionGraph", "org.apache.flink.runtime.state.StateBackendLoader",
                "org.apache.flink.runtime.taskexecutor.TaskExecutor", "org.apache.flink.streaming.runtime.tasks.StreamTask",
                "org.apache.flink.runtime.taskexecutor.slot.TaskSlotTableImpl", "org.apache.flink.state.rocksdb.EmbeddedRocksDBStateBackend"})
            Configurator.setLevel(logger, Level.WARN);
        startCluster(out, slots * concurrency);
        ExecutorService pool = Executors.newFixedThreadPool(concurrency);
        List<Future<?>> running = new ArrayList<>();
        for (String[] f : cases) {
            running.add(pool.submit(() -> {
                String dir = out + "/" + f[0];
                new File(dir).mkdirs();
                long t0 = System.currentTimeMillis();
                long from = logSize();
                String savepoint = null;
                String error = null;
                try {
                    savepoint = restore(dir, f[1], f[2], Integer.parseInt(f[3]), Integer.parseInt(f[4]), f[5], f[6], f[0]);
                } catch (Throwable e) {
                    StringWriter trace = new StringWriter();
                    e.printStackTrace(new PrintWriter(trace));
                    error = trace.toString();
                }
                String result = "{\"savepoint\":" + (savepoint == null ? "null" : js(savepoint)) + ",\"error\":"
                        + (error == null ? "null" : js(error)) + ",\"log_from\":" + from + ",\"log_to\":" + logSize()
                        + ",\"ms\":" + (System.currentTimeMillis() - t0) + "}\n";
                Files.writeString(new File(dir, "result.json").toPath(), result, StandardCharsets.UTF_8);
                System.err.println("CASE " + f[0] + (error == null ? " restored" : " FAILED") + " in " + (System.currentTimeMillis() - t0) + " ms");
                return null;
            }));
        }
        for (Future<?> f : running) f.get();
        pool.shutdown();
    }

    static void run(String[] args) throws Exception {
        String out = new File(args[0]).getAbsolutePath();
        long t0 = System.currentTimeMillis();
        watchStdout();
        if (args.length > 1 && args[1].equals("--restore-many")) {
            // --restore-many MANIFEST [CONCURRENCY]
            restoreMany(out, args[2], args.length > 3 ? Integer.parseInt(args[3]) : 1);
            cluster.close();
            System.out.println("DONE");
            return;
        }
        startCluster(out, 2 * PARALLELISM);
        Map<String, Long> timings = new LinkedHashMap<>();
        Map<String, String> snaps = new LinkedHashMap<>();
        snaps.putAll(generate(out, "hashmap", timings));
        snaps.putAll(generate(out, "rocksdb", timings));
        timings.put("total-ms", System.currentTimeMillis() - t0);
        StringBuilder b = new StringBuilder("{\"snapshots\":{");
        List<String> parts = new ArrayList<>();
        for (Map.Entry<String, String> s : snaps.entrySet())
            parts.add(js(s.getKey()) + ":" + js(s.getValue().replaceFirst("^file:(//)?", "")));
        b.append(String.join(",", parts)).append("},\"timings\":{");
        parts.clear();
        for (Map.Entry<String, Long> t : timings.entrySet()) parts.add(js(t.getKey()) + ":" + t.getValue());
        b.append(String.join(",", parts)).append("}}\n");
        Files.writeString(new File(out, "result.json").toPath(), b.toString(), StandardCharsets.UTF_8);
        cluster.close();
        System.out.println("DONE");
    }

    static void startCluster(String out, int slots) throws Exception {
        Configuration cc = new Configuration();
        cc.setString("rest.bind-port", "0");
        cc.setString("rest.address", "localhost");
        // the generation's 4 slots: 512m and 256m; more slots (restores side by side) get more
        cc.setString("taskmanager.memory.managed.size", Math.max(512, 128 * slots) + "m");
        cc.setString("taskmanager.memory.network.min", Math.max(256, 64 * slots) + "m");
        cc.setString("taskmanager.memory.network.max", Math.max(256, 64 * slots) + "m");
        // a loaded 2-core machine (a test run beside it) can stall the TaskManager's heartbeat
        // past Flink's 50 s default: the job then fails for no fault of its own
        cc.setString("heartbeat.timeout", "600000");
        cc.setString("pekko.ask.timeout", "120 s");
        cc.setString("io.tmp.dirs", out + "/tmp");
        new File(out, "tmp").mkdirs();
        cluster = new MiniCluster(new MiniClusterConfiguration.Builder().setConfiguration(cc)
                .setNumTaskManagers(1).setNumSlotsPerTaskManager(slots).build());
        cluster.start();
        restPort = cluster.getRestAddress().get().getPort();
    }
}
