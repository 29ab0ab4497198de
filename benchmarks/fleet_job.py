"""The streaming job watching a fleet: what a batch costs as the number of quorums grows.

The input is collector-shaped (`collector_load.py`): every second each quorum gives one
`quorum_snapshot` and one `metrics` record per node (3 voters), made from the synthetic fleet
model and published live by the raw producer in a process of its own. The job runs as in
production with every output on (dead letters, the Kafka health topic, Prometheus as an
exporter the driver serves; the Pushgateway's whole-group PUT is no path for a fleet), with
the state partitions `auto` gives a new checkpoint on `--master` for that fleet, on a fresh
Spark session, topic and checkpoint per size. After `--warmup-seconds` it measures, for
`--seconds`, at each of `--sizes`:

  - the micro-batches' durations (p50, p99, the longest) and the health state's part of them
    (`state_time_ms`: its partitions summed);
  - the job's CPU (JVM, Python workers, the driver's Python) per wall second, and from the
    smallest and the largest size the marginal CPU per quorum per second;
  - the driver's CPU per batch (this process: the batch writer and the outputs; the exporter's
    renders and this benchmark's memory sampler apart);
  - the state written per batch: the files the checkpoint's state store wrote in the window
    (RocksDB's changelog files, its snapshots apart), and per quorum per second;
  - the exporter's render time: its /metrics rendered as a scrape renders it (on the driver,
    with the GIL the batch writer also needs) every `--scrape-every` seconds, wall and CPU;
  - the peak memory: the job's processes' proportional set sizes summed (a page shared by a
    forked Python worker and its daemon counts once), where it went, and their RSS summed;
  - the CPU the load generator took, and how late it ever fell behind its schedule;
  - a cut-off voter's detection time: a follower of one quorum is cut off a third of the way into
    the window (its fetch times stand still in the leader's answer, its exporter stops
    answering), timed from then to its `unreachable` transition reaching the batch writer.

Then one line per target (`goals.py`), `goal NAME: ... : holds|short|not measured`.

    python benchmarks/fleet_job.py                   # 200 and 2,000 quorums, 90 s warm-up, 60 s each
    python benchmarks/fleet_job.py --quick           # 20 and 100 quorums, short runs: a smoke run
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from collector_load import CollectorLoad
from fleet_readings import percentile
from goals import MB, Goal
from paced_load import LoadResult
from process_usage import PeakMemory, TreeCpu, cpu_seconds, task_cpu_seconds
from streaming_bench import DEFAULT_TRIGGER_MS, Batch, Bench, stop_after_input

CHANGELOG_SUFFIXES = (".changelog", ".delta")  # RocksDB's changelog checkpointing; the HDFS store's deltas


@dataclass
class FleetRun:
    quorums: int
    partitions: int
    seconds: float = 0.0
    batches: list[Batch] = field(default_factory=list)  # the judged ones
    job_cpu_s: float = 0.0
    driver_cpu_s: float = 0.0
    changelog_bytes: int = 0
    snapshot_bytes: int = 0
    scrapes_ms: list[float] = field(default_factory=list)  # each render's wall time
    render_cpu_s: float = 0.0  # the renders' CPU, all together (not in `driver_cpu_s`)
    series: int = 0
    scrape_failures: list[str] = field(default_factory=list)
    peak_rss: int = 0
    peak_pss: int = 0
    memory_parts: str = ""
    load: LoadResult | None = None  # the generator's: its records, CPU and lateness over the whole run
    detection_s: float | None = None  # from the voter's cut-off to its `unreachable` transition

    @property
    def cpu(self) -> float:
        """The job's CPU seconds per wall second."""
        return self.job_cpu_s / self.seconds

    def duration(self, q: float) -> float | None:
        return percentile([b.duration_ms for b in self.batches], q)

    @property
    def driver_ms_per_batch(self) -> float | None:
        return 1000 * self.driver_cpu_s / len(self.batches) if self.batches else None

    @property
    def state_bytes_per_batch(self) -> float | None:
        return self.changelog_bytes / len(self.batches) if self.batches else None

    @property
    def state_bytes_per_quorum_s(self) -> float:
        return self.changelog_bytes / self.quorums / self.seconds

    def report(self) -> str:
        durations = [b.duration_ms for b in self.batches]
        state = percentile([b.state_ms for b in self.batches], 50)
        scrape = percentile(self.scrapes_ms, 50)
        failed = f", {len(self.scrape_failures)} failed ({self.scrape_failures[0]})" if self.scrape_failures else ""
        load = self.load or LoadResult(0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0)
        return (f"{self.quorums} quorums ({self.partitions} state partition(s), {load.rate:,.0f} records/s in):\n"
                f"    batches: {len(durations)} judged, p50 {self.duration(50) or 0:.0f} ms, p99 "
                f"{self.duration(99) or 0:.0f} ms, longest {max(durations, default=0)} ms; health state p50 "
                f"{state or 0:.0f} ms (its partitions summed)\n"
                f"    job CPU {self.cpu:.2f} CPU s per s; driver CPU {self.driver_ms_per_batch or 0:.1f} ms per batch\n"
                f"    state written: {self.state_bytes_per_batch or 0:,.0f} bytes of changelog per batch "
                f"({self.state_bytes_per_quorum_s:,.0f} per quorum per s), snapshots {self.snapshot_bytes:,} bytes "
                f"in the window\n"
                f"    exporter: {self.series:,} series, render p50 {scrape or 0:.0f} ms, longest "
                f"{max(self.scrapes_ms, default=0):.0f} ms over {len(self.scrapes_ms)} renders, "
                f"{1000 * self.render_cpu_s / max(len(self.scrapes_ms), 1):.0f} ms CPU each{failed}\n"
                f"    detection of a cut-off voter: "
                f"{'not flagged' if self.detection_s is None else f'{self.detection_s:.1f} s'}\n"
                f"    peak memory {self.peak_pss / MB:,.0f} MB ({self.memory_parts}; RSS summed "
                f"{self.peak_rss / MB:,.0f} MB); load generator CPU "
                f"{load.publish_cpu_s / load.publish_wall_s:.2f} cores, at most {load.max_late_ms:.0f} ms late")


def state_files(checkpoint: Path) -> dict[Path, int]:
    """Every file of the query's state store, with its size."""
    out = {}
    for root, _, files in os.walk(checkpoint / "state"):
        for name in files:
            path = Path(root) / name
            try:
                out[path] = path.stat().st_size
            except OSError:  # removed by the store's maintenance meanwhile
                pass
    return out


def written_between(before: dict[Path, int], after: dict[Path, int]) -> tuple[int, int]:
    """Bytes of the state files new (or grown) between two listings: (changelogs, the rest)."""
    changelog = other = 0
    for path, size in after.items():
        grown = size - before.get(path, 0)
        if grown <= 0:
            continue
        if path.name.endswith(CHANGELOG_SUFFIXES):
            changelog += grown
        elif not path.name.startswith(".") and not path.name.endswith(".crc"):
            other += grown
    return changelog, other


def scrape(collector) -> tuple[float, float, int]:
    """The exporter's /metrics rendered as a Prometheus scrape renders it (OpenMetrics, which
    Prometheus asks for first, from the collector's kept text): wall time (ms), this thread's CPU
    (s) and the series served."""
    t0, cpu0 = time.perf_counter(), time.thread_time()
    text = collector.exposition(openmetrics=True)
    elapsed, cpu = (time.perf_counter() - t0) * 1000, time.thread_time() - cpu0
    return elapsed, cpu, sum(1 for line in text.splitlines() if line and not line.startswith(b"#"))


class FleetBench(Bench):
    """`job_throughput.py`'s job, with Prometheus served by the driver (port chosen free)."""

    def prometheus_sink(self) -> dict:
        return {"mode": "exporter", "exporter_host": "127.0.0.1", "exporter_port": 0}

    def job_config(self, topic: str):
        """The job's config, with quorum rows as docs/deployment.md sets them for a fleet."""
        import dataclasses
        cfg = super().job_config(topic)
        health = dataclasses.replace(cfg.health, quorum_row_refresh_ms=self.args.quorum_row_refresh_ms)
        return dataclasses.replace(cfg, health=health)

    def run(self, quorums: int) -> FleetRun:
        from streaming.config import JobConfig
        from streaming.job_logging import spark_conf
        from streaming.spark_session import build_spark
        a = self.args
        partitions = JobConfig().spark.state_partitions(a.master, quorums)
        spark = build_spark(master=a.master, app_name=f"fleet-bench-{quorums}", shuffle_partitions=partitions,
                            extra_conf=spark_conf(a.spark_settings))
        spark.sparkContext.setLogLevel("ERROR")
        try:
            return self._measure(spark, quorums, partitions)
        finally:
            spark.stop()

    def _measure(self, spark, quorums: int, partitions: int) -> FleetRun:
        a = self.args
        run = FleetRun(quorums, partitions)
        topic = self.broker.create_topic(f"fleet-{quorums}", a.partitions)
        cfg, job, batches, transitions, recorder = self.start(spark, topic)
        collector = job.writer.prometheus.collector
        checkpoint = Path(cfg.job.checkpoint_location) / "health"
        load = CollectorLoad(quorums, a.warmup_seconds + a.seconds, self.broker.bootstrap, topic,
                             cut_off_after_s=a.warmup_seconds + a.seconds / 3)
        tree = TreeCpu(os.getpid(), exclude=lambda: (self.broker.pid, load.pid))
        while time.time() * 1000 < load.start_ms + a.warmup_seconds * 1000:
            time.sleep(0.05)
        t0, cpu0, driver0 = time.time(), tree.seconds(), cpu_seconds(os.getpid())
        files0 = state_files(checkpoint)
        peak = PeakMemory(tree, interval_s=0.5, proportional=True)
        peak.start()
        end = load.start_ms / 1000 + a.warmup_seconds + a.seconds
        next_scrape = t0 + a.scrape_every / 2
        while time.time() < end:
            if time.time() >= next_scrape:
                try:
                    elapsed, cpu, run.series = scrape(collector)
                    run.scrapes_ms.append(elapsed)
                    run.render_cpu_s += cpu
                except Exception as e:  # noqa: BLE001 - a failed render is a figure, not the end of the run
                    run.scrape_failures.append(repr(e))
                next_scrape += a.scrape_every
            time.sleep(0.05)
        t1, cpu1, driver1 = time.time(), tree.seconds(), cpu_seconds(os.getpid())
        sampler_s = task_cpu_seconds(os.getpid(), peak.native_id)  # its whole life: the window
        run.changelog_bytes, run.snapshot_bytes = written_between(files0, state_files(checkpoint))
        peak.finish()
        run.peak_rss, run.peak_pss, run.memory_parts = peak.total, peak.pss_total, peak.breakdown()
        run.load = load.await_done()
        run.seconds, run.job_cpu_s = t1 - t0, TreeCpu.used(cpu0, cpu1) - sampler_s
        run.driver_cpu_s = driver1 - driver0 - run.render_cpu_s - sampler_s
        stop_after_input(job.stop, lambda: job.writer.monitor.input_records_total, run.load.records, self.trigger_ms)
        recorder.remove()
        run.batches = [b for b in batches if t0 <= b.wall_s <= t1]
        run.detection_s = detection_s(transitions, load.cut)
        return run


def detection_s(transitions: list[tuple[float, dict]], cut) -> float | None:
    """Seconds from the cut-off to the first `unreachable` transition of the voter cut off."""
    at_s = cut.at_ms / 1000
    flagged = [wall for wall, e in transitions if e["cluster_id"] == f"fleet-{cut.cluster:04d}"
               and e.get("replica_id") == cut.replica and e["status"] == "unreachable" and wall >= at_s]
    return flagged[0] - at_s if flagged else None


def marginal_ms(small: FleetRun, large: FleetRun) -> float:
    """CPU ms per quorum per second between two fleet sizes."""
    return 1000 * (large.cpu - small.cpu) / (large.quorums - small.quorums)


def goal_lines(runs: list[FleetRun], trigger_ms: int = DEFAULT_TRIGGER_MS) -> list[Goal]:
    """The fleet's targets, at the largest size measured (and the smallest, where a target is a
    ratio between the two); detection within the job's own unreachable threshold + 2 s."""
    from streaming.health.config import HealthConfig
    unreachable_after_ms = HealthConfig().unreachable_after_ms
    small, large = runs[0], runs[-1]
    n = large.quorums
    two = len(runs) > 1 and small.quorums < large.quorums
    return [
        Goal(f"batches_within_trigger_{n}_quorums", large.duration(99), trigger_ms, 1.0, "ms", "the trigger",
             how_to_measure="no batch in the window"),
        Goal(f"detection_{n}_quorums", large.detection_s, unreachable_after_ms / 1000, unreachable_after_ms / 1000 + 2,
             "s", "the unreachable threshold", on_value=True, how_to_measure="the cut-off voter was not flagged"),
        Goal(f"marginal_cpu_{small.quorums}_to_{n}", marginal_ms(small, large) if two else None, None, 0.15,
             "ms CPU per quorum per s", "Spark's source alone", on_value=True,
             how_to_measure="two sizes, the smaller first"),
        Goal(f"state_written_{n}_quorums", large.state_bytes_per_quorum_s, None, 1000, "bytes per quorum per s",
             on_value=True),
        Goal(f"driver_per_batch_{small.quorums}_to_{n}", large.driver_ms_per_batch if two else None,
             small.driver_ms_per_batch, 2.0, "ms CPU", f"{small.quorums} quorums",
             how_to_measure="two sizes, the smaller first"),
        Goal(f"exporter_scrape_{n}_quorums", max(large.scrapes_ms) / 1000 if large.scrapes_ms and
             not large.scrape_failures else None, 10.0, 1.0, "s", "Prometheus' default scrape timeout",
             how_to_measure="a render that succeeded" if not large.scrape_failures else large.scrape_failures[0]),
        Goal(f"memory_{n}_quorums", large.peak_pss, small.peak_pss if two else None, 1500 * MB, "MB",
             f"{small.quorums} quorums", on_value=True),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[200, 2000], help="fleet sizes, smallest first")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--partitions", type=int, default=4, help="of the events topic")
    ap.add_argument("--warmup-seconds", type=float, default=90, help="start of each run left out")
    ap.add_argument("--seconds", type=float, default=60, help="measured time per run")
    ap.add_argument("--scrape-every", type=float, default=10, help="seconds between timed exporter renders")
    ap.add_argument("--spark-conf", nargs="*", default=[], metavar="KEY=VALUE", help="extra Spark settings")
    ap.add_argument("--quorum-row-refresh-ms", type=int, default=10_000,
                    help="health.quorum_row_refresh_ms: a steady quorum's row at most this often (0: every batch)")
    ap.add_argument("--quick", action="store_true", help="20 and 100 quorums, 20 s warm-up, 20 s runs")
    args = ap.parse_args()
    if args.quick:
        args.sizes = [20, 100] if args.sizes == ap.get_default("sizes") else args.sizes
        args.warmup_seconds, args.seconds, args.scrape_every = 20, 20, 5
    args.spark_settings = dict(a.split("=", 1) for a in args.spark_conf)
    args.trigger_ms = DEFAULT_TRIGGER_MS
    args.sizes = sorted(args.sizes)

    from quorum.local_kafka.kafka_broker import KafkaBroker
    tmp = Path(tempfile.mkdtemp(prefix="fleet-bench-"))
    print(f"fleet job: {', '.join(map(str, args.sizes))} collector-shaped quorums (3 voters each, a snapshot and a "
          f"metrics record per node a second) on {args.master}; {args.warmup_seconds:.0f} s warm-up, "
          f"{args.seconds:.0f} s measured; work directory {tmp}", flush=True)
    runs: list[FleetRun] = []
    with KafkaBroker(log_path=tmp / "broker.log") as broker:
        bench = FleetBench(args, tmp, broker, None)
        for quorums in args.sizes:
            runs.append(bench.run(quorums))
            print(runs[-1].report(), flush=True)
    if len(runs) > 1:
        print(f"marginal CPU from {runs[0].quorums} to {runs[-1].quorums} quorums: "
              f"{marginal_ms(runs[0], runs[-1]):.3f} ms CPU per quorum per s")
    for goal in goal_lines(runs, args.trigger_ms):
        print(goal.line())


if __name__ == "__main__":
    main()
