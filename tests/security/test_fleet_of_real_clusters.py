"""One `quorum collect --fleet` process watching real Kafka clusters at once: two plaintext
clusters of two Kafka lines and the secured one (SASL_SSL, its own client properties), each
publishing its own records. One cluster frozen whole goes `unobserved` with the collector's
error as its reason, while the others' snapshots stay at most two intervals apart and none of
them reports a failed poll; SIGHUP then removes one cluster and adds another (a third line)."""
from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from quorum import events, jvm
from quorum.local_kafka.kafka_cluster import KafkaCluster
from streaming.health.config import HealthConfig
from streaming.health.state import new_state
from streaming.health.tracker import QuorumTracker

pytestmark = pytest.mark.slow

INTERVAL_MS = 1000
ROOT = Path(__file__).resolve().parents[2]
LINES = {"a": None, "b": "3.9.1", "d": "4.3.2"}  # None: the pinned default (4.4)


@pytest.fixture(scope="module")
def plaintext(tmp_path_factory):
    """One-node combined clusters of three Kafka lines, started side by side."""
    clusters = {name: KafkaCluster(controllers=1, topology="combined", kafka_version=version,
                                   voter_set="static" if version == "3.9.1" else None,
                                   base_dir=tmp_path_factory.mktemp(f"fleet-{name}"))
                for name, version in LINES.items()}
    failures: list[BaseException] = []

    def start(c: KafkaCluster) -> None:
        try:
            c.start()
        except BaseException as e:  # noqa: BLE001 - raised below, in the test's thread
            failures.append(e)
    starting = [threading.Thread(target=start, args=(c,)) for c in clusters.values()]
    for t in starting:
        t.start()
    for t in starting:
        t.join()
    try:
        if failures:
            raise failures[0]
        yield clusters
    finally:
        for c in clusters.values():
            c.stop()


class Verdicts:
    """The events topic folded into each cluster's health state, as the streaming job folds it."""

    def __init__(self, bootstrap: str, topic: str):
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fleet-real", "enable.auto.commit": False})
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(4)])
        self.states: dict[str, dict] = {}
        self.records: list[tuple[str, str, int, str]] = []  # (type, cluster, time, error)
        self.quorum: dict[str, list[tuple[str, str]]] = {}  # cluster -> its quorum's (status, reason) rows

    def read(self, seconds: float = 0.5) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for msg in self.consumer.consume(500, 0.1):
                if msg.error() is not None:
                    continue
                rec = events.to_dict(events.decode(msg.value()))
                cid = rec["cluster_id"]
                self.records.append((rec["type"], cid, rec["time_ms"], rec.get("error") or ""))
                state = self.states.setdefault(cid, new_state(cid, "__cluster_metadata", 0))
                tracker = QuorumTracker(HealthConfig(), state)
                tracker.apply_all([rec])
                for row in tracker.evaluate(None):
                    if row["kind"] == "quorum":
                        self.quorum.setdefault(cid, []).append((row["status"], row.get("reason") or ""))

    def snapshots(self, cid: str, start_ms: int = 0, end_ms: int = 1 << 62) -> list[int]:
        return sorted(t for kind, c, t, _ in self.records if kind == "quorum_snapshot" and c == cid
                      and start_ms <= t <= end_ms)

    def wait(self, what, timeout_s: float, message: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.read(0.3)
            if what():
                return
        raise AssertionError(f"not within {timeout_s} s: {message}; quorum rows: "
                             f"{ {c: rows[-3:] for c, rows in self.quorum.items()} }")


def entry(cluster_id: str, bootstrap: str, command_config: Path | None = None) -> dict:
    return {"cluster_id": cluster_id, "bootstrap_server": bootstrap,
            **({"command_config": str(command_config)} if command_config else {})}


def longest_gap(times: list[int], start_ms: int, end_ms: int) -> int:
    edges = [start_ms] + times + [end_ms]
    return max(b - a for a, b in zip(edges, edges[1:]))


def test_one_collector_watches_real_clusters_through_a_freeze_and_a_reload(plaintext, kafka, files, broker,
                                                                          topic, tmp_path):
    a, b, d = plaintext["a"], plaintext["b"], plaintext["d"]
    secured = entry(kafka.cluster_id, kafka.bootstrap, files["collector"])
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(yaml.safe_dump({"clusters": [entry(a.cluster_id, a.bootstrap), entry(b.cluster_id, b.bootstrap),
                                                  secured]}))
    log = tmp_path / "collect.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "quorum.cli", "collect", "--fleet", str(fleet),
                                 "--events-bootstrap-server", broker.bootstrap, "--events-topic", topic],
                                stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    verdicts = Verdicts(broker.bootstrap, topic)
    try:
        watched = [a.cluster_id, b.cluster_id, kafka.cluster_id]
        verdicts.wait(lambda: all(verdicts.snapshots(c) for c in watched), 30, "every cluster's first snapshot")
        verdicts.wait(lambda: all(verdicts.quorum.get(c, [("", "")])[-1][0] == "healthy" for c in watched), 30,
                      "every quorum healthy")
        print(f"Kafka {a.kafka_version}, {b.kafka_version} and the secured {jvm.default_kafka_version()} answer")

        others = [b.cluster_id, kafka.cluster_id]
        marks = {c: len(verdicts.quorum[c]) for c in others}
        start_ms = int(time.time() * 1000)
        a.freeze(1)
        try:
            verdicts.wait(lambda: verdicts.quorum[a.cluster_id][-1][0] == "unobserved", 20, "the frozen one unobserved")
        finally:
            a.resume(1)
        end_ms = int(time.time() * 1000)
        status, reason = verdicts.quorum[a.cluster_id][-1]
        gaps = {c: longest_gap(verdicts.snapshots(c, start_ms, end_ms), start_ms, end_ms) for c in others}
        print(f"frozen {end_ms - start_ms} ms: {a.cluster_id} {status} ({reason}); the others' longest gaps {gaps}")
        assert "timeout" in reason
        assert max(gaps.values()) <= 2 * INTERVAL_MS, gaps
        assert not [r for r in verdicts.records if r[0] == "quorum_poll_error" and r[1] in others]
        moved = {c: verdicts.quorum[c][marks[c]:] for c in others
                 if any(s != "healthy" for s, _ in verdicts.quorum[c][marks[c]:])}
        assert not moved, f"another cluster's verdict moved: {moved}"
        verdicts.wait(lambda: verdicts.quorum[a.cluster_id][-1][0] == "healthy", 30, "the thawed one healthy again")

        fleet.write_text(yaml.safe_dump({"clusters": [entry(b.cluster_id, b.bootstrap), secured,
                                                      entry(d.cluster_id, d.bootstrap)]}))
        reload_ms = int(time.time() * 1000)
        proc.send_signal(signal.SIGHUP)
        verdicts.wait(lambda: verdicts.snapshots(d.cluster_id), 20, "the added cluster's first snapshot")
        time.sleep(2 * INTERVAL_MS / 1000)
        verdicts.read(1.0)
        assert "read again: 1 cluster(s) added, 1 removed, 2 unchanged" in log.read_text()
        assert not verdicts.snapshots(a.cluster_id, reload_ms + INTERVAL_MS), "the removed cluster is still polled"
        now_ms = int(time.time() * 1000)
        assert max(longest_gap(verdicts.snapshots(c, reload_ms, now_ms), reload_ms, now_ms) for c in others) \
            <= 2 * INTERVAL_MS
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
        verdicts.consumer.close()
        print(log.read_text()[-3000:])
