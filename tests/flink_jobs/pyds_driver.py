"""Restores snapshots of the PyFlink DataStream fixture job (job_pyds.py), many in one process.

The counterpart of RestoreDriver.java for the job whose functions are Python: it runs in the
venv that has apache-flink. PyFlink starts one gateway JVM for the whole process; like
RestoreDriver, it starts one MiniCluster there (8 slots) and submits every case to it through its
REST endpoint (``STATECTL_SHARED_CLUSTER=false``: a MiniCluster per case, as job_pyds.py's own
runs); each job starts its own Python workers. Same protocol: one case per stdin line
(tab-separated key=value: id, base, restore, parallelism, max_parallelism, backend, prefix,
nkeys, out, expect, count_regex, timeout_ms, quiet_ms, staged), one ``RESULT`` line per case on
stdout. ``staged``: PyFlink 2.3 fails ("A serializer has already been registered for the
state") when records reach the Python operators while the restored job still initialises, so the
harness always stages the verification records; they go in once every task is RUNNING (read
from the Flink log). The topology is job_pyds.build() itself, with the module's input
parameters (PREFIX, PROBES, ...) set per case; its functions are pickled by value, so the workers
see those values. Python bundles are flushed every 20 ms (default 1 s) to get the output sooner.

Usage (the harness does this): ``<flink venv>/bin/python pyds_driver.py JOBS_DIR``.
"""

import os
import re
import sys
import time
import traceback


def parse(line):
    out = {}
    for field in line.rstrip("\n").split("\t"):
        key, eq, value = field.partition("=")
        if eq:
            out[key] = re.sub(r"\\(.)", lambda m: {"t": "\t", "n": "\n"}.get(m[1], m[1]), value)
    return out


def escape(value):
    text = str(value).replace("\\", "\\\\").replace("\t", "\\t")
    return text.replace("\n", "\\n").replace("\r", "")


def main(jobs_dir):
    proto = sys.stdout
    sys.stdout = sys.stderr          # anything else printed here must not mix with the protocol
    sys.path.insert(0, jobs_dir)
    import cloudpickle
    import job_pyds
    from pyflink.common import Configuration
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.java_gateway import get_gateway

    cloudpickle.register_pickle_by_value(job_pyds)
    jvm = get_gateway().jvm
    log_file = jvm.java.lang.System.getProperty("log.file") or ""

    def log_size():
        return os.path.getsize(log_file) if log_file and os.path.exists(log_file) else 0

    def set_out(path):
        stream = jvm.java.io.PrintStream(jvm.java.io.FileOutputStream(path), True, "UTF-8")
        jvm.java.lang.System.setOut(stream)
        return stream

    cluster_port = []

    def shared_cluster():
        """The REST port of a MiniCluster in the gateway JVM, started once (as RestoreDriver)."""
        if not cluster_port:
            mc = jvm.org.apache.flink.runtime.minicluster
            cc = jvm.org.apache.flink.configuration.Configuration()
            cc.setString("rest.bind-port", "0")
            cc.setString("rest.address", "localhost")
            cc.setString("taskmanager.memory.managed.size", "512m")
            if os.environ.get("STATECTL_TMP"):
                cc.setString("io.tmp.dirs", os.environ["STATECTL_TMP"])
            builder = mc.MiniClusterConfiguration.Builder().setConfiguration(cc)
            cluster = mc.MiniCluster(builder.setNumTaskManagers(1).setNumSlotsPerTaskManager(8)
                                     .build())
            cluster.start()
            cluster_port.append(cluster.getRestAddress().get().getPort())
        return cluster_port[0]

    def tasks_all_running(offset):
        """Whether every task of the job started at log offset ``offset`` is RUNNING (restored)."""
        with open(log_file, "rb") as f:
            f.seek(offset)
            text = f.read().decode("utf-8", "replace")
        graph = r"executiongraph\.ExecutionGraph .* switched from "
        scheduled = len(re.findall(graph + "CREATED to SCHEDULED", text))
        initialized = len(re.findall(graph + "INITIALIZING to RUNNING", text))
        return scheduled > 0 and scheduled == initialized

    set_out(os.devnull)
    proto.write("READY\n")
    proto.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        c = parse(line)
        r = {"id": c["id"]}
        start = time.time()
        r["log_from"] = log_size()
        status, job_status, error = "done", "", ""
        submitted = running = first = last = 0
        lines = 0
        client = None
        stream = None
        try:
            stream = set_out(c["out"])
            prefix = c.get("prefix", "k")
            nkeys = int(c.get("nkeys", "100"))
            probes = sorted({0, min(1, nkeys - 1), nkeys // 2, nkeys - 1})
            job_pyds.PREFIX = prefix
            job_pyds.PLEN = len(prefix)
            job_pyds.PROBES = tuple(f"{prefix}{j}" for j in probes)
            job_pyds.PROBE_NUMS = tuple(str(j) for j in probes)
            job_pyds.KEY0 = f"{prefix}0"
            base = c["base"]
            conf = Configuration()
            conf.set_string("state.backend.type", c.get("backend", "hashmap"))
            conf.set_string("execution.checkpointing.incremental", "false")
            conf.set_string("execution.checkpointing.dir", "file://" + base + "/checkpoints")
            conf.set_string("execution.checkpointing.savepoint-dir",
                            "file://" + base + "/savepoints")
            conf.set_string("execution.checkpointing.interval", "1h")
            conf.set_string("execution.checkpointing.externalized-checkpoint-retention",
                            "RETAIN_ON_CANCELLATION")
            conf.set_string("pipeline.max-parallelism", c["max_parallelism"])
            conf.set_string("parallelism.default", c["parallelism"])
            conf.set_string("restart-strategy.type", "none")
            conf.set_string("io.tmp.dirs", base + "/tmp")
            conf.set_string("python.executable", sys.executable)
            conf.set_string("python.client.executable", sys.executable)
            # the Python operators hand their output on after at most this long (default 1 s)
            conf.set_string("python.fn-execution.bundle.time", c.get("bundle_ms", "20"))
            conf.set_string("execution.state-recovery.path", c["restore"])
            if os.environ.get("STATECTL_SHARED_CLUSTER", "true") == "true":
                conf.set_string("execution.target", "remote")
                conf.set_string("rest.address", "localhost")
                conf.set_string("rest.port", str(shared_cluster()))
                env = StreamExecutionEnvironment(
                    jvm.org.apache.flink.streaming.api.environment.StreamExecutionEnvironment(
                        conf._j_configuration))
            else:
                env = StreamExecutionEnvironment.get_execution_environment(conf)
            env.set_parallelism(int(c["parallelism"]))
            env.set_max_parallelism(int(c["max_parallelism"]))
            job_pyds.build(env, base)
            client = env.execute_async(f"restore-pyds-{c['id']}")._j_job_client
            submitted = time.time()
            staged = c.get("staged", "")
            restored = 0
            pattern = re.compile(c["count_regex"], re.M)
            expect = int(c.get("expect", "1"))
            deadline = start + int(c.get("timeout_ms", "120000")) / 1000
            quiet = int(c.get("quiet_ms", "3000")) / 1000
            while True:
                s = client.getJobStatus().get()
                now = time.time()
                if s.name() == "RUNNING" and not running:
                    running = now
                if running and not restored and tasks_all_running(r["log_from"]):
                    restored = now
                    if staged:   # the verification records go in once the job runs (see harness)
                        os.rename(staged, os.path.join(base, "input", "part-1.txt"))
                if s.isGloballyTerminalState():
                    job_status, status = s.name(), "failed"
                    try:
                        client.getJobExecutionResult().get()
                    except Exception as e:      # noqa: BLE001 - the job's failure, reported
                        error = str(e)[-4000:]
                    break
                with open(c["out"], encoding="utf-8", errors="replace") as f:
                    n = len(pattern.findall(f.read()))
                if n > lines:
                    first = first or now
                    last, lines = now, n
                if lines >= expect:
                    break
                # not all lines: give up once every task has restored and nothing came for `quiet`
                if restored and now - max(last, restored) > quiet and (
                        last or now - restored > 3 * quiet):
                    break
                if now > deadline:
                    status = "timeout"
                    break
                time.sleep(0.05)
        except Exception:                        # noqa: BLE001 - reported to the harness
            status, error = "failed", traceback.format_exc()[-4000:]
            job_status = job_status or ("" if client is not None else "FAILED")
        if client is not None and not job_status:
            try:
                client.cancel().get()
                job_status = "CANCELED"
                for _ in range(500):    # the per-job MiniCluster goes away with the job
                    if client.getJobStatus().get().isGloballyTerminalState():
                        break
                    time.sleep(0.02)
            except Exception as e:      # noqa: BLE001 - reported
                job_status = job_status or f"CANCEL FAILED: {e}"
        set_out(os.devnull)
        if stream is not None:
            stream.close()
        ms = lambda t: int(t * 1000)  # noqa: E731
        r.update(status=status, job_status=job_status, lines=lines, start=ms(start),
                 submitted=ms(submitted), running=ms(running), first_line=ms(first),
                 last_line=ms(last), end=ms(time.time()), log_to=log_size(), error=error)
        proto.write("RESULT\t" + "\t".join(f"{k}={escape(v)}" for k, v in r.items()) + "\n")
        proto.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
