"""The Spark engine on a real standalone cluster: a master and a worker on 127.0.0.1 (issue 32).

Started with pyspark's own ``spark-class`` (``SPARK_LOCAL_IP=127.0.0.1``); the executor runs in
the worker's own directory (``work/app-.../0``), so an input given as a relative path must reach
it absolute. ``build``, ``rescale`` (a max-parallelism change: rows cross the cluster's
shuffle) and ``export`` run on it from a working directory of relative paths, and give what
the local engine gives; Spark's own output (its log4j lines, native-library warnings, stage
progress bars) stays off statectl's stdout and stderr.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from s3_server import free_ports

REPO = Path(__file__).resolve().parent.parent
EVENTS = REPO / "docs" / "examples" / "events.csv"
#: What Spark prints itself and statectl must keep off its output.
SPARK_NOISE = ("log4j", "Setting default log level", "NativeCodeLoader", "[Stage", "WARN",
               "INFO", "incubator")


def _spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``spark://127.0.0.1:PORT`` of a master with one registered worker (2 cores)."""
    base = tmp_path_factory.mktemp("spark-cluster")
    master_port, master_ui, worker_ui = free_ports(3)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
           "SPARK_HOME": str(_spark_class().parent.parent), "SPARK_LOG_DIR": str(base)}
    url = f"spark://127.0.0.1:{master_port}"
    logs = {name: open(base / f"{name}.log", "w") for name in ("master", "worker")}  # noqa: SIM115
    processes = [subprocess.Popen(
        [str(_spark_class()), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
         "--port", str(master_port), "--webui-port", str(master_ui)],
        env=env, stdout=logs["master"], stderr=subprocess.STDOUT, start_new_session=True)]
    try:
        deadline = time.monotonic() + 120
        while "I have been elected leader" not in (base / "master.log").read_text():
            if time.monotonic() > deadline or processes[0].poll() is not None:
                pytest.fail(f"the Spark master did not start:\n{(base / 'master.log').read_text()}")
            time.sleep(0.5)
        processes.append(subprocess.Popen(
            [str(_spark_class()), "org.apache.spark.deploy.worker.Worker", url, "--cores", "2",
             "--memory", "2g", "--work-dir", str(base / "work"), "--webui-port", str(worker_ui)],
            env=env, stdout=logs["worker"], stderr=subprocess.STDOUT, start_new_session=True))
        while "Registering worker" not in (base / "master.log").read_text():
            if time.monotonic() > deadline or processes[1].poll() is not None:
                pytest.fail(f"the Spark worker did not register:\n"
                            f"{(base / 'worker.log').read_text()}")
            time.sleep(0.5)
        yield url
    finally:
        for process in reversed(processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        for log in logs.values():
            log.close()


def _statectl(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    return subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, check=False, timeout=600)


def _quiet(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, (done.stdout, done.stderr)
    for noise in SPARK_NOISE:
        assert noise not in done.stdout + done.stderr, (noise, done.stdout, done.stderr)


def _tables(directory: Path) -> dict[str, list[dict[str, object]]]:
    """Every exported table's rows, sorted: a file, or (Spark's) a directory of parts."""
    out = {}
    for path in sorted(directory.rglob("*.parquet")):
        if path.parent.suffix == ".parquet":
            continue  # a part: read with its directory
        out[str(path.relative_to(directory))] = sorted(pq.read_table(path).to_pylist(), key=repr)
    return out


def test_build_rescale_and_export_on_a_standalone_cluster_equal_the_local_engine(
        cluster: str, tmp_path: Path) -> None:
    (tmp_path / "events.csv").write_bytes(EVENTS.read_bytes())
    spark = ("--engine", "spark", "--spark-master", cluster)
    build = ("build", "events.csv", "--key", "user", "--agg", "count", "--agg", "sum:amount",
             "--agg", "list:page", "--parallelism", "2")
    on_cluster = _statectl(tmp_path, *build, "--checkpoint-dir", "cluster", *spark)
    _quiet(on_cluster)
    assert "processed 3,000 of 3,000 records" in on_cluster.stdout
    local = _statectl(tmp_path, *build, "--checkpoint-dir", "local")
    assert local.returncode == 0, local.stderr
    same = _statectl(tmp_path, "diff", "cluster/chk-0000001", "local/chk-0000001")
    assert same.returncode == 0 and "hold the same state" in same.stdout, same.stdout

    rescale = ("rescale", "cluster/chk-0000001", "-p", "3", "--max-parallelism", "256")
    _quiet(_statectl(tmp_path, *rescale, "--out", "rescaled-cluster", *spark))
    assert _statectl(tmp_path, *rescale, "--out", "rescaled-local").returncode == 0
    for other in ("rescaled-local", "local/chk-0000001"):
        same = _statectl(tmp_path, "diff", "rescaled-cluster", other)
        assert same.returncode == 0 and "hold the same state" in same.stdout, same.stdout
    verified = _statectl(tmp_path, "verify", "rescaled-cluster")
    assert verified.returncode == 0, verified.stdout

    _quiet(_statectl(tmp_path, "export", "rescaled-cluster", "--out", "export-cluster", *spark))
    assert _statectl(tmp_path, "export", "rescaled-local", "--out",
                     "export-local").returncode == 0
    cluster_tables = _tables(tmp_path / "export-cluster")
    local_tables = _tables(tmp_path / "export-local")
    assert cluster_tables and cluster_tables == local_tables
