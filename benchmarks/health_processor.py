"""transformWithStateInPandas against the row-based transformWithState, with many keys.

    python benchmarks/health_processor.py [--quorums 4000] [--fetches 24] [--batches 2] [--rounds 1]

Both run the same health processor (streaming/health/processor.py, one key per quorum) in a
streaming query on local[2] with the RocksDB state store: `--batches` micro-batches of
`--fetches` fetch records per quorum each (3 voters), read from Parquet files by the file
source, written to the noop sink, timed until every record went through. The second and later batches read and write every key's state.
Printed: input records per second of each flavour and the ratio pandas / row (the row-based
flavour is the baseline, measured in the same run). `--rounds` repeats the pair, alternating
the order, so a shared machine's noise shows as spread rather than as a bias; both flavours
run once untimed first (the first query of a session pays for JIT and worker start).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from quorum.events import envelope_spark_schema  # noqa: E402
from streaming.health import build_health_stream  # noqa: E402
from streaming.health.config import HealthConfig  # noqa: E402
from streaming.spark_session import build_spark  # noqa: E402

T0 = 1_700_000_000_000


def write_input(spark, path: str, quorums: int, fetches: int, batches: int) -> int:
    """One Parquet file per micro-batch: each quorum's leader (node 1) answering fetches from
    voters 2 and 3, offsets and time moving on."""
    from pyspark.sql import functions as F
    schema = envelope_spark_schema()
    for b in range(batches):
        df = spark.range(quorums * fetches).select(
            (F.col("id") % quorums).alias("q"), (F.col("id") / quorums).cast("long").alias("step"))
        step = F.col("step") + b * fetches
        values = {
            "type": F.lit("fetch"), "version": F.lit(1).cast("long"),
            "cluster_id": F.concat(F.lit("c"), F.col("q").cast("string")), "topic": F.lit("__cluster_metadata"),
            "partition": F.lit(0).cast("long"), "time_ms": (F.lit(T0) + step * 100).cast("long"),
            "leader_id": F.lit(1).cast("long"), "leader_epoch": F.lit(5).cast("long"),
            "replica_id": (F.lit(2) + step % 2).cast("long"), "replica_role": F.lit("voter"),
            "fetch_offset": (F.lit(100) + step).cast("long"), "fetch_epoch": F.lit(5).cast("long"),
            "leader_log_end_offset": (F.lit(100) + step).cast("long"),
            "high_watermark": (F.lit(100) + step).cast("long"), "outcome": F.lit("valid"),
        }
        cols = [values.get(f.name, F.lit(None)).cast(f.dataType).alias(f.name) for f in schema.fields]
        df.select(*cols).coalesce(1).write.mode("append").parquet(path)
    return quorums * fetches * batches


class InputCounter:
    """Counts input rows of finished micro-batches (the job's lean query listener, on the driver)."""

    def __init__(self, spark):
        from streaming.progress_listener import ProgressListener
        self.rows = 0

        def on_progress(p: dict) -> None:
            self.rows += int(p.get("numInputRows") or 0)
        self.listener = ProgressListener(spark, on_progress)


def run(spark, path: str, api: str, checkpoint: str, records: int) -> float:
    """Seconds from start until every input record went through the processor.

    Neither availableNow nor processAllAvailable can end such a query: with processing-time
    timers the operator asks for a (no-data) batch at every trigger. So count input rows of
    finished batches until all are in."""
    counter = InputCounter(spark)
    events = spark.readStream.schema(envelope_spark_schema()).option("maxFilesPerTrigger", 1).parquet(path)
    query = (build_health_stream(events, HealthConfig(), api=api).writeStream.format("noop")
             .outputMode("update").option("checkpointLocation", checkpoint).start())
    started = time.perf_counter()
    try:
        while counter.rows < records:
            if query.exception() is not None:
                raise RuntimeError(f"{api}: {query.exception()}")
            time.sleep(0.05)
        return time.perf_counter() - started
    finally:
        query.stop()
        counter.listener.remove()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quorums", type=int, default=4000, help="keys (one per quorum)")
    parser.add_argument("--fetches", type=int, default=24, help="fetch records per quorum per micro-batch")
    parser.add_argument("--batches", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    spark = build_spark(master="local[2]", app_name="health-processor-benchmark", shuffle_partitions=2)
    spark.sparkContext.setLogLevel("ERROR")
    work = tempfile.mkdtemp(prefix="health-bench-")
    records = write_input(spark, f"{work}/input", args.quorums, args.fetches, args.batches)
    print(f"{args.quorums} keys, {records} input records in {args.batches} micro-batches, local[2], RocksDB state", flush=True)
    # Warm-up, not timed: the first query of a session pays for JIT and Python worker start.
    warm = write_input(spark, f"{work}/warm-up", 50, 4, 1)
    for api in ("row", "pandas"):
        run(spark, f"{work}/warm-up", api, f"{work}/checkpoint-warm-up-{api}", warm)
    rates: dict[str, list[float]] = {"pandas": [], "row": []}
    for r in range(args.rounds):
        for api in (("row", "pandas") if r % 2 == 0 else ("pandas", "row")):
            seconds = run(spark, f"{work}/input", api, f"{work}/checkpoint-{api}-{r}", records)
            rates[api].append(records / seconds)
            print(f"  round {r + 1} {api:>6}: {seconds:6.1f} s  {records / seconds:9,.0f} records/s  "
                  f"{args.quorums * args.batches / seconds:8,.0f} key-batches/s", flush=True)
    best = {api: max(v) for api, v in rates.items()}
    print(f"transformWithStateInPandas: {best['pandas']:,.0f} records/s (best of {args.rounds})")
    print(f"transformWithState (rows):  {best['row']:,.0f} records/s (best of {args.rounds}, baseline)")
    print(f"ratio pandas / row: {best['pandas'] / best['row']:.2f}")
    spark.stop()


if __name__ == "__main__":
    main()
