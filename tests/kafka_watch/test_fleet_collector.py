"""One `quorum collect --fleet` process watching many clusters (the simulated fleet: Kafka's wire
protocol and JMX-exporter endpoints for each cluster's 3 nodes, served from this process): a
cluster that hangs delays no other cluster's snapshots and is reported as timing out; SIGHUP
adds and removes clusters and leaves the others polling; a file that does not load keeps the
fleet; threads, open files and memory come back after repeated hangs."""
from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from quorum import events
from quorum.local_kafka.loopback_ports import free_port
from quorum.synthetic.simulated_fleet import FleetThread

pytestmark = pytest.mark.slow

INTERVAL_MS = 500
MAX_GAP_MS = 2 * INTERVAL_MS  # a cluster's snapshots are never further apart than this
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fleet():
    with FleetThread(8, seed=11) as f:
        yield f


def write_fleet(path: Path, clusters: list[dict]) -> Path:
    entries = [{"cluster_id": c["cluster_id"], "bootstrap_server": c["bootstrap"],
                "node_metrics": {int(n): url for n, url in sorted(c["node_metrics"].items())}} for c in clusters]
    path.write_text(yaml.safe_dump({"interval_ms": INTERVAL_MS, "clusters": entries}, sort_keys=False))
    return path


class Topic:
    """Every record of the events topic: (type, cluster id, time, error)."""

    def __init__(self, bootstrap: str, topic: str):
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fleet-test", "enable.auto.commit": False})
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(4)])
        self.records: list[tuple[str, str, int, str]] = []

    def read(self, seconds: float = 0.5) -> list[tuple[str, str, int, str]]:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for msg in self.consumer.consume(1000, 0.1):
                if msg.error() is None:
                    r = events.decode(msg.value())
                    self.records.append((r.TYPE, r.cluster_id, r.time_ms, getattr(r, "error", "")))
        return self.records

    def snapshots(self, cluster_id: str, start_ms: int = 0, end_ms: int = 1 << 62) -> list[int]:
        return sorted(t for kind, cid, t, _ in self.records
                      if kind == "quorum_snapshot" and cid == cluster_id and start_ms <= t <= end_ms)

    def wait(self, what, timeout_s: float, message: str):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.read(0.3)
            if what():
                return
        raise AssertionError(f"not within {timeout_s} s: {message}")

    def close(self) -> None:
        self.consumer.close()


class Collector:
    def __init__(self, fleet_file: Path, broker, topic: str, log: Path):
        self.status_port = free_port()
        self.log_path = log
        with log.open("wb") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "quorum.cli", "collect", "--fleet", str(fleet_file),
                                          "--events-bootstrap-server", broker.bootstrap, "--events-topic", topic,
                                          "--interval-ms", str(INTERVAL_MS), "--unreachable-after-ms",
                                          str(2 * INTERVAL_MS), "--status-port", str(self.status_port)],
                                         stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)

    def log(self) -> str:
        return self.log_path.read_text()

    def status(self) -> dict[str, float]:
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.status_port}/metrics", timeout=2).read().decode()
        return {line.rpartition(" ")[0]: float(line.rpartition(" ")[2]) for line in text.splitlines()
                if line and not line.startswith("#")}

    def usage(self) -> tuple[int, int, int]:
        """(threads, open files, RSS bytes) of the process."""
        fields = dict(line.split(":", 1) for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines())
        files = len(list(Path(f"/proc/{self.proc.pid}/fd").iterdir()))
        return int(fields["Threads"]), files, int(fields["VmRSS"].split()[0]) * 1024

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def run(tmp_path, broker, topic):
    made: list[tuple[Collector, Topic]] = []

    def start(clusters: list[dict]) -> tuple[Collector, Topic, Path]:
        path = write_fleet(tmp_path / "fleet.yaml", clusters)
        collector, records = Collector(path, broker, topic, tmp_path / "collect.log"), Topic(broker.bootstrap, topic)
        made.append((collector, records))
        ids = [c["cluster_id"] for c in clusters]
        records.wait(lambda: all(records.snapshots(cid) for cid in ids), 30, "a snapshot from every cluster")
        return collector, records, path
    yield start
    for collector, records in made:
        collector.stop()
        records.close()
        print(collector.log()[-3000:])


def gaps(times: list[int], start_ms: int, end_ms: int) -> int:
    """The longest stretch of [start_ms, end_ms] without a snapshot."""
    edges = [start_ms] + times + [end_ms]
    return max(b - a for a, b in zip(edges, edges[1:]))


def test_a_hung_cluster_delays_no_other_clusters_snapshots_and_is_reported_timing_out(fleet, run):
    clusters = fleet.endpoints()[:6]
    collector, records, _ = run(clusters)
    hung, others = clusters[0]["cluster_id"], [c["cluster_id"] for c in clusters[1:]]
    time.sleep(2 * INTERVAL_MS / 1000)  # every cluster past its first rounds
    start_ms = int(time.time() * 1000)
    fleet.hang(0)
    try:
        records.wait(lambda: any(k == "quorum_poll_error" and cid == hung and e == "timeout"
                                 for k, cid, _, e in records.records), 5, "the hung cluster's timeout")
        time.sleep(3)
        status = collector.status()
    finally:
        fleet.unhang(0)
    end_ms = int(time.time() * 1000)
    records.wait(lambda: records.snapshots(hung, end_ms), 10, "the hung cluster's snapshots again")
    records.read(1.0)
    longest = {cid: gaps(records.snapshots(cid, start_ms, end_ms), start_ms, end_ms) for cid in others}
    print(f"cluster {hung} hung {end_ms - start_ms} ms; the others' longest gaps: {longest}; status {status}")
    assert max(longest.values()) <= MAX_GAP_MS, longest
    assert not [r for r in records.records if r[0] == "quorum_poll_error" and r[1] in others], \
        "a cluster that did not hang reported a failed poll"
    assert status[f'quorum_collector_cluster_answering{{cluster="{hung}"}}'] == 0
    assert all(status[f'quorum_collector_cluster_answering{{cluster="{cid}"}}'] == 1 for cid in others)
    assert status["quorum_collector_clusters"] == 6
    assert f"{hung}: DescribeQuorum on {clusters[0]['bootstrap']}: timeout" in collector.log()


def test_sighup_adds_and_removes_clusters_and_a_file_that_does_not_load_keeps_the_fleet(fleet, run):
    clusters = fleet.endpoints()
    collector, records, path = run(clusters[:4])
    removed, added = clusters[0]["cluster_id"], clusters[4]["cluster_id"]
    kept = [c["cluster_id"] for c in clusters[1:4]]
    start_ms = int(time.time() * 1000)
    write_fleet(path, clusters[1:5])
    collector.proc.send_signal(signal.SIGHUP)
    records.wait(lambda: records.snapshots(added), 10, "the added cluster's first snapshot")
    reloaded_ms = int(time.time() * 1000)
    assert "read again: 1 cluster(s) added, 1 removed, 3 unchanged" in collector.log()
    path.write_text("clusters: [{cluster_id: broken}]\n")
    collector.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 5
    while "does not load" not in collector.log() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(2)
    end_ms = int(time.time() * 1000)
    records.read(1.0)
    print(collector.log()[-1500:])
    assert "the fleet file does not load, the 4 cluster(s) watched stay as they are" in collector.log()
    assert "clusters[0] (broken): give bootstrap_server or bootstrap_controller" in collector.log()
    assert not records.snapshots(removed, reloaded_ms + INTERVAL_MS), "the removed cluster is still polled"
    longest = {cid: gaps(records.snapshots(cid, start_ms, end_ms), start_ms, end_ms) for cid in kept + [added]
               if cid != added} | {added: gaps(records.snapshots(added, reloaded_ms, end_ms), reloaded_ms, end_ms)}
    print(f"longest gaps across both reloads: {longest}")
    assert max(longest.values()) <= MAX_GAP_MS, longest
    assert collector.status()["quorum_collector_clusters"] == 4


def test_threads_open_files_and_memory_come_back_after_repeated_hangs(fleet, run):
    clusters = fleet.endpoints()[:4]
    collector, records, _ = run(clusters)
    time.sleep(2)
    steady = collector.usage()
    seen = []
    for _ in range(3):
        fleet.hang(1)
        time.sleep(3)
        during = collector.usage()
        fleet.unhang(1)
        records.wait(lambda: records.snapshots(clusters[1]["cluster_id"], int(time.time() * 1000) - 400), 10,
                     "the cluster answering again")
        time.sleep(1)
        seen.append((during, collector.usage()))
    after = collector.usage()
    print(f"threads, open files, RSS: steady {steady}; hung and after, per cycle: {seen}; at the end {after}")
    assert max(d[0] for d, _ in seen) <= steady[0] and after[0] <= steady[0], "threads grew"
    assert after[1] <= steady[1] + 2, "open files grew"
    assert after[2] <= steady[2] + 20 * 1024 * 1024, "RSS grew by more than 20 MB"
