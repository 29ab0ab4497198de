"""Throughput of the streaming job against the ceiling of its source, and detection delay.

Measured in one run, on the embedded broker and `local[2]`:
  1. raw read: one confluent-kafka consumer reading the whole topic (the source's ceiling);
  2. source only: the Python data source into a no-op sink (`availableNow`);
  3. source + decode: the same with contract validation (valid events and dead letters split);
  4. full job: source -> decode -> health state -> batch writer, until every record is counted;
  5. detection delay: a live synthetic quorum with a cut-off voter; time from the fault's start
     to the `unreachable` transition reaching the writer (wall clock and quorum clock).
Figures are printed as events/s and as ratios to the raw read rate of the same run.

    python benchmarks/streaming_throughput.py                 # 200 clusters x (3 voters + 2 observers)
    python benchmarks/streaming_throughput.py --quick         # 20 clusters, a smoke run
"""
from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, TopicPartition


def job_config(bootstrap: str, topic: str, checkpoint: Path) -> "JobConfig":  # noqa: F821 - imported lazily
    """The job as measured: the python source from the earliest offset, no outputs but the counts."""
    from streaming.config import JobConfig
    return JobConfig.from_dict({
        "source": {"kind": "python", "bootstrap_servers": bootstrap, "topic": topic, "starting_offsets": "earliest"},
        "job": {"checkpoint_location": str(checkpoint), "trigger_interval_ms": 1000},
        "dead_letters": {"enabled": False}, "sink": {"prometheus": {"mode": "off"}}})


def raw_read_rate(bootstrap: str, topic: str, partitions: int, expected: int) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    n, eof, start = 0, set(), time.perf_counter()
    while n < expected or len(eof) < partitions:
        for m in c.consume(10_000, 1.0):
            if m.error() is None:
                n += 1
            elif m.error().code() == KafkaError._PARTITION_EOF:
                eof.add(m.partition())
    elapsed = time.perf_counter() - start
    c.close()
    return n / elapsed


def timed_available_now(df, checkpoint: Path) -> float:
    start = time.perf_counter()
    q = df.writeStream.format("noop").option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    q.awaitTermination()
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clusters", type=int, default=200)
    ap.add_argument("--voters", type=int, default=3)
    ap.add_argument("--observers", type=int, default=2)
    ap.add_argument("--synthetic-seconds", type=int, default=60, help="synthetic time published for throughput")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--quick", action="store_true", help="20 clusters, 20 s: a smoke run")
    args = ap.parse_args()
    if args.quick:
        args.clusters, args.synthetic_seconds = 20, 20

    from pyspark.sql import functions as F

    from quorum.embedded_broker import EmbeddedBroker
    from quorum.synthetic import Fault, SyntheticConfig, publish
    from streaming.decode import check_records, dead_letters, valid_events
    from streaming.job import start_job
    from streaming.sinks import make_batch_writer
    from streaming.source import open_stream
    from streaming.spark_session import build_spark

    tmp = Path(tempfile.mkdtemp(prefix="streaming-bench-"))
    spark = build_spark(master="local[2]", app_name="streaming-bench")
    spark.sparkContext.setLogLevel("ERROR")
    replicas = args.clusters * (args.voters + args.observers)
    with EmbeddedBroker(log_path=tmp / "broker.log") as broker:
        topic = broker.create_topic("bench-events", args.partitions)
        synthetic = SyntheticConfig(clusters=args.clusters, voters=args.voters, observers=args.observers, seed=3)
        stats, _ = publish(synthetic, broker.bootstrap, topic, duration_ms=args.synthetic_seconds * 1000, speed=0)
        total = stats.records
        print(f"topic: {total} records, {args.clusters} clusters, {replicas} replicas, "
              f"{args.partitions} partitions")

        raw = raw_read_rate(broker.bootstrap, topic, args.partitions, total)
        print(f"raw confluent-kafka read:        {raw:>10,.0f} events/s  (1.00)")

        options = {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic, "startingOffsets": "earliest"}
        elapsed = timed_available_now(open_stream(spark, "python", options), tmp / "cp-source")
        print(f"source only (availableNow):      {total / elapsed:>10,.0f} events/s  ({total / elapsed / raw:.2f})")
        checked = open_stream(spark, "python", options).transform(check_records())
        both = checked.transform(valid_events).select(F.lit(1).alias("v")).unionByName(
            checked.transform(dead_letters).select(F.lit(0).alias("v")))
        elapsed = timed_available_now(both, tmp / "cp-decode")
        print(f"source + decode (availableNow):  {total / elapsed:>10,.0f} events/s  ({total / elapsed / raw:.2f})")

        cfg = job_config(broker.bootstrap, topic, tmp / "cp-job")
        writer = make_batch_writer(cfg.sink, cfg.health)
        start = time.perf_counter()
        job = start_job(spark, cfg, writer)
        first_batch = None
        while writer.monitor.input_records_total < total and time.perf_counter() - start < 1800:
            if first_batch is None and job.health_query.lastProgress is not None:
                first_batch = time.perf_counter()
            time.sleep(0.2)
        elapsed = time.perf_counter() - start
        job.stop()
        print(f"full job (first start to all):   {total / elapsed:>10,.0f} events/s  ({total / elapsed / raw:.2f})"
              f"  [{elapsed:.1f} s incl. start-up]")

        # Detection delay: a live quorum (real-time pace), one voter cut off.
        live_topic = broker.create_topic("bench-live", args.partitions)
        cfg = job_config(broker.bootstrap, live_topic, tmp / "cp-live")
        writer = make_batch_writer(cfg.sink, cfg.health)
        seen: list[tuple[float, dict]] = []
        apply = writer.snapshot.apply

        def keep(rows):
            applied = apply(rows)
            seen.extend((time.time(), e) for e in applied.events)
            return applied
        writer.snapshot.apply = keep
        job = start_job(spark, cfg, writer)
        while job.health_query.lastProgress is None:
            time.sleep(0.2)
        start_ms = int(time.time() * 1000)
        fault = Fault("cutoff", start_ms=5000, duration_ms=15000, cluster=0, replica=2)
        live = SyntheticConfig(clusters=min(args.clusters, 20), voters=args.voters, observers=args.observers,
                               seed=5, start_ms=start_ms, faults=(fault,))
        t = threading.Thread(target=publish, args=(live, broker.bootstrap, live_topic, 25_000, 1.0), daemon=True)
        t.start()
        t.join()
        deadline = time.time() + 30
        flagged = []
        while not flagged and time.time() < deadline:
            flagged = [(w, e) for w, e in seen if e["kind"] == "transition" and e["cluster_id"] == "cluster-0"
                       and e["replica_id"] == 2 and e["status"] == "unreachable"]
            time.sleep(0.2)
        job.stop()
        fault_start = start_ms + fault.start_ms
        if flagged:
            wall, event = flagged[0]
            print(f"detection delay (cutoff -> unreachable): {wall - fault_start / 1000:.1f} s wall, "
                  f"{(event['now_ms'] - fault_start) / 1000:.1f} s quorum clock "
                  f"(threshold {cfg.health.unreachable_after_ms / 1000:.1f} s, trigger "
                  f"{cfg.job.trigger_interval_ms / 1000:.1f} s)")
        else:
            print("detection delay: the cut-off voter was not flagged within 30 s of the run's end")
    spark.stop()


if __name__ == "__main__":
    main()
