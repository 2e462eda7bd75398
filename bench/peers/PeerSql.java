import java.util.concurrent.TimeUnit;

import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.TableEnvironment;
import org.apache.flink.table.api.TableResult;

/**
 * The JVM peer of ``statectl build`` (bench/bench_peers.py): count and sum per key of CSV records
 * with Flink SQL, {@code GROUP BY} into a blackhole sink, in streaming mode on the hashmap (heap)
 * state backend, on the MiniCluster a local TableEnvironment starts.
 *
 * <p>Usage: {@code java -cp <classes>:<pyflink/lib>/* PeerSql <input dir> <parallelism>
 * [mini-batch]}. The input directory holds header-less CSV files of {@code key,value} lines
 * (string, bigint); the source is bounded, so the job finishes once every record is aggregated.
 * {@code mini-batch}: Flink SQL's own folding, the tuning its documentation recommends for
 * aggregations: records are buffered (up to 5000, or 1 s) and aggregated per key locally before
 * the shuffle and again before the state is touched (mini-batch, local-global aggregation).
 * Without it, Flink's defaults: one state access per record. One JSON line on stdout:
 * milliseconds since the epoch at the start of main, at submission and at the end, and the job's
 * net runtime (JobExecutionResult: from the job's creation to its end).
 */
public class PeerSql {
    public static void main(String[] args) throws Exception {
        long start = System.currentTimeMillis();
        String input = args[0];
        int parallelism = Integer.parseInt(args[1]);
        Configuration conf = new Configuration();
        conf.setString("parallelism.default", String.valueOf(parallelism));
        conf.setString("state.backend.type", "hashmap");
        conf.setString("pipeline.max-parallelism", "128");
        if (args.length > 2 && args[2].equals("mini-batch")) {
            conf.setString("table.exec.mini-batch.enabled", "true");
            conf.setString("table.exec.mini-batch.allow-latency", "1 s");
            conf.setString("table.exec.mini-batch.size", "5000");
            conf.setString("table.optimizer.agg-phase-strategy", "TWO_PHASE");
        }
        TableEnvironment tEnv = TableEnvironment.create(
                EnvironmentSettings.newInstance().inStreamingMode().withConfiguration(conf).build());
        tEnv.executeSql("CREATE TABLE src (k STRING, v BIGINT) WITH ("
                + "'connector' = 'filesystem', 'path' = 'file://" + input + "', 'format' = 'csv')");
        tEnv.executeSql("CREATE TABLE sink (k STRING, cnt BIGINT, s BIGINT) WITH ("
                + "'connector' = 'blackhole')");
        long submit = System.currentTimeMillis();
        TableResult result = tEnv.executeSql(
                "INSERT INTO sink SELECT k, COUNT(*), SUM(v) FROM src GROUP BY k");
        JobExecutionResult done = result.getJobClient().get().getJobExecutionResult().get();
        long end = System.currentTimeMillis();
        System.out.println("{\"main_start_ms\": " + start + ", \"submit_ms\": " + submit
                + ", \"end_ms\": " + end + ", \"net_runtime_ms\": "
                + done.getNetRuntime(TimeUnit.MILLISECONDS) + ", \"job_id\": \""
                + done.getJobID() + "\"}");
        System.exit(0);
    }
}
