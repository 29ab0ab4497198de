"""What the job's read tasks spend on each record: decoding, checking, routing and packing it.

Every record the job reads goes through its input stage in the JVM (`streaming.decode.
route_records`, the input observation, the processor's packed input, the shuffle by quorum)
before the health state sees it, so this stage's cost per record bounds the rate a core can
read at, whatever the health stage does. The script runs the stages of `batch_planning.py` over
the same records, the synthetic quorums' own (`quorum.synthetic`, 200 quorums of 3 voters and
2 observers: fetches, metrics and the rest), cached in memory with the Kafka source's columns,
into Spark's `noop` sink on `local[1]`, and prints the CPU per record of the tasks' threads
(and of the whole JVM beside it) for:

  scan (the baseline): the Kafka columns shuffled by key, nothing decoded;
  from_json: the record parsed, typed, by Spark;
  from_json + rules: and the contract's rules checked (`_accepted`);
  the job's input: the whole stage as the job runs it (routing, packing, observation).

Each figure is the median of `--repeats` runs after `--warmup` (the JIT compiles the stage's
code meanwhile), with its ratio to the scan. Kafka itself is not in it (the records are read
from memory): `input_ceiling.py` measures the connector with it.

    .venv/bin/python benchmarks/decode_cost.py
"""
from __future__ import annotations

import argparse
import statistics

from pyspark.sql import DataFrame, SparkSession

from batch_planning import KAFKA_ROW, stages
from process_usage import cpu_seconds, thread_cpu_seconds
from streaming.spark_session import build_spark


def synthetic_records(quorums: int, records: int) -> list[tuple]:
    """The synthetic quorums' first `records` records, as rows of the Kafka source's columns."""
    from quorum.synthetic import SyntheticConfig, SyntheticQuorum
    cfg = SyntheticConfig(clusters=quorums, voters=3, observers=2, seed=7, start_ms=1_790_000_000_000)
    rows = []
    for offset, (key, value, _) in enumerate(SyntheticQuorum(cfg).events_until(cfg.start_ms + 3_600_000)):
        rows.append((key, value, "events", 0, offset, None))
        if len(rows) == records:
            break
    return rows


# Linux keeps the first 15 characters of a thread's name: "Executor task launch worker ..."
TASK_THREADS = "Executor task"


def run_cost(spark: SparkSession, frame: DataFrame, records: int, warmup: int, repeats: int) -> tuple[float, float]:
    """(the tasks' CPU, the whole JVM's CPU) in us per record for one run of `frame` into the
    noop sink, medians. The JVM's figure adds the driver's planning, the JIT and the GC."""
    jvm = spark.sparkContext._gateway.proc.pid
    tasks, whole = [], []
    for i in range(warmup + repeats):
        t0, j0 = thread_cpu_seconds(jvm, TASK_THREADS), cpu_seconds(jvm)
        frame.write.format("noop").mode("overwrite").save()
        if i >= warmup:
            tasks.append((thread_cpu_seconds(jvm, TASK_THREADS) - t0) * 1e6 / records)
            whole.append((cpu_seconds(jvm) - j0) * 1e6 / records)
    return statistics.median(tasks), statistics.median(whole)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=150_000, help="records in the batch")
    ap.add_argument("--quorums", type=int, default=200, help="synthetic quorums the records come from")
    ap.add_argument("--warmup", type=int, default=5, help="runs left out while the JIT compiles")
    ap.add_argument("--repeats", type=int, default=7, help="runs measured")
    a = ap.parse_args()
    rows = synthetic_records(a.quorums, a.records)
    spark = build_spark("local[1]", app_name="decode-cost", shuffle_partitions=2,
                        extra_conf={"spark.ui.showConsoleProgress": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    spark.conf.set("spark.sql.adaptive.enabled", "false")  # as in a streaming query
    kafka = spark.createDataFrame(rows, KAFKA_ROW).cache()
    kafka.count()
    print(f"{len(rows):,} records of {a.quorums} synthetic quorums, local[1], CPU per record:", flush=True)
    base = None
    for name, frame in stages(kafka).items():
        tasks, whole = run_cost(spark, frame, len(rows), a.warmup, a.repeats)
        base = base or tasks
        print(f"{name:>18}: tasks {tasks:5.1f} us ({tasks / base:4.1f} x the scan), JVM {whole:5.1f} us; "
              f"a core's tasks: {1e6 / tasks:,.0f} records/s", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
