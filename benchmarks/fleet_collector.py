"""Watching a fleet of Kafka clusters: what the collector costs per cluster, measured on a
simulated fleet served from one process (the load fixture, quorum/synthetic/simulated_fleet.py:
Kafka's wire protocol and JMX-exporter /metrics for --clusters clusters of 3 nodes, clusters
hung on command). Correctness stays proven on real Kafka (tests/kafka_quorum); this measures cost.

It starts the fixture in a process of its own and an events Kafka broker (quorum/local_kafka),
then measures two ways of watching the fleet:
  - the baseline, a process per cluster: one `quorum collect` per cluster (--bootstrap-server
    with the cluster's 3 nodes, --node-metrics for each, --interval-ms 1000), for each sample
    size K of --sample;
  - the fleet collector: one `quorum collect --fleet FILE` watching every cluster served.
Each is measured steady for --seconds after --warmup-seconds, then with --hung-fraction of its
clusters hung (at least one); then the fleet collector's clusters hang --hang-cycles times for
--hang-seconds, --recover-seconds apart, and its threads, RSS and open files after are compared
with before.

For each window it prints the collectors' CPU per cluster per second (from /proc of each
process), RSS (and PSS: the shared pages divided) per cluster, threads and open files per process,
the interval between each cluster's snapshots on the events topic (p50, p99, the longest
silence; the hung clusters' poll-error records apart), the CPU the fixture and the broker took,
and where a collector's CPU went by thread. The run ends with one line per target:
  goal NAME: VALUE against a process per cluster BASELINE = RATIO (goal G): holds|short

  python benchmarks/fleet_collector.py                         # 500 clusters served, K = 10 and 25
  python benchmarks/fleet_collector.py --clusters 20 --sample 3 --seconds 10 --warmup-seconds 10 --hang-cycles 0
"""
from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from fleet_readings import (Peaks, Published, cpu_by_thread_kind, intervals, longest_silence, percentile, pooled,
                            read_process, stamps, thread_seconds)
from goals import MB, Goal
from process_usage import TreeCpu

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT, POLL_ERROR = "quorum_snapshot", "quorum_poll_error"
TARGETS = {"cpu_ms": 0.5, "rss": 1 * MB, "p99_ms": 1200, "threads": 50, "threads_after_hangs": 8,
           "rss_after_hangs": 20 * MB}
BASELINE = "a process per cluster"


class Growth(Goal):
    """A target on how much a figure grew (through hangs), judged on the growth alone."""

    def line(self) -> str:
        if self.holds is None:
            return f"goal {self.name}: not measured ({self.how_to_measure})"
        figure = lambda x: f"{x / MB:,.1f} MB" if self.unit == "MB" else f"{x:,.0f} {self.unit}"  # noqa: E731
        return (f"goal {self.name}: {figure(self.value)} more than before the hangs "
                f"(goal <= {figure(self.bound)}): {'holds' if self.holds else 'short'}")


class Fixture:
    """The simulated fleet in a process of its own, driven through its stdin."""

    def __init__(self, clusters: int, seed: int, log: Path):
        self._log = log.open("wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "quorum.synthetic.simulated_fleet", "--clusters",
                                      str(clusters), "--seed", str(seed)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._log, text=True, cwd=ROOT)
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the simulated fleet did not start (log: {log})")
        ready = json.loads(line)
        self.clusters: list[dict] = ready["clusters"]
        self.nofile: int = ready["nofile"]

    def say(self, line: str) -> dict:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


class TopicRecords:
    """Every record of the events topic so far, read on demand (type, cluster, time)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int):
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fleet-bench",
                                  "enable.auto.commit": False})
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        self.topic, self.partitions = topic, partitions
        self.next = {p: 0 for p in range(partitions)}  # the offset to read next, per partition
        self.records: list[Published] = []

    def catch_up(self, timeout_s: float = 30) -> list[Published]:
        """Reads up to each partition's end as it is now (a partition no cluster is keyed to has none)."""
        from confluent_kafka import TopicPartition

        from quorum import events
        ends = {p: self.consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=10)[1]
                for p in range(self.partitions)}
        deadline = time.monotonic() + timeout_s
        while any(self.next[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            for msg in self.consumer.consume(10_000, 0.5):
                if msg.error() is None:
                    r = events.decode(msg.value())
                    self.records.append(Published(r.TYPE, r.cluster_id, r.time_ms, getattr(r, "error", "")))
                    self.next[msg.partition()] = msg.offset() + 1
        return self.records

    def close(self) -> None:
        self.consumer.close()


def start_collector(cluster: dict, events_bootstrap: str, topic: str, interval_ms: int, log: Path,
                    named_threads: bool = False) -> subprocess.Popen:
    """`quorum collect` for one cluster, as the README runs it; `named_threads`: through
    named_threads.py, its threads told apart in /proc."""
    metrics = [a for node, url in sorted(cluster["node_metrics"].items()) for a in ("--node-metrics", f"{node}={url}")]
    entry = [str(ROOT / "benchmarks" / "named_threads.py")] if named_threads else ["-m", "quorum.cli"]
    with log.open("wb") as out:
        return subprocess.Popen([sys.executable, *entry, "collect", "--bootstrap-server",
                                 cluster["bootstrap"], "--cluster-id", cluster["cluster_id"],
                                 "--events-bootstrap-server", events_bootstrap, "--events-topic", topic,
                                 "--interval-ms", str(interval_ms), *metrics],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT)


def stop_collectors(procs: dict[str, subprocess.Popen]) -> None:
    for p in procs.values():
        p.send_signal(signal.SIGTERM)
    for p in procs.values():
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


@dataclass
class Window:
    """What one measured window gave."""
    name: str
    clusters: int
    seconds: float
    cpu_s: float                 # the collectors', summed
    fixture_cpu_s: float
    broker_cpu_s: float
    rss: list[int]               # per collector process, at the end
    pss: list[int]
    threads: list[int]           # per process, the most it held
    files: list[int]
    snapshot_intervals: list[int]   # the clusters not hung, pooled
    silence_ms: int                 # the longest any of them went without a snapshot
    hung_intervals: list[int] = field(default_factory=list)  # the hung clusters' poll errors
    by_thread: dict[str, float] = field(default_factory=dict)

    @property
    def cpu_ms_per_cluster(self) -> float:
        return self.cpu_s / self.clusters / self.seconds * 1000

    @property
    def rss_per_cluster(self) -> float:
        return sum(self.rss) / self.clusters

    @property
    def pss_per_cluster(self) -> float:
        return sum(self.pss) / self.clusters


def measure(name: str, procs: dict[str, subprocess.Popen], hung: set[str], seconds: float, fixture: Fixture,
            broker_pid: int, topic: TopicRecords, profiled: subprocess.Popen | None = None,
            clusters: set[str] | None = None) -> Window:
    """The collectors, the fixture and the broker over `seconds`, sampled every second; where
    the `profiled` collector's CPU went, by thread. `clusters`: the ids watched (default: the
    processes', one cluster each)."""
    clusters = set(procs) if clusters is None else clusters
    pids = [p.pid for p in procs.values()]
    fixture_cpu, broker_cpu = TreeCpu(fixture.proc.pid), TreeCpu(broker_pid)
    before = {pid: read_process(pid) for pid in pids}
    traced = profiled.pid if profiled else None
    threads_before, traced_cpu = (thread_seconds(traced), read_process(traced).cpu_s) if traced else ({}, 0.0)
    f0, b0 = fixture_cpu.seconds(), broker_cpu.seconds()
    t0 = int(time.time() * 1000)
    peaks = Peaks()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        peaks.sample(pids)
        time.sleep(min(1.0, max(0.0, end - time.monotonic())))
    t1 = int(time.time() * 1000)
    after = {pid: read_process(pid, proportional=True) for pid in pids}
    by_thread = cpu_by_thread_kind(threads_before, thread_seconds(traced), read_process(traced).cpu_s - traced_cpu) \
        if traced else {}
    fixture_s, broker_s = TreeCpu.used(f0, fixture_cpu.seconds()), TreeCpu.used(b0, broker_cpu.seconds())
    time.sleep(2)  # the window's last records reach the topic
    records = topic.catch_up()
    snaps = stamps(records, clusters - hung, SNAPSHOT, t0, t1)
    errors = stamps(records, hung, POLL_ERROR, t0, t1)
    return Window(name, len(clusters), (t1 - t0) / 1000, sum(after[p].cpu_s - before[p].cpu_s for p in pids),
                  fixture_s, broker_s, [after[p].rss for p in pids], [after[p].pss for p in pids],
                  [peaks.threads.get(p, 0) for p in pids], [peaks.files.get(p, 0) for p in pids],
                  pooled(intervals(snaps)), longest_silence(snaps, t0, t1), pooled(intervals(errors)), by_thread)


def report(w: Window) -> None:
    p = lambda xs, q: f"{percentile(xs, q):,.0f}" if xs else "none"  # noqa: E731
    processes = f"{len(w.rss)} collector process{'es' if len(w.rss) > 1 else ''} watching {w.clusters} clusters"
    print(f"  {w.name}: {processes} for {w.seconds:.0f} s: "
          f"{w.cpu_ms_per_cluster:.2f} ms CPU per cluster per s ({w.cpu_s / w.seconds:.3f} CPU s per s in all); "
          f"RSS {w.rss_per_cluster / MB:.2f} MB per cluster ({max(w.rss) / MB:.1f} MB the largest process), "
          f"PSS {w.pss_per_cluster / MB:.2f} MB; "
          f"threads per process {min(w.threads)}-{max(w.threads)} ({sum(w.threads)} in all); "
          f"open files per process {min(w.files)}-{max(w.files)}", flush=True)
    print(f"    snapshot interval (clusters not hung): p50 {p(w.snapshot_intervals, 50)} ms, "
          f"p99 {p(w.snapshot_intervals, 99)} ms, max {max(w.snapshot_intervals, default=0):,} ms, longest "
          f"silence {w.silence_ms:,} ms ({len(w.snapshot_intervals)} intervals)"
          + (f"; hung clusters' poll errors: p50 {p(w.hung_intervals, 50)} ms, p99 {p(w.hung_intervals, 99)} ms"
             if w.hung_intervals else ""), flush=True)
    print(f"    the fixture took {w.fixture_cpu_s / w.seconds:.3f} CPU s per s, the events broker "
          f"{w.broker_cpu_s / w.seconds:.3f}", flush=True)
    if w.by_thread:
        total = sum(w.by_thread.values())
        top = sorted(w.by_thread.items(), key=lambda kv: -kv[1])[:8]
        print(f"    one more collector, its threads named (not in the figures): {total / w.seconds * 1000:.1f} ms CPU "
              "per s, by thread: " + ", ".join(f"{k} {100 * s / (total or 1):.0f}%" for k, s in top), flush=True)


def hang_cycles(args, procs: dict[str, subprocess.Popen], fixture: Fixture, index_of: dict[str, int],
                hung: list[str]) -> dict[str, tuple[int, int]]:
    """Hangs `hung` again and again; each hung cluster's collector's (threads, RSS) growth, from
    before the cycles to after the last recovery."""
    def state(cid: str):
        r = read_process(procs[cid].pid)
        return r.threads, r.rss, r.files
    first = {cid: state(cid) for cid in hung}
    for cycle in range(args.hang_cycles):
        fixture.say("hang " + " ".join(str(index_of[c]) for c in hung))
        time.sleep(args.hang_seconds)
        peak = {cid: state(cid) for cid in hung}
        fixture.say("unhang " + " ".join(str(index_of[c]) for c in hung))
        time.sleep(args.recover_seconds)
        print(f"  hang {cycle + 1} of {args.hang_cycles} ({args.hang_seconds:.0f} s): " + "; ".join(
            f"{cid}'s collector: threads {first[cid][0]} -> {peak[cid][0]} hung -> {state(cid)[0]} "
            f"{args.recover_seconds:.0f} s after, RSS {first[cid][1] / MB:.1f} -> {state(cid)[1] / MB:.1f} MB, "
            f"open files {first[cid][2]} -> {state(cid)[2]}" for cid in hung), flush=True)
    return {cid: (state(cid)[0] - first[cid][0], state(cid)[1] - first[cid][1]) for cid in hung}


def measure_processes(args, k: int, fixture: Fixture, broker, topic_name: str, topic: TopicRecords, work: Path,
                      cycles: bool) -> tuple[list[Window], dict[str, tuple[int, int]]]:
    """Today's way: one `quorum collect` process per cluster, for K clusters of the fleet."""
    sample = fixture.clusters[:k]
    index_of = {c["cluster_id"]: i for i, c in enumerate(fixture.clusters)}
    hung = [c["cluster_id"] for c in sample[:max(1, round(k * args.hung_fraction))]]
    print(f"a process per cluster, K = {k} (hung later: {', '.join(hung)})", flush=True)
    procs = {c["cluster_id"]: start_collector(c, broker.bootstrap, topic_name, args.interval_ms,
                                              work / f"collect-{c['cluster_id']}.log") for c in sample}
    extra = fixture.clusters[k] if k < len(fixture.clusters) else None
    profiled = start_collector(extra, broker.bootstrap, topic_name, args.interval_ms, work / f"profiled-{k}.log",
                               named_threads=True) if extra else None
    growth: dict[str, tuple[int, int]] = {}
    try:
        time.sleep(args.warmup_seconds)
        dead = [cid for cid, p in procs.items() if p.poll() is not None]
        if dead:
            raise RuntimeError(f"collectors exited: {dead} (logs in {work})")
        windows = [measure("steady", procs, set(), args.seconds, fixture, broker.pid, topic, profiled)]
        report(windows[-1])
        fixture.say("hang " + " ".join(str(index_of[c]) for c in hung))
        time.sleep(args.interval_ms / 1000 * 2)  # the polls under way when it hung are left out
        windows.append(measure(f"{len(hung)} of {k} hung", procs, set(hung), args.seconds, fixture, broker.pid,
                               topic))
        fixture.say("unhang all")
        report(windows[-1])
        if cycles and args.hang_cycles:
            time.sleep(args.recover_seconds)
            growth = hang_cycles(args, procs, fixture, index_of, hung)
    finally:
        fixture.say("unhang all")
        stop_collectors({**procs, **({"profiled": profiled} if profiled else {})})
    return windows, growth


def fleet_file(clusters: list[dict], path: Path) -> Path:
    """The fleet file of the simulated clusters: each through its 3 nodes, with node metrics."""
    import yaml
    entries = [{"cluster_id": c["cluster_id"], "bootstrap_server": c["bootstrap"],
                "node_metrics": {int(n): url for n, url in sorted(c["node_metrics"].items())}} for c in clusters]
    path.write_text(yaml.safe_dump({"clusters": entries}, sort_keys=False))
    return path


def measure_fleet_collector(args, fixture: Fixture, broker, topic_name: str, topic: TopicRecords, work: Path
                            ) -> tuple[list[Window], dict[str, tuple[int, int]]]:
    """The fleet collector (`quorum collect --fleet FILE`) watching every cluster served, from
    one process: steady, then with --hung-fraction of them hung, then --hang-cycles."""
    clusters = fixture.clusters
    index_of = {c["cluster_id"]: i for i, c in enumerate(clusters)}
    hung = [c["cluster_id"] for c in clusters[:max(1, round(len(clusters) * args.hung_fraction))]]
    print(f"one fleet collector (quorum collect --fleet) watching {len(clusters)} clusters "
          f"({len(hung)} hung later)", flush=True)
    with (work / "collect-fleet.log").open("wb") as out:
        proc = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "named_threads.py"), "collect", "--fleet",
                                 str(fleet_file(clusters, work / "fleet.yaml")), "--events-bootstrap-server",
                                 broker.bootstrap, "--events-topic", topic_name, "--interval-ms", str(args.interval_ms)],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT)
    procs = {"fleet": proc}
    ids = set(index_of)
    growth: dict[str, tuple[int, int]] = {}
    try:
        time.sleep(args.warmup_seconds)
        if proc.poll() is not None:
            raise RuntimeError(f"the fleet collector exited (log: {work / 'collect-fleet.log'})")
        windows = [measure("steady", procs, set(), args.seconds, fixture, broker.pid, topic, proc, clusters=ids)]
        report(windows[-1])
        fixture.say("hang " + " ".join(str(index_of[c]) for c in hung))
        time.sleep(args.interval_ms / 1000 * 2)  # the polls under way when they hung are left out
        windows.append(measure(f"{len(hung)} of {len(clusters)} hung", procs, set(hung), args.seconds, fixture,
                               broker.pid, topic, clusters=ids))
        fixture.say("unhang all")
        report(windows[-1])
        if args.hang_cycles:
            time.sleep(args.recover_seconds)
            growth = hang_cycles(args, {c: proc for c in hung[:1]}, fixture, index_of, hung[:1])
    finally:
        fixture.say("unhang all")
        stop_collectors(procs)
    return windows, growth


def goal_lines(baseline: Window | None, hung: Window | None, fleet: list[Window],
               growth: dict[str, tuple[int, int]]) -> list[Goal]:
    """The fleet targets on the fleet collector's figures, each against a process per cluster;
    on the baseline's own when the fleet collector was not measured (said in each name)."""
    ours = fleet[0] if fleet else baseline
    ours_hung = fleet[1] if len(fleet) > 1 else hung
    who = "" if fleet else " (today: a process per cluster)"

    def figure(w: Window | None, what):
        return what(w) if w is not None else None
    p99 = lambda w: percentile(w.snapshot_intervals, 99) if w.snapshot_intervals else float(w.silence_ms)  # noqa: E731
    how = "the steady and hung windows"
    return [
        Goal("cpu_per_cluster" + who, figure(ours, lambda w: w.cpu_ms_per_cluster),
             figure(baseline, lambda w: w.cpu_ms_per_cluster), TARGETS["cpu_ms"], "ms CPU per s", BASELINE,
             on_value=True, how_to_measure=how),
        Goal("rss_per_cluster" + who, figure(ours, lambda w: w.rss_per_cluster), figure(baseline, lambda w: w.rss_per_cluster),
             TARGETS["rss"], "MB", BASELINE, on_value=True, how_to_measure=how),
        Goal("snapshot_interval_p99" + who, figure(ours, p99), figure(baseline, p99), TARGETS["p99_ms"], "ms",
             BASELINE, on_value=True, how_to_measure=how),
        Goal("snapshot_interval_p99_5pct_hung" + who, figure(ours_hung, p99), figure(hung, p99), TARGETS["p99_ms"],
             "ms", BASELINE + ", hung", on_value=True, how_to_measure=how),
        Goal("threads_in_all" + who, figure(ours, lambda w: float(sum(w.threads))),
             figure(baseline, lambda w: float(sum(w.threads))), TARGETS["threads"], "threads", BASELINE,
             on_value=True, how_to_measure=how),
        Growth("threads_after_hangs" + who, float(max(g[0] for g in growth.values())) if growth else None, None,
               TARGETS["threads_after_hangs"], "threads", on_value=True, how_to_measure="--hang-cycles"),
        Growth("rss_after_hangs" + who, float(max(g[1] for g in growth.values())) if growth else None, None,
               TARGETS["rss_after_hangs"], "MB", on_value=True, how_to_measure="--hang-cycles"),
    ]


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clusters", type=int, default=500, help="clusters the fixture serves (default %(default)s)")
    ap.add_argument("--sample", type=int, nargs="+", default=[10, 25], metavar="K",
                    help="sample sizes: how many of the clusters are watched, by a `quorum collect` process each "
                         "(default %(default)s)")
    ap.add_argument("--seconds", type=float, default=60, help="each measured window (default %(default)s)")
    ap.add_argument("--warmup-seconds", type=float, default=30,
                    help="after the collectors start, before measuring (default %(default)s)")
    ap.add_argument("--hung-fraction", type=float, default=0.05,
                    help="of the watched clusters hung in the second window, at least one (default %(default)s)")
    ap.add_argument("--interval-ms", type=int, default=1000, help="the collectors' poll interval (default %(default)s)")
    ap.add_argument("--hang-cycles", type=int, default=3,
                    help="times the hung clusters hang again, on the largest K (0: none; default %(default)s)")
    ap.add_argument("--hang-seconds", type=float, default=40, help="each of those hangs (default %(default)s)")
    ap.add_argument("--recover-seconds", type=float, default=20, help="after each of them (default %(default)s)")
    ap.add_argument("--seed", type=int, default=0, help="the simulated clusters' seed (default %(default)s)")
    ap.add_argument("--partitions", type=int, default=8, help="of the events topic (default %(default)s)")
    args = ap.parse_args(argv)
    if max(args.sample) > args.clusters:
        ap.error(f"--sample {max(args.sample)} is more than the --clusters {args.clusters} served")
    return args


def main() -> None:
    args = arguments()
    from quorum.local_kafka.kafka_broker import KafkaBroker
    work = Path(tempfile.mkdtemp(prefix="fleet-bench-"))
    print(f"simulated fleet: {args.clusters} clusters of 3 nodes; collectors poll every {args.interval_ms} ms "
          f"with node metrics; windows of {args.seconds:.0f} s after {args.warmup_seconds:.0f} s; "
          f"work directory {work}", flush=True)
    with KafkaBroker(log_path=work / "broker.log") as broker:
        topic_name = broker.create_topic("fleet-bench-events", args.partitions)
        topic = TopicRecords(broker.bootstrap, topic_name, args.partitions)
        started = time.monotonic()
        fixture = Fixture(args.clusters, args.seed, work / "fixture.log")
        print(f"the fixture serves {args.clusters * 6} ports in {time.monotonic() - started:.1f} s "
              f"(its open-files limit: {fixture.nofile})", flush=True)
        try:
            runs = {}
            for k in sorted(args.sample):
                runs[k] = measure_processes(args, k, fixture, broker, topic_name, topic, work, cycles=False)
            fleet, growth = measure_fleet_collector(args, fixture, broker, topic_name, topic, work)
        finally:
            fixture.close()
            topic.close()
    (steady, hung), _ = runs[max(args.sample)]
    print(f"goals: {args.clusters} clusters in one process, against a process per cluster at K = {max(args.sample)}")
    for goal in goal_lines(steady, hung, fleet, growth):
        print(goal.line())


if __name__ == "__main__":
    main()
