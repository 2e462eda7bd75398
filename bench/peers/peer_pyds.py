"""The Python peer of ``statectl build`` (bench/bench_peers.py): a PyFlink DataStream job.

Count and sum per key of CSV records (``key,value`` lines, no header) with Python ``ValueState``
in a ``KeyedProcessFunction``, parallelism ``P``, on the hashmap (heap) state backend. A fair
configuration for PyFlink: ``python.execution-mode: thread`` (the Python functions run inside
the task's JVM thread through PEMJA, no separate Beam worker) and a Python state cache larger than
the number of keys (``python.state.cache-size``: every ``value()`` after a key's first is served
from the cache). The file source is bounded, so the job finishes once every record is processed.

Runs only with PyFlink (``apache-flink``, the Flink venv: ``make flink-venv``), never in the
project's venv. Usage: ``python peer_pyds.py INPUT_DIR PARALLELISM CACHE_SIZE``; one JSON line
on stdout with milliseconds since the epoch at the start, at submission and at the end.
"""

import json
import sys
import time

START_MS = int(time.time() * 1000)

from pyflink.common import Configuration, Types, WatermarkStrategy  # noqa: E402
from pyflink.datastream import (  # noqa: E402
    KeyedProcessFunction,
    RuntimeContext,
    StreamExecutionEnvironment,
)
from pyflink.datastream.connectors.file_system import FileSource, StreamFormat  # noqa: E402
from pyflink.datastream.state import ValueStateDescriptor  # noqa: E402


class CountAndSum(KeyedProcessFunction):
    """Two ``ValueState`` per key, as ``statectl build --agg count --agg sum:value`` keeps."""

    def open(self, runtime_context: RuntimeContext):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))
        self.total = runtime_context.get_state(ValueStateDescriptor("sum_value", Types.LONG()))

    def process_element(self, value, ctx):
        self.count.update((self.count.value() or 0) + 1)
        self.total.update((self.total.value() or 0) + value[1])
        return iter(())  # nothing downstream: the state is the product, as in statectl build


def parse(line):
    key, value = line.split(",")
    return key, int(value)


def main():
    input_dir, parallelism, cache_size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    conf = Configuration()
    conf.set_string("parallelism.default", str(parallelism))
    conf.set_string("pipeline.max-parallelism", "128")
    conf.set_string("state.backend.type", "hashmap")
    conf.set_string("python.execution-mode", "thread")
    conf.set_string("python.state.cache-size", str(cache_size))
    conf.set_string("python.executable", sys.executable)
    conf.set_string("python.client.executable", sys.executable)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    source = FileSource.for_record_stream_format(
        StreamFormat.text_line_format(), input_dir).build()
    lines = env.from_source(source, WatermarkStrategy.no_watermarks(), "csv-source")
    records = lines.map(parse, output_type=Types.TUPLE([Types.STRING(), Types.LONG()]))
    records.key_by(lambda record: record[0], key_type=Types.STRING()) \
        .process(CountAndSum(), output_type=Types.STRING()).name("count-and-sum") \
        .print()
    submit_ms = int(time.time() * 1000)
    result = env.execute("peer-pyds")
    print(json.dumps({"main_start_ms": START_MS, "submit_ms": submit_ms,
                      "end_ms": int(time.time() * 1000),
                      "net_runtime_ms": result.get_net_runtime(),
                      "job_id": str(result.get_job_id())}), flush=True)


if __name__ == "__main__":
    main()
