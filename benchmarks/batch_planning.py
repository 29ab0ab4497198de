"""What the job's decoding costs the driver every micro-batch, before a single record is read.

Spark plans a streaming query's micro-batch anew each time: the analysed plan, with the batch's
offsets in it, is optimised, planned and compiled again (`IncrementalExecution`), and every
closure of the new RDDs is checked by serialising it. A job that watches one idle quorum pays
this once a second. This script replans the job's input stage (`streaming.decode.route_records`,
the input observation, the processor's packed input, the shuffle by quorum) as Spark does each
micro-batch, on a one-row batch frame with the Kafka source's columns, on `local[1]`, and prints
the driver thread's CPU and allocation per replan for:

  scan (the baseline): the Kafka columns shuffled by key, nothing decoded;
  from_json: the record parsed, typed, by Spark;
  from_json + rules: and the contract's rules checked (`_accepted`);
  the job's input: the whole stage as the job runs it (routing, packing, observation).

Each figure is the median of `--repeats` replans after `--warmup` (the JIT compiles Spark's
planner for a while), with its ratio to the scan. The processor's stage, the state store and
the sinks are not in it: `idle_cost.py` measures the whole idle job.

    .venv/bin/python benchmarks/batch_planning.py
"""
from __future__ import annotations

import argparse
import statistics

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streaming import decode as D
from streaming.health import packed_input
from streaming.job import observe_input
from streaming.spark_session import build_spark

KAFKA_ROW = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp"


def stages(kafka: DataFrame) -> dict[str, DataFrame]:
    text = kafka.withColumn(D.TEXT, F.col("value").cast("string"))
    parsed = text.withColumn(D.RECORD, D.parsed_record())
    checked = parsed.withColumn(D.CHECKED_AT, F.lit(0)).select("key", F.expr(D._accepted(0)).alias(D.ACCEPTED))
    return {"scan": kafka.select("key", "value").repartition(2, "key"),
            "from_json": parsed.select("key", D.RECORD).repartition(2, "key"),
            "from_json + rules": checked.repartition(2, "key"),
            "the job's input": packed_input(observe_input(kafka.transform(D.route_records()))).repartition(2, "cluster_id")}


def replan_cost(spark: SparkSession, frame: DataFrame, warmup: int, repeats: int) -> tuple[float, float]:
    """(driver CPU ms, MB allocated) per replan of `frame`'s analysed plan, medians."""
    jvm = spark._jvm
    threads = jvm.java.lang.management.ManagementFactory.getThreadMXBean()
    # PySpark pins each Python thread to one JVM thread: this one's calls all run on it
    me = jvm.java.lang.Thread.currentThread().getId()
    analysed, session = frame._jdf.queryExecution().analyzed(), frame._jdf.sparkSession()
    cpu, allocated = [], []
    for i in range(warmup + repeats):
        c0, a0 = threads.getThreadCpuTime(me), threads.getThreadAllocatedBytes(me)
        jvm.org.apache.spark.sql.classic.Dataset.ofRows(session, analysed).queryExecution().executedPlan().execute()
        if i >= warmup:
            cpu.append((threads.getThreadCpuTime(me) - c0) / 1e6)
            allocated.append((threads.getThreadAllocatedBytes(me) - a0) / 1e6)
    return statistics.median(cpu), statistics.median(allocated)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--warmup", type=int, default=30, help="replans left out while the JIT compiles the planner")
    ap.add_argument("--repeats", type=int, default=30, help="replans measured")
    a = ap.parse_args()
    spark = build_spark("local[1]", app_name="batch-planning", shuffle_partitions=2)
    spark.sparkContext.setLogLevel("ERROR")
    spark.conf.set("spark.sql.adaptive.enabled", "false")  # as in a streaming query
    kafka = spark.createDataFrame([(b"k", b"{}", "events", 0, 0, None)], KAFKA_ROW)
    base = None
    for name, frame in stages(kafka).items():
        cpu, mb = replan_cost(spark, frame, a.warmup, a.repeats)
        base = base or (cpu, mb)
        print(f"{name:>18}: {cpu:6.1f} ms driver CPU, {mb:5.1f} MB allocated a replan "
              f"({cpu / base[0]:4.1f} x, {mb / base[1]:4.1f} x the scan)", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
