"""Per-micro-batch cost of the number of state partitions (`spark.shuffle_partitions`), on `local[2]`
with a small input: the choice of the default.

Every partition of the health stage's state store is opened, committed and snapshotted on every
micro-batch, whether or not a quorum of it had input, so more partitions cost a fixed amount per
batch; fewer partitions bound the stage's parallelism forever (the number is frozen into the
checkpoint). One backlog of a few quorums is published once; the whole job then drains it in
small batches (`max_offsets_per_trigger`) with 2, 8, 16 and 32 state partitions, each with a new
checkpoint. Printed: the median batch duration (Spark's `triggerExecution`), its ratio to the
2-partition run of the same process, and the median extra milliseconds per partition.

    python benchmarks/state_partitions.py [--partitions 2 8 16 32] [--clusters 10] [--batch 300]
"""
from __future__ import annotations

import argparse
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

WARMUP_BATCHES = 3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, nargs="+", default=[2, 8, 16, 32])
    ap.add_argument("--clusters", type=int, default=10)
    ap.add_argument("--batch", type=int, default=300, help="records per micro-batch")
    ap.add_argument("--batches", type=int, default=12, help="batches measured per run, after the warm-up")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stop the broker and Spark on the way out

    from quorum.embedded_broker import EmbeddedBroker
    from quorum.synthetic import SyntheticConfig, publish
    from streaming.config import JobConfig
    from streaming.job import start_job
    from streaming.spark_session import build_spark

    tmp = Path(tempfile.mkdtemp(prefix="state-partitions-bench-"))
    with EmbeddedBroker(log_path=tmp / "broker.log") as broker:
        topic = broker.create_topic("events", 4)
        synthetic = SyntheticConfig(clusters=args.clusters, voters=3, observers=1, seed=3,
                                    start_ms=int(time.time() * 1000))
        needed = WARMUP_BATCHES + args.batches
        # a quorum of 3 voters + 1 observer publishes about 10 records per synthetic second
        seconds = 2 * needed * args.batch // (10 * args.clusters) + 1
        stats, _ = publish(synthetic, broker.bootstrap, topic, duration_ms=seconds * 1000, speed=0)
        if stats.records < needed * args.batch:
            raise SystemExit(f"backlog of {stats.records} records is too small for {needed} batches")
        print(f"backlog: {stats.records} records, {args.clusters} quorums; {args.batch} records per batch")
        spark = build_spark(master="local[2]", app_name="state-partitions-bench",
                            extra_conf={"spark.ui.showConsoleProgress": "false"})
        spark.sparkContext.setLogLevel("ERROR")
        spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "10000")
        results = {}
        for partitions in args.partitions:
            spark.conf.set("spark.sql.shuffle.partitions", str(partitions))  # a new checkpoint takes it
            cfg = JobConfig.from_dict({
                "spark": {"shuffle_partitions": partitions},
                "source": {"kind": "python", "bootstrap_servers": broker.bootstrap, "topic": topic,
                           "starting_offsets": "earliest", "max_offsets_per_trigger": args.batch},
                "job": {"checkpoint_location": str(tmp / f"checkpoint-{partitions}"), "trigger_interval_ms": 1},
                "dead_letters": {"enabled": False}, "sink": {"prometheus": {"mode": "off"}}})
            job = start_job(spark, cfg)
            try:
                deadline = time.monotonic() + 600
                while time.monotonic() < deadline:
                    with_input = [p for p in job.health_query.recentProgress if p["numInputRows"] > 0]
                    if len(with_input) >= needed:
                        break
                    time.sleep(0.5)
            finally:
                job.stop()
            durations = [p["durationMs"]["triggerExecution"] for p in with_input[WARMUP_BATCHES:needed]]
            results[partitions] = statistics.median(durations)
            print(f"{partitions:3d} state partitions: median batch {results[partitions]:6.0f} ms "
                  f"(min {min(durations):.0f}, max {max(durations):.0f}, {len(durations)} batches)", flush=True)
        spark.stop()

    base_n = args.partitions[0]
    base = results[base_n]
    print(f"\nagainst {base_n} partitions in the same run:")
    for partitions, median in results.items():
        extra = (median - base) / (partitions - base_n) if partitions != base_n else 0.0
        print(f"{partitions:3d}: {median / base:4.2f}x the batch time, {extra:+5.1f} ms per extra partition")


if __name__ == "__main__":
    main()
