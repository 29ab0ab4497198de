"""The whole job (Apache Kafka, local[2]) fed what real quorums send, live: a follower whose
clock is 3 s ahead, a quorum whose Kafka partition is read 3 s behind the others, and a quorum
seen only through a collector whose clock is 1 s ahead. Nothing may be flagged while they are
healthy; then each gets a real fault, which must be flagged on time."""
from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Producer

from prometheus_tools import wait_for
from quorum.events import encode, from_dict, quorum_key
from streaming.config import JobConfig
from streaming.health import statuses as S
from streaming.job import job_batch_writer, start_job

from .quorum_script import TOPIC, QuorumScript

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TRIGGER_MS = 500
FAULT_AT_S = 14.0
COLLECTOR_SKEW_MS = 1000


class LiveQuorums(threading.Thread):
    """Publishes three scripted clusters at real-time pace, 100 ms a step; the collector's
    snapshots every `poll_every_steps` steps; the faults at `fault_at_s` (None: none)."""

    def __init__(self, bootstrap: str, topic: str, poll_every_steps: int = 10, fault_at_s: float | None = FAULT_AT_S):
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "partitioner": "murmur2_random"})
        # a whole second: the script appends its NoOps on multiples of 500 ms
        self.topic, self.stop, self.t0 = topic, threading.Event(), int(time.time()) * 1000 + 1000
        self.skewed = QuorumScript(cluster="skewed", t0=self.t0)
        self.skewed.skew[3] = 3000
        self.late = QuorumScript(cluster="late", t0=self.t0)
        # the leader publishes its view of each replica, as the project's nodes do: the job
        # reduces each replica's fetches per tick (the skewed quorum's leader publishes none)
        self.late.publishes_view = True
        self.polled = QuorumScript(cluster="polled", t0=self.t0)
        self.held_back: list[tuple[float, list[dict]]] = []
        self.last_snapshot_ms = -1  # the collector's stamp of its last successful poll
        self.faulted = False
        self.poll_every_steps, self.fault_at_s = poll_every_steps, fault_at_s

    def send(self, records: list[dict]) -> None:
        for r in records:
            value = r if isinstance(r, bytes) else encode(from_dict(r))
            key = quorum_key(r["cluster_id"], TOPIC, 0)
            self.producer.produce(self.topic, key=key, value=value)
        self.producer.poll(0)

    def run(self) -> None:
        step = 0
        while not self.stop.is_set():
            step += 1
            wait = self.t0 / 1000 + step * 0.1 - time.time()
            if wait > 0:
                time.sleep(wait)
            if not self.faulted and self.fault_at_s is not None and time.time() - self.t0 / 1000 >= self.fault_at_s:
                self.faulted = True
                self.skewed.mode[2] = "silent"
                self.late.mode[3] = "silent"
            self.send(self.skewed.step())
            # the late quorum's partition is read 3 s behind: its records arrive 3 s late
            self.held_back.append((time.time() + 3.0, self.late.step()))
            while self.held_back and self.held_back[0][0] <= time.time():
                self.send(self.held_back.pop(0)[1])
            self.polled.step()
            if step % self.poll_every_steps == 0:
                if self.faulted:
                    poll = self.polled.poll_error(collector_skew=COLLECTOR_SKEW_MS)
                else:
                    poll = self.polled.snapshot(collector_skew=COLLECTOR_SKEW_MS)
                    self.last_snapshot_ms = poll["time_ms"]
                self.send([poll])
        self.producer.flush(10)


def start_recorded_job(spark, broker, topic: str, tmp_path, trigger_ms: int = TRIGGER_MS):
    """The job on `topic`, with the transitions it publishes recorded as (wall time, event)."""
    cfg = JobConfig.from_dict({
        "source": {"bootstrap_servers": broker.bootstrap, "topic": topic,
                   "starting_offsets": "earliest"},
        "job": {"checkpoint_location": str(tmp_path / "checkpoint"), "trigger_interval_ms": trigger_ms},
        "dead_letters": {"path": str(tmp_path / "dead")},
        "health": {"tick_ms": trigger_ms},
        "sink": {"prometheus": {"mode": "off"}}})
    writer = job_batch_writer(cfg)
    seen: list[tuple[float, dict]] = []
    writer.add_event_listener(lambda events: seen.extend((time.time(), e) for e in events if e["kind"] == "transition"))
    job = start_job(spark, cfg, writer)
    wait_for(lambda: job.health_query.lastProgress is not None, 120, "the job's first micro-batch")
    return cfg, job, seen


def test_skewed_clocks_a_late_partition_and_a_collector_are_judged_right_through_the_job(
        spark, broker, topic_factory, tmp_path):
    topic = topic_factory(partitions=2)
    cfg, job, seen = start_recorded_job(spark, broker, topic, tmp_path)
    live = LiveQuorums(broker.bootstrap, topic)
    live.start()

    def flagged(cluster: str, replica: int | None, status: str) -> list[float]:
        return [w for w, e in seen if e["cluster_id"] == cluster and e.get("replica_id") == replica
                and e["status"] == status]
    try:
        wait_for(lambda: flagged("skewed", 2, S.UNREACHABLE) and flagged("late", 3, S.UNREACHABLE)
                 and flagged("polled", None, S.LEADERLESS), 60, f"the real faults flagged; seen {seen}")
    finally:
        job.stop()  # first: a publisher stopping under a running job would be silence to judge
        live.stop.set()
        live.join()
    fault_wall = live.t0 / 1000 + FAULT_AT_S
    before = [e for w, e in seen if w < fault_wall + 1.0]
    assert before == [], f"flagged while healthy: {before}"
    # Each fault flagged within its threshold on the quorum's own clock, plus one trigger: for the
    # skewed and the late quorums on the leader's clock from the fault; for the polled one on the
    # collector's (1 s ahead) from its last successful poll, the last time the leader was heard
    # (the fault falls somewhere in the poll interval after it). On the wall clock, whatever the
    # machine's load added, printed.
    threshold_ms = cfg.health.unreachable_after_ms
    fault_ms = live.t0 + int(FAULT_AT_S * 1000)
    for cluster, replica, status, heard_ms, allowance_ms in (
            ("skewed", 2, S.UNREACHABLE, fault_ms, 0), ("late", 3, S.UNREACHABLE, fault_ms, 0),
            ("polled", None, S.LEADERLESS, live.last_snapshot_ms, 1000)):
        wall, event = next((w, e) for w, e in seen if e["cluster_id"] == cluster
                           and e.get("replica_id") == replica and e["status"] == status)
        on_clock = event["now_ms"] - heard_ms
        print(f"{cluster}: {status} {on_clock / 1000:.1f} s after it was last heard on the quorum's clock, "
              f"{wall - fault_wall:.1f} s after the fault on the wall clock")
        assert threshold_ms <= on_clock <= threshold_ms + allowance_ms + TRIGGER_MS + 500, (cluster, on_clock)
        assert wall - fault_wall <= 60
    # and nothing else was flagged: only the faulted replicas and the quorums they degrade
    others = {(e["cluster_id"], e.get("replica_id"), e["status"]) for _, e in seen}
    assert others <= {("skewed", 2, S.UNREACHABLE), ("skewed", None, S.DEGRADED), ("late", 3, S.UNREACHABLE),
                      ("late", None, S.DEGRADED), ("polled", None, S.LEADERLESS),
                      ("polled", 1, S.UNKNOWN), ("polled", 2, S.UNKNOWN), ("polled", 3, S.UNKNOWN)}, \
        [(round(w - fault_wall, 1), e["cluster_id"], e.get("replica_id"), e["previous_status"], e["status"],
          e["reason"]) for w, e in seen]


def test_every_publisher_stopping_at_once_pages_nothing_with_a_two_second_poller_among_them(
        spark, broker, topic_factory, tmp_path):
    """What an outage of the events broker looks like to the job: every publisher stops at the
    same moment. The quorum seen through a collector polling every 2 s (slower than `quorum
    collect` allows) has its last snapshot up to two batches before the others' last records;
    it is held with them, never judged on that silence."""
    topic = topic_factory(partitions=2)
    # the job's default trigger: a 2 s poller's snapshot lands in every second micro-batch
    cfg, job, seen = start_recorded_job(spark, broker, topic, tmp_path, trigger_ms=1000)
    live = LiveQuorums(broker.bootstrap, topic, poll_every_steps=20, fault_at_s=None)
    live.start()
    try:
        wait_for(lambda: {v.quorum["cluster_id"] for v in job.writer.snapshot.views()} >= {"skewed", "late", "polled"}
                 and time.time() >= live.t0 / 1000 + 8, 60, "three quorums seen for 8 s")
        live.stop.set()   # every publisher at once
        live.join()
        stopped = time.time()
        wait_for(lambda: job.writer.monitor.input_stalled(), 60, "the job to see its whole input stalled")
        # silence well past the thresholds silence is judged by (a leader unheard for the fetch
        # timeout is lost; a voter unheard for it is unreachable): a verdict from it would be out
        silence_s = 2 * max(cfg.health.unreachable_after_ms, cfg.health.hw_stall_after_ms,
                            cfg.health.leader_claim_window_ms) / 1000 + 2
        wait_for(lambda: time.time() >= stopped + silence_s, silence_s + 10, "the silence to outlast the thresholds")
    finally:
        job.stop()
    assert seen == [], [(round(w - stopped, 1), e["cluster_id"], e.get("replica_id"), e["previous_status"],
                         e["status"], e["reason"]) for w, e in seen]
