"""What a fleet's series cost the exporter and a real Prometheus scraping it.

For each of `--sizes` (quorums of 3 voters, the fleet snapshot of exposition_render.py), the
driver's exporter is started as the job starts it (streaming/sinks/exporter.py: the health
collector's kept text behind exposition_http.py, on a free loopback port), and a thread applies a
batch to the snapshot every second (every quorum row new, one replica row in twenty, under the
snapshot's lock, as the job's batch writer does). The Debian Prometheus (/usr/bin/prometheus)
runs with a temporary data dir on a free loopback port (tests/prometheus_tools.py's `Server`),
configured by deploy/prometheus_config.py (the exporter's job and the shipped alerting rules,
evaluated every interval as deployed; no Pushgateway), scraping every `--scrape-interval` with
the timeout equal to the interval. After `--warmup-seconds`, over `--seconds`:

  series: the served (OpenMetrics) exposition's samples, per quorum and in all; its bytes, plain
      and gzipped (Prometheus asks for gzip);
  Prometheus: the mean and largest `scrape_duration_seconds` of the job (its HTTP API), head
      series (`prometheus_tsdb_head_series`), resident memory and CPU per second (its own
      process_* metrics, which its Go client reads from its /proc), samples appended per second
      (`prometheus_tsdb_head_samples_appended_total`);
  exporter: CPU (thread time of the serving thread: snapshot read, render, gzip, write) and wall
      time per scrape, as the serving process saw them, beside the batch thread's CPU per second;
  per series: Prometheus' resident bytes per head series (and, over two sizes or more, the
      added bytes per added series between the smallest and the largest fleet, which leaves
      Prometheus' own baseline out), the exporter's CPU ms per 1,000 series per scrape.

The baseline each goal is judged against is the scrape interval (a figure of the run, not a
measurement of another system). Goals, each size:

  prometheus_scrape_N_quorums: mean scrape duration <= 10% of the interval (Prometheus times a
      scrape out at the interval; a tenth leaves room for a slow one);
  exporter_cpu_per_scrape_N_quorums: the exporter's CPU per scrape <= 0.1 CPU s per second of
      interval (a tenth of one core for serving, beside the batches on the driver);
  exporter_wall_per_scrape_N_quorums: wall time per scrape <= 100 ms, a tenth of the job's 1 s
      trigger (a scrape holds the driver's GIL, which the batch writer needs);
  prometheus_ingest_N_quorums: samples appended per scrape (over the scrapes the exporter
      served in the window) >= 95% of the served series (Prometheus stores every scrape whole:
      it keeps up). Per scrape, not per second: a window that is not a whole number of intervals
      holds one scrape more or less than its length says.

Not reached in a short run: head compaction (every 2 h) and WAL truncation, so the resident
memory is the head's alone, and the first hour's chunk cutting is all the CPU shows.

Takes about (warm-up + seconds + 5 s) a size: some 4.5 min with the defaults, 75 s `--quick`.
The figures move with anything else on the machine: run it alone.

    .venv/bin/python benchmarks/prometheus_fleet.py              # 200 and 2,000 quorums
    .venv/bin/python benchmarks/prometheus_fleet.py --quick      # 20 and 100, 15 s + 15 s
"""
from __future__ import annotations

import argparse
import gzip
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
# the project's packages first: tests/ has a `streaming` package of its own (the tests of streaming/)
sys.path[:0] = [str(ROOT)]
sys.path += [str(ROOT / "deploy"), str(ROOT / "tests")]

from prometheus_config import JOB, prometheus_config  # noqa: E402
from prometheus_tools import Server, http_get, promql  # noqa: E402

from streaming.health.config import HealthConfig  # noqa: E402
from streaming.sinks.config import PrometheusSinkConfig  # noqa: E402
from streaming.sinks.exporter import ExporterSink  # noqa: E402
from streaming.sinks.monitor import MonitorMetrics  # noqa: E402
from streaming.sinks.snapshot import HealthSnapshot  # noqa: E402

from exposition_render import a_batch, fleet  # noqa: E402
from goals import Goal  # noqa: E402

SCRAPE_SHARE = 0.1        # of the interval, for a mean scrape
EXPORTER_CPU_SHARE = 0.1  # CPU s per second of interval
SCRAPE_WALL_MS = 100.0    # a tenth of the job's 1 s trigger
INGEST_SHARE = 0.95       # of the served series, appended per scrape


# --- pure helpers (tests/benchmarks/test_prometheus_fleet.py) -----------------------------------

def scrape_config(exporter: str, interval_s: float, rules_path: Path | str) -> dict:
    """deploy/prometheus_config.py's configuration for the exporter alone (no Pushgateway), the
    scrape timeout the interval itself (the helper keeps it at 10 s at most)."""
    config = prometheus_config("127.0.0.1:9", exporter, None, rules_path, interval_s)
    config["scrape_configs"] = [c for c in config["scrape_configs"] if c["job_name"] == JOB]
    config["global"]["scrape_timeout"] = config["global"]["scrape_interval"]
    return config


def sample_count(text: bytes) -> int:
    """The samples of an exposition (text format or OpenMetrics): its lines other than comments."""
    return sum(1 for line in text.splitlines() if line and not line.startswith(b"#"))


def metric_sum(text: str, name: str) -> float:
    """The sum over label sets of `name`'s samples in a text exposition (0 when it is absent)."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and line[len(name):len(name) + 1] in ("{", " "):
            total += float(line.rsplit("}", 1)[-1].split()[-1])
    return total


def marginal_bytes_per_series(rows: list["Figures"]) -> float | None:
    """Added resident bytes per added head series between the smallest and the largest fleet."""
    if len(rows) < 2:
        return None
    small, large = min(rows, key=lambda r: r.head_series), max(rows, key=lambda r: r.head_series)
    if large.head_series == small.head_series:
        return None
    return (large.prometheus_rss - small.prometheus_rss) / (large.head_series - small.head_series)


@dataclass(frozen=True)
class Figures:
    quorums: int
    interval_s: float
    series: int
    plain_bytes: int
    gzip_bytes: int
    scrape_mean_s: float
    scrape_max_s: float
    head_series: float
    prometheus_rss: float
    prometheus_cpu_per_s: float
    samples_per_s: float
    samples_per_scrape: float
    scrapes: int
    exporter_cpu_s: float       # per scrape
    exporter_wall_s: float      # per scrape
    batch_cpu_per_s: float

    def goals(self) -> list[Goal]:
        n, interval_ms = self.quorums, self.interval_s * 1000
        return [
            Goal(f"prometheus_scrape_{n}_quorums", self.scrape_mean_s * 1000, interval_ms, SCRAPE_SHARE, "ms",
                 "the scrape interval"),
            Goal(f"exporter_cpu_per_scrape_{n}_quorums", self.exporter_cpu_s * 1000, interval_ms,
                 EXPORTER_CPU_SHARE, "ms", "the scrape interval"),
            Goal(f"exporter_wall_per_scrape_{n}_quorums", self.exporter_wall_s * 1000, interval_ms, SCRAPE_WALL_MS,
                 "ms", "the scrape interval", on_value=True),
            Goal(f"prometheus_ingest_{n}_quorums", self.samples_per_scrape, self.series, INGEST_SHARE, "samples",
                 "the served series", at_least=True),
        ]

    def lines(self) -> list[str]:
        per_k = self.exporter_cpu_s * 1000 / (self.series / 1000)
        return [
            f"{self.quorums:,} quorums: {self.series:,} series ({self.series / self.quorums:.1f} a quorum); "
            f"exposition {self.plain_bytes / 1e6:.2f} MB plain, {self.gzip_bytes / 1e6:.3f} MB gzipped "
            f"({self.plain_bytes / self.gzip_bytes:.1f} x)",
            f"  prometheus: scrape {self.scrape_mean_s * 1000:.1f} ms mean, {self.scrape_max_s * 1000:.1f} ms "
            f"largest (interval {self.interval_s:g} s); head series {self.head_series:,.0f}; "
            f"RSS {self.prometheus_rss / 1e6:.0f} MB; CPU {self.prometheus_cpu_per_s:.3f} s per s; "
            f"{self.samples_per_s:,.0f} samples/s appended ({self.samples_per_scrape:,.0f} a scrape)",
            f"  exporter: {self.scrapes} scrapes, CPU {self.exporter_cpu_s * 1000:.1f} ms and wall "
            f"{self.exporter_wall_s * 1000:.1f} ms a scrape; batch thread CPU {self.batch_cpu_per_s:.3f} s per s",
            f"  per series: prometheus {self.prometheus_rss / self.head_series:,.0f} B RSS per head series; "
            f"exporter {per_k:.2f} CPU ms per 1,000 series a scrape",
        ]


# --- the live parts -------------------------------------------------------------------------------

class ScrapeMeter:
    """CPU (the serving thread's) and wall time of each request the exporter's server finishes."""

    def __init__(self, server) -> None:
        self.lock = threading.Lock()
        self.count, self.cpu_s, self.wall_s = 0, 0.0, 0.0
        finish = server.finish_request

        def timed(request, client_address):
            cpu0, wall0 = time.thread_time(), time.perf_counter()
            finish(request, client_address)
            cpu, wall = time.thread_time() - cpu0, time.perf_counter() - wall0
            with self.lock:
                self.count, self.cpu_s, self.wall_s = self.count + 1, self.cpu_s + cpu, self.wall_s + wall

        server.finish_request = timed  # process_request_thread calls it through the instance

    def reading(self) -> tuple[int, float, float]:
        with self.lock:
            return self.count, self.cpu_s, self.wall_s


class Batches(threading.Thread):
    """A batch applied to the snapshot every second, under its lock (as the job's batch writer
    applies one); its own CPU seconds kept."""

    def __init__(self, snapshot: HealthSnapshot) -> None:
        super().__init__(name="batches", daemon=True)
        self.snapshot, self.stopping, self.cpu_s = snapshot, threading.Event(), 0.0

    def run(self) -> None:
        tick = 0
        while not self.stopping.wait(1.0 - time.monotonic() % 1.0):
            tick += 1
            with self.snapshot._lock:  # the lock HealthSnapshot.apply holds, read by each scrape
                a_batch(self.snapshot, tick)
            self.cpu_s = time.thread_time()


def prometheus(exporter: str, interval_s: float, workdir: Path) -> Server:
    """/usr/bin/prometheus on a free loopback port (tests/prometheus_tools.py's `Server`) with a
    data dir in `workdir`, scraping `exporter`."""
    config = workdir / "prometheus.yml"
    config.write_text(yaml.safe_dump(scrape_config(exporter, interval_s, ROOT / "alerts" / "quorum-health.rules.yml"),
                                     sort_keys=False))
    return Server("prometheus", lambda address: [f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
                                                 f"--web.listen-address={address}"], workdir)


def own_metrics(server: Server) -> str:
    """Prometheus' own /metrics (its process figures are read from its /proc by its Go client)."""
    return http_get(f"{server.url}/metrics", timeout=5).decode()


def query(server: Server, expression: str) -> float:
    result = promql(server, expression)
    return float(result[0]["value"][1]) if result else float("nan")


@dataclass(frozen=True)
class Reading:
    at: float
    prometheus_cpu_s: float
    samples_appended: float
    scrapes: tuple[int, float, float]
    batch_cpu_s: float


def read(server: Server, meter: ScrapeMeter, batches: Batches) -> Reading:
    text = own_metrics(server)
    return Reading(time.monotonic(), metric_sum(text, "process_cpu_seconds_total"),
                   metric_sum(text, "prometheus_tsdb_head_samples_appended_total"), meter.reading(), batches.cpu_s)


def measure(quorums: int, args: argparse.Namespace) -> Figures:
    snapshot = fleet(quorums)
    sink = ExporterSink(PrometheusSinkConfig(mode="exporter", exporter_host="127.0.0.1", exporter_port=0), snapshot,
                        MonitorMetrics(HealthConfig()))
    meter, batches = ScrapeMeter(sink.server), Batches(snapshot)
    body = sink.collector.exposition(openmetrics=True)  # Prometheus asks for OpenMetrics first
    try:
        with tempfile.TemporaryDirectory(prefix="prometheus-fleet-") as workdir, \
                prometheus(f"127.0.0.1:{sink.port}", args.scrape_interval, Path(workdir)) as server:
            batches.start()
            time.sleep(args.warmup_seconds)
            before = read(server, meter, batches)
            time.sleep(args.seconds)
            after = read(server, meter, batches)
            return figures(quorums, args, body, server, before, after)
    finally:
        batches.stopping.set()
        batches.join()
        sink.close()


def figures(quorums: int, args: argparse.Namespace, body: bytes, server: Server, before: Reading,
            after: Reading) -> Figures:
    span = after.at - before.at
    window = f"[{max(1, round(span))}s]"
    selector = f'scrape_duration_seconds{{job="{JOB}"}}'
    scrapes = after.scrapes[0] - before.scrapes[0]
    own = own_metrics(server)
    per_scrape = (lambda i: (after.scrapes[i] - before.scrapes[i]) / scrapes) if scrapes else (lambda i: float("nan"))
    return Figures(
        quorums=quorums, interval_s=args.scrape_interval, series=sample_count(body), plain_bytes=len(body),
        gzip_bytes=len(gzip.compress(body)),
        scrape_mean_s=query(server, f"avg_over_time({selector}{window})"),
        scrape_max_s=query(server, f"max_over_time({selector}{window})"),
        head_series=metric_sum(own, "prometheus_tsdb_head_series"),
        prometheus_rss=metric_sum(own, "process_resident_memory_bytes"),
        prometheus_cpu_per_s=(after.prometheus_cpu_s - before.prometheus_cpu_s) / span,
        samples_per_s=(after.samples_appended - before.samples_appended) / span,
        samples_per_scrape=(after.samples_appended - before.samples_appended) / scrapes if scrapes else float("nan"),
        scrapes=scrapes, exporter_cpu_s=per_scrape(1), exporter_wall_s=per_scrape(2),
        batch_cpu_per_s=(after.batch_cpu_s - before.batch_cpu_s) / span)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[200, 2000], help="fleet sizes (quorums of 3 voters)")
    ap.add_argument("--scrape-interval", type=float, default=10.0, help="Prometheus' scrape interval, s")
    ap.add_argument("--warmup-seconds", type=float, default=60.0, help="before the measured window")
    ap.add_argument("--seconds", type=float, default=60.0, help="the measured window")
    ap.add_argument("--quick", action="store_true", help="20 and 100 quorums, 15 s warm-up, 15 s")
    args = ap.parse_args()
    if args.quick:
        args.sizes, args.warmup_seconds, args.seconds = [20, 100], 15.0, 15.0
    print(f"prometheus {shutil.which('prometheus')}, scrape every {args.scrape_interval:g} s; "
          f"warm-up {args.warmup_seconds:g} s, measured {args.seconds:g} s", flush=True)
    rows = []
    for quorums in args.sizes:
        rows.append(measure(quorums, args))
        print("\n".join(rows[-1].lines()), flush=True)
    marginal = marginal_bytes_per_series(rows)
    if marginal is not None:
        print(f"prometheus: {marginal:,.0f} B RSS per added head series ({min(args.sizes):,} to "
              f"{max(args.sizes):,} quorums)")
    for row in rows:
        for goal in row.goals():
            print(goal.line())


if __name__ == "__main__":
    main()
