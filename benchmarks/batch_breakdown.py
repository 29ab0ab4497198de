"""Where one micro-batch of the streaming job spends its time, at a small steady input.

Runs the job as `streaming run` does (every output on unless told otherwise) against a paced
synthetic load, and prints the median of each phase Spark reports per batch (`durationMs`:
latestOffset, queryPlanning, addBatch, walCommit, commitOffsets, ...), plus the state operator's
commit time, for the health query. Settings to compare are given as Spark settings:

    python benchmarks/batch_breakdown.py
    python benchmarks/batch_breakdown.py --spark-conf spark.sql.shuffle.partitions=2
    python benchmarks/batch_breakdown.py --no-dead-letters --no-kafka-sink
    python benchmarks/batch_breakdown.py --rules 12    # where query planning's time goes

`--rules N` adds the N analyzer and optimizer rules that took the most time per batch while
measuring (Spark's RuleExecutor metrics, the driver's whole session: the query's re-planning in
every micro-batch and the foreachBatch body's own plans), with how many of their runs changed
the plan: a rule that is costly and never effective is the plan's size at work.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from paced_load import PacedLoad
from process_usage import TreeCpu, cpu_seconds
from streaming_throughput import Pushgateway


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clusters", type=int, default=10)
    ap.add_argument("--rate", type=float, default=300, help="events/s of the load")
    ap.add_argument("--seconds", type=float, default=40, help="how long the load runs")
    ap.add_argument("--warmup-seconds", type=float, default=15, help="batches left out at the start")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--shuffle-partitions", type=int, default=8)
    ap.add_argument("--no-dead-letters", action="store_true")
    ap.add_argument("--no-kafka-sink", action="store_true")
    ap.add_argument("--spark-conf", nargs="*", default=[], metavar="KEY=VALUE")
    ap.add_argument("--rules", type=int, default=0, metavar="N",
                    help="print the N planning rules that took the most time per batch")
    args = ap.parse_args()

    from quorum.embedded_broker import EmbeddedBroker
    from quorum.synthetic import SyntheticConfig
    from quorum.synthetic.command import append_interval_for_rate
    from streaming.config import JobConfig
    from streaming.job import HEALTH_QUERY, start_job
    from streaming.job_logging import spark_conf
    from streaming.spark_session import build_spark

    tmp = Path(tempfile.mkdtemp(prefix="batch-breakdown-"))
    with EmbeddedBroker(log_path=tmp / "broker.log") as broker:
        pushgateway = Pushgateway(tmp)
        try:
            topic = broker.create_topic("events", args.partitions)
            sink = {"prometheus": {"mode": "pushgateway", "pushgateway_url": pushgateway.url, "job": "breakdown"}}
            if not args.no_kafka_sink:
                sink["kafka"] = {"enabled": True, "bootstrap_servers": broker.bootstrap,
                                 "topic": broker.create_topic("health", 1)}
            cfg = JobConfig.from_dict({
                "source": {"kind": "python", "bootstrap_servers": broker.bootstrap, "topic": topic,
                           "starting_offsets": "earliest"},
                "job": {"checkpoint_location": str(tmp / "checkpoint"), "trigger_interval_ms": 1000},
                "dead_letters": {"enabled": not args.no_dead_letters, "path": str(tmp / "dead-letters")},
                "sink": sink})
            spark = build_spark(master=args.master, app_name="batch-breakdown",
                                shuffle_partitions=args.shuffle_partitions,
                                extra_conf=spark_conf(dict(a.split("=", 1) for a in args.spark_conf)))
            spark.sparkContext.setLogLevel("ERROR")
            from streaming.sinks.batch_writer import HealthBatchWriter
            write, writer_ms = HealthBatchWriter.__call__, []

            def timed_write(self, batch_df, batch_id):  # the foreachBatch body's own time
                t0 = time.perf_counter()
                write(self, batch_df, batch_id)
                writer_ms.append(int((time.perf_counter() - t0) * 1000))
            HealthBatchWriter.__call__ = timed_write
            write_rows, sinks_ms = HealthBatchWriter.write_rows, []

            def timed_write_rows(self, *a, **kw):  # the Python side: snapshot and sinks
                t0 = time.perf_counter()
                write_rows(self, *a, **kw)
                sinks_ms.append(int((time.perf_counter() - t0) * 1000))
            HealthBatchWriter.write_rows = timed_write_rows
            job = start_job(spark, cfg)
            interval = append_interval_for_rate(args.rate, args.clusters, 3, 2)
            load = PacedLoad(SyntheticConfig(clusters=args.clusters, voters=3, observers=2, seed=7,
                                             append_interval_ms=interval), args.seconds, broker.bootstrap, topic)
            load.await_encoded()
            tree = TreeCpu(os.getpid(), exclude=lambda: (broker.pid, load.pid, pushgateway.pid))
            while time.time() * 1000 < load.start_ms + args.warmup_seconds * 1000:
                time.sleep(0.05)
            first = job.health_query.lastProgress["batchId"] if job.health_query.lastProgress else 0
            rule_metrics = spark._jvm.org.apache.spark.sql.catalyst.rules.RuleExecutor
            rule_metrics.resetMetrics()
            cpu0, t0 = tree.seconds(), time.perf_counter()
            gateway0 = cpu_seconds(pushgateway.pid)
            result = load.await_done()
            rules = rule_times(rule_metrics.dumpTimeSpent())
            cpu = TreeCpu.used(cpu0, tree.seconds()) / (time.perf_counter() - t0)
            gateway_cpu = (cpu_seconds(pushgateway.pid) - gateway0) / (time.perf_counter() - t0)
            progresses = [p for p in job.health_query.recentProgress if p["batchId"] > first]
            job.stop()
            spark.stop()
        finally:
            pushgateway.stop()

    print(f"{args.master}, {args.shuffle_partitions} state partitions, {result.records:,} records at "
          f"{result.rate:,.0f}/s, dead letters {'off' if args.no_dead_letters else 'on'}, kafka sink "
          f"{'off' if args.no_kafka_sink else 'on'}, {' '.join(args.spark_conf) or 'no extra settings'}")
    phases: dict[str, list[int]] = {}
    for p in progresses:
        for phase, ms in (p.get("durationMs") or {}).items():
            phases.setdefault(phase, []).append(int(ms))
        for op in p.get("stateOperators") or []:
            phases.setdefault("state commit", []).append(int(op.get("commitTimeMs") or 0))
            phases.setdefault("state all updates", []).append(int(op.get("allUpdatesTimeMs") or 0))
    phases["foreachBatch writer"] = writer_ms[-len(progresses):] or [0]
    phases["writer: snapshot, sinks"] = sinks_ms[-len(progresses):] or [0]
    print(f"  {len(progresses)} health batches; job CPU {cpu:.2f} cores; the Pushgateway (same cores) {gateway_cpu:.2f}")
    for phase, values in sorted(phases.items(), key=lambda kv: -statistics.median(kv[1])):
        print(f"  {phase:>20}: median {statistics.median(values):>6.0f} ms, max {max(values):>6} ms")
    rows = [p.get("numInputRows", 0) for p in progresses]
    print(f"  input rows per batch: median {statistics.median(rows) if rows else 0:.0f}")
    print(json.dumps(progresses[-1].get("stateOperators"), indent=None)[:600] if progresses else "")
    if args.rules and progresses:
        batches = len(progresses)
        print(f"  planning rules, {sum(r[1] for r in rules) / batches:.0f} ms a batch in all; the {args.rules} costliest:")
        for name, total_ms, effective_runs, runs in sorted(rules, key=lambda r: -r[1])[:args.rules]:
            print(f"  {name.rsplit('.', 1)[-1]:>44}: {total_ms / batches:6.1f} ms a batch, "
                  f"{effective_runs} of {runs} runs changed the plan")


def rule_times(dump: str) -> list[tuple[str, float, int, int]]:
    """(rule, total ms, effective runs, runs) from RuleExecutor.dumpTimeSpent()'s table."""
    out = []
    for line in dump.splitlines():
        parts = line.split()
        if len(parts) == 7 and parts[2] == "/" and parts[5] == "/" and parts[1].isdigit():
            out.append((parts[0], int(parts[3]) / 1e6, int(parts[4]), int(parts[6])))
    return out


if __name__ == "__main__":
    main()
