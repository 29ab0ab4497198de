"""`quorum collect` against this project's own nodes, at the documented interval, its records
judged by the health state machine: a healthy quorum gives no verdict at all, and when the
quorum loses its leader the failed polls give `leaderless`.

The healthy phase lasts QUORUM_COLLECTOR_SOAK_S seconds (45 by default; QUORUM_COLLECTOR_SOAK_S=600
runs the ten-minute soak docs/deployment.md describes)."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from quorum import events
from quorum.testing.local_cluster import Cluster
from streaming.health import statuses as S
from streaming.health.config import HealthConfig
from streaming.health.state import new_state
from streaming.health.tracker import QuorumTracker

pytestmark = pytest.mark.slow

SOAK_S = int(os.environ.get("QUORUM_COLLECTOR_SOAK_S", "45"))
AFTER_S = 10  # polls after the leader is gone


def read_all(bootstrap: str, topic: str, n: int, timeout_s: float = 60) -> list[dict]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "verdicts", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    out: list[dict] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(out) < n and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None and not msg.error():
                out.append(events.to_dict(events.decode(msg.value())))
    finally:
        c.close()
    return out


def test_a_healthy_quorum_polled_every_second_gives_nothing_then_a_leaderless_one(tmp_path, broker, topic_factory):
    topic = topic_factory(1)
    c = Cluster(tmp_path, voters=3, observers=1)  # Kafka's timeouts, as the job's defaults assume
    c.start()
    polls = SOAK_S + AFTER_S
    try:
        leader = c.wait_leader()
        # a healthy quorum: the observer, started with the others, may still be copying the log
        c.wait_every_replica_caught_up(leader, timeout_s=30, within_ms=1000)
        survivor = next(i for i in c.voter_ids if i != leader)
        collector = subprocess.Popen(
            [sys.executable, "-m", "quorum.cli", "collect", "--bootstrap-server", c.bootstrap(survivor),
             "--interval-ms", "1000", "--events-bootstrap-server", broker.bootstrap, "--events-topic", topic,
             "--count", str(polls)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(SOAK_S)  # the healthy phase: a duration, not a condition
        lost_at_ms = int(time.time() * 1000)
        for i in c.voter_ids:
            if i != survivor:
                c.kill(i)  # the survivor alone: no leader, every poll fails
        _, err = collector.communicate(timeout=AFTER_S + 60)
        assert collector.returncode == 0, err.decode()[-2000:]
    finally:
        c.stop_all()
    records = read_all(broker.bootstrap, topic, polls)
    assert len(records) == polls

    cfg, state = HealthConfig(), new_state("test-cluster", "__cluster_metadata", 0)
    rows: list[dict] = []
    for offset, rec in enumerate(records):  # one poll per batch, as a 1 s trigger sees them
        rec["_offset"] = offset
        tracker = QuorumTracker(cfg, state)
        tracker.apply_all([rec])
        rows += tracker.evaluate(None)
    healthy = [r for r in records if r["time_ms"] < lost_at_ms]
    assert len(healthy) >= SOAK_S - 2 and all(r["type"] == "quorum_snapshot" for r in healthy)
    transitions = [r for r in rows if r["kind"] == "transition"]
    # the quorum's clock is the collector's here (its only source), the same machine's as lost_at_ms
    before = [t for t in transitions if t["now_ms"] < lost_at_ms]
    assert before == [], f"flagged while healthy: {before}"
    print(f"{len(healthy)} polls of a healthy quorum ({SOAK_S} s): {len(before)} transitions")
    quorum = [(t["previous_status"], t["status"]) for t in transitions if t.get("replica_id") is None]
    assert quorum == [(S.HEALTHY, S.LEADERLESS)], transitions
    errors = [r for r in records if r["type"] == "quorum_poll_error"]
    assert errors and "DescribeQuorum failing" in [r for r in rows if r["kind"] == "quorum"][-1]["reason"]
