"""Events per second the whole job sustains on a Spark standalone cluster with one and with two
workers, against the same job on `local[2]` in the same run.

A backlog of synthetic quorums is published once to the embedded broker; each run drains it from
the earliest offset with a new checkpoint (the python source, the health stage, the batch writer
with its outputs off). The rate is the records read over the wall time from the start of the
first batch with input to the end of the last one, from the health query's progress
(`numInputRows`, `timestamp`, `durationMs.triggerExecution`). The cluster is
`deploy/cluster/standalone.py`: a master and N workers of `--cores` cores each, their own JVMs on
loopback; the driver runs in this process (client mode, as spark-submit runs it on a
standalone master).

    python benchmarks/cluster_throughput.py [--clusters 100] [--synthetic-seconds 60] [--cores 1]
"""
from __future__ import annotations

import argparse
import datetime
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # deploy/ is a plain directory


def drain_rate(spark, broker, topic: str, records: int, checkpoint: Path) -> tuple[float, int]:
    from streaming.config import JobConfig
    from streaming.job import start_job
    cfg = JobConfig.from_dict({
        "source": {"kind": "python", "bootstrap_servers": broker.bootstrap, "topic": topic,
                   "starting_offsets": "earliest", "max_offsets_per_trigger": 20_000},
        "job": {"checkpoint_location": str(checkpoint), "trigger_interval_ms": 1},
        "dead_letters": {"enabled": False}, "sink": {"prometheus": {"mode": "off"}}})
    job = start_job(spark, cfg)
    try:
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            batches = [p for p in job.health_query.recentProgress if p["numInputRows"] > 0]
            if sum(p["numInputRows"] for p in batches) >= records:
                break
            if job.health_query.exception() is not None:
                raise job.health_query.exception()
            time.sleep(0.5)
        else:
            raise TimeoutError("the backlog was not drained in 15 minutes")
    finally:
        job.stop()

    def started(p) -> float:
        return datetime.datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()
    wall = started(batches[-1]) + batches[-1]["durationMs"]["triggerExecution"] / 1000 - started(batches[0])
    return records / wall, len(batches)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clusters", type=int, default=100)
    ap.add_argument("--synthetic-seconds", type=int, default=60)
    ap.add_argument("--partitions", type=int, default=4, help="partitions of the events topic")
    ap.add_argument("--cores", type=int, default=1, help="cores per worker")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stop the cluster, broker and Spark on the way out

    from deploy.cluster.standalone import StandaloneCluster
    from quorum.embedded_broker import EmbeddedBroker
    from quorum.synthetic import SyntheticConfig, publish
    from streaming.spark_session import build_spark

    tmp = Path(tempfile.mkdtemp(prefix="cluster-throughput-"))
    loopback = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                "spark.executor.memory": "768m", "spark.ui.showConsoleProgress": "false",
                "spark.sql.streaming.numRecentProgressUpdates": "10000"}
    with EmbeddedBroker(log_path=tmp / "broker.log") as broker:
        topic = broker.create_topic("events", args.partitions)
        synthetic = SyntheticConfig(clusters=args.clusters, voters=3, observers=1, seed=7,
                                    start_ms=int(time.time() * 1000))
        stats, _ = publish(synthetic, broker.bootstrap, topic, duration_ms=args.synthetic_seconds * 1000, speed=0)
        print(f"backlog: {stats.records} records from {args.clusters} quorums, topic of {args.partitions} partitions",
              flush=True)
        rates = {}
        spark = build_spark(master="local[2]", app_name="cluster-throughput", extra_conf=loopback)
        spark.sparkContext.setLogLevel("ERROR")
        rates["local[2]"], n = drain_rate(spark, broker, topic, stats.records, tmp / "checkpoint-local")
        spark.stop()
        print(f"local[2]: {rates['local[2]']:,.0f} events/s ({n} batches)", flush=True)
        for workers in args.workers:
            with StandaloneCluster(tmp / f"cluster-{workers}", workers=workers, cores_per_worker=args.cores,
                                   memory_per_worker="1g") as cluster:
                spark = build_spark(master=cluster.url, app_name="cluster-throughput", extra_conf=loopback)
                spark.sparkContext.setLogLevel("ERROR")
                name = f"{workers} worker{'s' if workers > 1 else ''} x {args.cores} core"
                rates[name], n = drain_rate(spark, broker, topic, stats.records, tmp / f"checkpoint-{workers}")
                spark.stop()
            print(f"{name}: {rates[name]:,.0f} events/s ({n} batches)", flush=True)
    base = rates["local[2]"]
    print("\nagainst local[2] in the same run:")
    for name, rate in rates.items():
        print(f"  {name:22s} {rate:8,.0f} events/s  {rate / base:4.2f}x")


if __name__ == "__main__":
    main()
