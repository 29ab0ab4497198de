"""A project node as a voter among Apache Kafka's own controllers: a static quorum
(`controller.quorum.voters`, kraft.version 0) of Kafka controllers 1 and 2 and project node 3.
Elections go both ways, with pre-vote; Kafka's controllers follow the project node and replay
what it appends (its LeaderChange and NoOp records are Kafka's formats); leaders are killed on
each side, a follower is killed and restarted, a leader stops gracefully with EndQuorumEpoch.
The project node is cut off by packet-filter rules and healed. After each: one leader, every
live voter caught up, no Kafka controller logging a fatal fault, and no node's high watermark
ever moving back. Each test prints the times it measured.

Where the core had differed from Kafka, it now does as Kafka's controllers require:
- BeginQuorumEpoch and EndQuorumEpoch v0 are not flexible; v1 is, with directory ids and the
  leader's endpoints. Vote v1+ carries the candidate's and the voter's directory ids.
- A leader's NoOp is Kafka's metadata NoOpRecord, and its LeaderChange record Kafka's binary
  LeaderChangeMessage; metadata records carry no headers, and the records of one batch share
  one timestamp (Kafka's RecordsIterator stops the controller with a fatal fault otherwise).
- The first leader of a new metadata log must be a Kafka controller: it writes the cluster's
  bootstrap metadata (metadata.version), without which a Kafka controller cannot apply anything.
"""
from __future__ import annotations

import os
import time
import uuid

import pytest

from kafka_interop.conftest import HighWatermarkSampler
from kafka_interop.test_project_observer import batches_below
from deploy.packet_filter import PacketFilter, cgroup2_root
from quorum.kafka_watch.kafka_node_metrics import metrics_record
from quorum.kafka_watch.metrics_connection import scrape
from quorum.local_kafka.kafka_cluster import KafkaCluster
from quorum.local_kafka.loopback_ports import free_port
from quorum.testing.local_cluster import Cluster, read_events

PROJECT = 3
KAFKA = (1, 2)
CAUGHT_UP_MS = 1500      # a live voter has been caught up this recently: it follows the leader
SETTLE_S = 60            # bound for a quorum to elect a leader and every live voter to catch up
# Kafka's controllers wait longer for a leader than the project node (fetch timeout 6 s, election
# timeout 3 s; the project node keeps Kafka's defaults, 2 s and 1 s): a restarted Kafka controller
# then hears the project node's pre-votes before it would run itself, which is the window the
# test opens for the project node to be elected. Either side may win every other election.
KAFKA_SETTINGS = {"controller.quorum.fetch.timeout.ms": "6000", "controller.quorum.election.timeout.ms": "3000"}
PROJECT_SETTINGS: dict = {}


class MixedQuorum:
    def __init__(self, root, cgroups, events_bootstrap: str, events_topic: str):
        self.port = free_port()
        self.kafka = KafkaCluster(controllers=2, brokers=0, base_dir=root / "kafka", other_voters={PROJECT: self.port},
                                  jmx_exporter=True, settings=KAFKA_SETTINGS, cgroup_parent=cgroups)
        (root / "project").mkdir()
        self.project = Cluster(root / "project", voters=1, observers=0, first_id=PROJECT, ports={PROJECT: self.port},
                               cluster_id=self.kafka.cluster_id, cgroup_parent=cgroups,
                               events_bootstrap=events_bootstrap, events_topic=events_topic,
                               settings={"controller.quorum.voters": self.kafka.static_voters,
                                         "quorum.topic": "__cluster_metadata", **PROJECT_SETTINGS})
        self.events = (events_bootstrap, events_topic)
        self.high_watermarks = HighWatermarkSampler((*KAFKA, PROJECT), self._high_watermark)

    # --- life cycle -------------------------------------------------------------------------------

    def start(self) -> "MixedQuorum":
        # Kafka's controllers first: the first leader of a metadata log must be a Kafka controller,
        # which writes the cluster's bootstrap metadata (metadata.version) as its first records.
        # A Kafka follower whose log has none stops with a fatal fault when it commits anything.
        self.kafka.start()
        self.project.start()
        self.settle()
        self.high_watermarks.start()
        return self

    def stop(self) -> None:
        self.high_watermarks.stop()
        self.project.stop_all()
        self.kafka.stop()
        if self.project.cgroup_of(PROJECT).exists():
            self.project.cgroup_of(PROJECT).rmdir()

    def running(self) -> list[int]:
        return [i for i in KAFKA if self.kafka.nodes[i].running()] + ([PROJECT] if self.project.running() else [])

    def kill(self, node_id: int) -> None:
        self.project.kill(PROJECT) if node_id == PROJECT else self.kafka.kill(node_id)

    def restart(self, node_id: int) -> None:
        self.project.start(PROJECT) if node_id == PROJECT else self.kafka.restart(node_id)

    # --- what the quorum says ---------------------------------------------------------------------

    def caught_up(self):
        """The leader's DescribeQuorum when every live voter has just been caught up with it."""
        info = self.kafka.describe(timeout_ms=1000)
        now = int(time.time() * 1000)
        live = self.running()
        fresh = all(v.replica_id == info.leader_id or now - v.last_caught_up_timestamp <= CAUGHT_UP_MS
                    for v in info.voters if v.replica_id in live)
        return info if info.leader_id in live and fresh else None

    def settle(self):
        return self.kafka.wait_for(self.caught_up, SETTLE_S, "one leader that every live voter is caught up with")

    def leader(self) -> int:
        return self.kafka.describe(timeout_ms=1000).leader_id

    def fatal_faults(self) -> list[str]:
        return [line for i in KAFKA for line in self.kafka.nodes[i].log_path.read_text(errors="replace").splitlines()
                if "fatal fault" in line.lower()]

    def _high_watermark(self, node_id: int) -> tuple[int, int] | None:
        """(pid, high watermark) of a running node, None if it does not answer now."""
        try:
            if node_id == PROJECT:
                status = self.project.try_status(PROJECT)
                return (self.project.procs[PROJECT].pid, status["high_watermark"]) if status else None
            node = self.kafka.nodes[node_id]
            text = scrape(self.kafka.metrics_url(node_id), 1)
            return node.pid, metrics_record(text, self.kafka.cluster_id, node_id, 0, ()).high_watermark
        except (OSError, AssertionError, ValueError):
            return None

    def assert_sound(self) -> None:
        """No Kafka controller stopped on a fatal fault; no node's high watermark moved back (a
        restarted process starts a new series: Kafka keeps no high watermark across restarts)."""
        assert not self.fatal_faults(), self.fatal_faults()
        self.high_watermarks.assert_never_back()


@pytest.fixture(scope="module")
def quorum(tmp_path_factory, broker):
    """The quorum; the project node publishes its events to the session's broker, as a node of
    the monitored quorum would to the monitor's Kafka."""
    cgroups = cgroup2_root() / f"quorum-mixed-{os.getpid()}"
    topic = broker.create_topic(f"mixed-quorum-events-{uuid.uuid4().hex[:8]}", 1)
    q = MixedQuorum(tmp_path_factory.mktemp("mixed-quorum"), cgroups, broker.bootstrap, topic)
    started = time.monotonic()
    try:
        q.start()
        print(f"\nKafka controllers 1, 2 and project node 3: one quorum in {time.monotonic() - started:.1f} s")
        yield q
    finally:
        q.stop()
        if cgroups.exists():
            cgroups.rmdir()


def await_leader(quorum, what: str, match) -> tuple[int, float]:
    start = time.monotonic()
    leader = quorum.kafka.wait_for(lambda: (i := quorum.caught_up()) and match(i.leader_id) and i.leader_id,
                                   SETTLE_S, what)
    return leader, time.monotonic() - start


def test_the_project_node_follows_a_kafka_leader_byte_for_byte(quorum):
    info = quorum.settle()
    assert info.leader_id in KAFKA
    status = quorum.project.try_status(PROJECT)
    assert status["state"] == "follower" and status["leader_id"] == info.leader_id
    end = min(info.high_watermark, status["high_watermark"])
    leader_log = quorum.kafka.nodes[info.leader_id].data_dir / "data" / "__cluster_metadata-0" / "00000000000000000000.log"
    mine = batches_below(quorum.project.root / f"node-{PROJECT}" / "log" / "00000000000000000000.log", end)
    assert mine == batches_below(leader_log, end) and len(mine) > 3
    print(f"\nKafka leader {info.leader_id}, epoch {info.leader_epoch}: the project node holds its "
          f"{len(mine)} batches below {end} byte for byte")
    quorum.assert_sound()


def elect_project(quorum) -> float:
    """Make the project node the leader; the seconds its election took once it could win.

    Both Kafka controllers go; the project node keeps asking for pre-votes. The one that was a
    follower comes back first: it has not heard from any leader since it started, so it grants
    the pre-vote and the vote (KIP-996) before its own, longer, fetch timeout. (A Kafka leader
    restarts resigned from its epoch and grants nothing in it.) The other then joins them."""
    leader = quorum.settle().leader_id
    if leader == PROJECT:
        return 0.0
    follower = next(i for i in KAFKA if i != leader)
    for node_id in KAFKA:
        quorum.kill(node_id)
    quorum.restart(follower)
    _, elected_s = await_leader(quorum, f"the project node leading controller {follower}", lambda i: i == PROJECT)
    quorum.restart(leader)
    info = quorum.settle()
    assert info.leader_id == PROJECT
    return elected_s


def ensure_kafka_leads(quorum) -> int:
    """Make a Kafka controller the leader (the project node, if it leads, is killed and restarted:
    only Kafka's controllers can then win) and return it."""
    if quorum.settle().leader_id == PROJECT:
        quorum.kill(PROJECT)
        quorum.restart(PROJECT)
    leader = quorum.settle().leader_id
    assert leader in KAFKA
    return leader


def test_the_project_node_is_elected_and_kafka_controllers_replay_its_records(quorum):
    elected_s = elect_project(quorum)
    info = quorum.settle()
    start_hw = info.high_watermark
    # its NoOps commit every 500 ms, and each Kafka controller's own high watermark follows
    later = quorum.kafka.wait_for(lambda: (i := quorum.caught_up()) and i.high_watermark >= start_hw + 4 and i,
                                  SETTLE_S, "the project leader committing its NoOps")
    kafka_hws = {i: quorum._high_watermark(i)[1] for i in KAFKA}
    print(f"\nproject node elected {elected_s:.1f} s after a Kafka follower was restarted; high watermark "
          f"{start_hw} -> {later.high_watermark}; the Kafka controllers' own: {kafka_hws}")
    assert all(hw >= start_hw for hw in kafka_hws.values())
    assert quorum.project.try_status(PROJECT)["state"] == "leader"
    # the monitor sees Kafka's controllers through the project leader: its fetch records of them
    records = read_events(*quorum.events, lambda recs: {
        r.replica_id for r in recs if r.TYPE == "fetch" and r.leader_epoch == later.leader_epoch
        and r.outcome == "valid" and r.fetch_offset >= later.high_watermark} >= set(KAFKA), timeout_s=30)
    fetches = [r for r in records if r.TYPE == "fetch" and r.leader_epoch == later.leader_epoch]
    assert {(r.leader_id, r.replica_role) for r in fetches} == {(PROJECT, "voter")}
    print(f"{len(fetches)} fetch records of Kafka's controllers from the project leader on the events topic")
    quorum.assert_sound()


@pytest.mark.parametrize("side", ["project", "kafka"])
def test_a_leader_stopping_gracefully_hands_over_with_end_quorum_epoch(quorum, side):
    """SIGTERM: the leader resigns with EndQuorumEpoch and a successor is elected at once, without
    waiting for a follower's fetch timeout (the project node's 2 s, Kafka's controllers' 6 s)."""
    elect_project(quorum) if side == "project" else ensure_kafka_leads(quorum)
    old = quorum.settle().leader_id
    assert (old == PROJECT) == (side == "project")
    project_log = len(quorum.project.log_text(PROJECT))
    stopped = time.monotonic()
    if old == PROJECT:
        assert quorum.project.terminate(PROJECT, timeout_s=15) == 0
    else:
        quorum.kafka.stop_node(old)
    leader, _ = await_leader(quorum, f"a leader after {old} stopped", lambda i: i != old)
    handed_over = time.monotonic() - stopped
    print(f"\n{side} leader {old} stopped with SIGTERM: {leader} leads and every live voter is caught up "
          f"{handed_over:.1f} s later")
    if side == "project":       # Kafka's controllers would have waited 6 s for a fetch to fail
        assert handed_over < 6.0
    else:                       # the project node understood Kafka's EndQuorumEpoch: no fetch timed out
        since = quorum.project.log_text(PROJECT)[project_log:]
        assert "(fetch timeout)" not in since and "malformed" not in since, since
    quorum.restart(old)
    info = quorum.settle()
    assert quorum.project.try_status(PROJECT)["leader_id"] == info.leader_id
    quorum.assert_sound()


@pytest.mark.parametrize("side", ["kafka", "project"])
def test_a_killed_leader_on_either_side_is_replaced(quorum, side):
    elect_project(quorum) if side == "project" else ensure_kafka_leads(quorum)
    old = quorum.settle().leader_id
    assert (old == PROJECT) == (side == "project")
    quorum.kill(old)
    killed = time.monotonic()
    leader, _ = await_leader(quorum, f"a new leader after {old} was killed", lambda i: i != old)
    print(f"\n{side} leader {old} killed: {leader} leads, every live voter caught up, "
          f"{time.monotonic() - killed:.1f} s later")
    quorum.restart(old)
    quorum.settle()
    quorum.assert_sound()


def test_a_killed_follower_catches_up_after_its_restart(quorum):
    info = quorum.settle()
    follower = next(i for i in (PROJECT, *KAFKA) if i != info.leader_id)
    quorum.kill(follower)
    hw = info.high_watermark
    quorum.kafka.wait_for(lambda: (i := quorum.caught_up()) and i.high_watermark > hw + 4, SETTLE_S,
                          f"the quorum committing without {follower}")
    restarted = time.monotonic()
    quorum.restart(follower)
    quorum.settle()
    print(f"\nfollower {follower} killed and restarted: caught up {time.monotonic() - restarted:.1f} s after its restart")
    quorum.assert_sound()


def test_the_project_node_cut_off_and_healed_rejoins_without_disturbing_the_kafka_leader(quorum):
    """Pre-vote (KIP-996) against Kafka's controllers: a cut-off follower cannot win a pre-vote,
    so it never bumps the epoch, and once healed it follows the same leader in the same epoch."""
    ensure_kafka_leads(quorum)
    info = quorum.settle()
    seen = []                    # the project node's statuses while it is cut off
    cut = PacketFilter()
    try:
        cut.cut_process(quorum.port, [quorum.kafka.nodes[i].port for i in KAFKA], quorum.project.cgroup_of(PROJECT))
        started = time.monotonic()
        quorum.kafka.wait_for(lambda: seen.append(quorum.project.try_status(PROJECT)) or
                              seen[-1]["state"] not in ("follower", "leader"),
                              SETTLE_S, "the cut-off project node to stop following")
        lost = time.monotonic() - started
        hw = info.high_watermark
        quorum.kafka.wait_for(lambda: seen.append(quorum.project.try_status(PROJECT)) or
                              quorum.kafka.describe(timeout_ms=1000).high_watermark > hw + 8,
                              SETTLE_S, "Kafka's controllers committing without the project node")
    finally:
        cut.heal()
        cut.close()
    healed = time.monotonic()
    after = quorum.settle()
    states = sorted({st["state"] for st in seen})
    print(f"\nproject node cut off from leader {info.leader_id}: it stopped following after {lost:.1f} s "
          f"(states while cut off: {states}, epochs {sorted({st['epoch'] for st in seen})}); caught up "
          f"{time.monotonic() - healed:.1f} s after the heal, leader {after.leader_id} epoch {after.leader_epoch}")
    assert (after.leader_id, after.leader_epoch) == (info.leader_id, info.leader_epoch)
    assert {st["epoch"] for st in seen} == {info.leader_epoch}
    quorum.assert_sound()
