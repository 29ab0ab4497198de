"""Peak memory of the job catching up on a backlog: one hour of a quorum of 3 voters + 100
observers (about 1.1 million records) waiting on the events topic when the job starts.

Measured in one run, on Apache Kafka (quorum.local_kafka.kafka_broker) and `local[2]`, the full job (source, decoding,
health state, the batch writer) from the earliest offset until every record is counted:
  1. as shipped: `source.max_offsets_per_trigger` 200,000, the processor folding a quorum's
     records 20,000 at a time;
  2. the baseline: no per-trigger limit (the whole backlog in one micro-batch).
Peak resident memory is sampled every 0.2 s from /proc: the largest Python worker (where a
quorum's records are folded in) and the JVM. The bounded run goes first, so the JVM's figure is
not inflated by the baseline's heap.

    python benchmarks/backlog_memory.py [--minutes 60] [--observers 100]
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from process_usage import PeakMemory


def catch_up(spark, bootstrap: str, topic: str, total: int, checkpoint: Path, per_trigger: int | None) -> dict:
    from streaming.config import JobConfig
    from streaming.job import job_batch_writer, start_job
    cfg = JobConfig.from_dict({
        "source": {"bootstrap_servers": bootstrap, "topic": topic, "starting_offsets": "earliest",
                   "max_offsets_per_trigger": per_trigger},
        "job": {"checkpoint_location": str(checkpoint), "trigger_interval_ms": 1000},
        "dead_letters": {"enabled": False}, "sink": {"prometheus": {"mode": "off"}}})
    writer = job_batch_writer(cfg)
    peak = PeakMemory()
    peak.start()
    start = time.perf_counter()
    job = start_job(spark, cfg, writer)
    while writer.monitor.input_records_total < total and time.perf_counter() - start < 3600:
        time.sleep(0.5)
    elapsed = time.perf_counter() - start
    job.stop()
    peak.finish()
    return {"elapsed": elapsed, "python_worker": peak.python_worker, "jvm": peak.jvm,
            "done": writer.monitor.input_records_total >= total}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=int, default=60, help="synthetic time in the backlog")
    ap.add_argument("--observers", type=int, default=100)
    args = ap.parse_args()

    from quorum.local_kafka.kafka_broker import KafkaBroker
    from quorum.synthetic import SyntheticConfig, publish
    from streaming.spark_session import build_spark

    tmp = Path(tempfile.mkdtemp(prefix="backlog-bench-"))
    mib = 1024 * 1024
    with KafkaBroker(log_path=tmp / "broker.log") as broker:
        topic = broker.create_topic("backlog-events", 4)
        synthetic = SyntheticConfig(clusters=1, voters=3, observers=args.observers, seed=11)
        stats, _ = publish(synthetic, broker.bootstrap, topic, duration_ms=args.minutes * 60_000, speed=0)
        total = stats.records
        print(f"backlog: {total:,} records, {args.minutes} min of 1 quorum of 3 voters + {args.observers} observers")
        results = {}
        for name, per_trigger in (("bounded", 200_000), ("baseline", None)):
            spark = build_spark(master="local[2]", app_name=f"backlog-{name}")
            spark.sparkContext.setLogLevel("ERROR")
            results[name] = r = catch_up(spark, broker.bootstrap, topic, total, tmp / f"cp-{name}", per_trigger)
            spark.stop()
            limit = f"{per_trigger:,} per trigger" if per_trigger else "no per-trigger limit"
            print(f"{name:<8} ({limit}): caught up in {r['elapsed']:.0f} s{'' if r['done'] else ' (NOT all read)'}; "
                  f"peak RSS largest Python worker {r['python_worker'] / mib:,.0f} MiB, JVM {r['jvm'] / mib:,.0f} MiB")
        b, base = results["bounded"], results["baseline"]
        print(f"bounded / baseline: Python worker peak {b['python_worker'] / max(1, base['python_worker']):.2f} x, "
              f"time {b['elapsed'] / base['elapsed']:.2f} x")


if __name__ == "__main__":
    main()
