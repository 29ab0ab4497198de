"""Where the streaming job's input time goes, by stage: Spark's Kafka source alone, then the
source with the job's decoding, each draining the same backlog into Spark's `noop` sink with an
`availableNow` trigger on `local[2]`, start-up included.

Baseline: a raw read of the same workload's records by one confluent-kafka consumer, in the same
run; each stage's rate is printed against it:
  drain stages (N records, local[2], start-up included):
    source only:     R events/s  (X x raw)
    source + decode: R events/s  (X x raw)

The backlog is `--drain-seconds` of the synthetic workload (`--clusters` clusters x 3 voters + 2
observers) published as fast as it goes. A drain times a backlog, not a live input: the job's
sustained rate is `job_throughput.py`'s, its input stages' live ceiling `input_ceiling.py`'s.

How long: a few minutes (the broker's and Spark's start, the raw read of 20 s of records, the
backlog published, two drains); `--quick` drains 10 s of records.

    python benchmarks/drain_stages.py
    python benchmarks/drain_stages.py --quick
"""
from __future__ import annotations

import time
from pathlib import Path

from streaming_bench import environment, job_session, parse, parser


def drain_stages(spark, broker, args, tmp: Path, raw: float) -> None:
    """Each stage draining a backlog of the same workload."""
    from pyspark.sql import functions as F

    from quorum.synthetic import SyntheticConfig, publish
    from streaming.decode import route_records
    from streaming.source import open_stream

    def timed(df, checkpoint: Path) -> float:
        start = time.perf_counter()
        q = (df.writeStream.format("noop").option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
        q.awaitTermination()
        return time.perf_counter() - start

    topic = broker.create_topic("bench-drain", args.partitions)
    synthetic = SyntheticConfig(clusters=args.clusters, voters=args.voters, observers=args.observers, seed=3)
    total = publish(synthetic, broker.bootstrap, topic, duration_ms=args.drain_seconds * 1000, speed=0)[0].records
    options = {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic, "startingOffsets": "earliest"}
    print(f"drain stages ({total:,} records, local[2], start-up included):")
    elapsed = timed(open_stream(spark, options), tmp / "cp-source")
    print(f"  source only:     {total / elapsed:>10,.0f} events/s  ({total / elapsed / raw:.3f} x raw)")
    routed = open_stream(spark, options).transform(route_records())
    elapsed = timed(routed.select(F.length("record_json").alias("n")), tmp / "cp-decode")
    print(f"  source + decode: {total / elapsed:>10,.0f} events/s  ({total / elapsed / raw:.3f} x raw)", flush=True)


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--drain-seconds", type=int, default=60, help="synthetic seconds in the drain backlog")
    ap.add_argument("--quick", action="store_true", help="10 s of records in the backlog: a smoke run")
    args = parse(ap)
    if args.quick:
        args.drain_seconds = 10
    with environment(args, f"a backlog of {args.drain_seconds} s drained") as (bench, raw):
        spark = job_session(args, "local[2]")
        drain_stages(spark, bench.broker, args, bench.tmp, raw)
        spark.stop()


if __name__ == "__main__":
    main()
