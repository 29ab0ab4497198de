"""A Kafka quorum watched from outside (`quorum collect --node-metrics`): DescribeQuorum snapshots
and each node's own metrics, no fetch records. The collector's failure to reach the cluster is
evidence about the collector's path, never a verdict on the voters; a node whose metrics
endpoint refuses connections is gone at once; the fault tolerance counts what is left.

Each test asserts what must not happen while its fault lasts (no paging status, no healthy
voter unreachable), and the verdict the fault does deserve."""
from __future__ import annotations

from typing import Any

from streaming.health import statuses as S
from streaming.health.config import HealthConfig

from .quorum_script import QuorumScript
from .tracker_harness import Monitor

CFG = HealthConfig()
PAGING = {S.NO_MAJORITY, S.LEADERLESS, S.STALLED_QUORUM, S.SPLIT_BRAIN}


class WatchedKafka(QuorumScript):
    """Kafka nodes: they publish nothing themselves; every second the collector polls
    DescribeQuorum (a snapshot, or an error when `poll_fails` names one) and scrapes each
    node's metrics endpoint: a frozen node's gives nothing, a killed node's refuses."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.leader_talks = False  # no fetch records
        self.poll_fails: str | None = None  # "timeout", "connection_refused", "NOT_LEADER_OR_FOLLOWER"
        self.frozen: set[int] = set()
        self.killed: set[int] = set()

    def round(self) -> list[dict[str, Any]]:
        self.run(1000)
        refused = sorted(self.killed)
        if self.poll_fails is None:
            poll = self.snapshot()
        else:
            code = {"NOT_LEADER_OR_FOLLOWER": 6, "CLUSTER_AUTHORIZATION_FAILED": 31}.get(self.poll_fails, -1)
            poll = self.poll_error(error=self.poll_fails, code=code)
        poll["refused_nodes"] = refused
        nodes = [self.metrics(n) for n in (*self.voters, *self.observers) if n not in self.frozen | self.killed]
        return [poll, *nodes]

    def stop(self, node: int, how: str) -> None:
        """Freeze or kill a node: its fetches stop, and so does its endpoint's answer."""
        (self.frozen if how == "freeze" else self.killed).add(node)
        if node != self.leader:
            self.mode[node] = "silent"


def watched(script: WatchedKafka, mon: Monitor, seconds: int) -> list[dict[str, Any]]:
    """`seconds` collector rounds, one micro-batch each; the quorum rows they gave."""
    rows = []
    for _ in range(seconds):
        rows += [r for r in mon.feed(script.round()) if r["kind"] == "quorum"]
    return rows


def leader_killed_and_replaced(script: WatchedKafka, mon: Monitor, failed_polls: int, more_ms: int = 0,
                               follower_mode: str = "follow") -> None:
    """Leader 1 killed: `failed_polls` rounds answered NOT_LEADER_OR_FOLLOWER and `more_ms` more
    without a leader, then node 2 leads the next epoch, node 3 fetching from it in `follower_mode`."""
    script.stop(1, "kill")
    script.poll_fails = "NOT_LEADER_OR_FOLLOWER"
    watched(script, mon, failed_polls)
    script.run(more_ms)
    script.leader, script.epoch, script.poll_fails = 2, script.epoch + 1, None
    script.mode = {3: follower_mode, 1: "silent"}


def replica_statuses(mon: Monitor, since: int, rid: int) -> set[str]:
    return {r["status"] for r in mon.rows[since:] if r["kind"] == "replica" and r["replica_id"] == rid}


def test_a_quiet_kafka_quorum_watched_with_node_metrics_is_healthy_with_one_failure_to_spare():
    script, mon = WatchedKafka(), Monitor()
    watched(script, mon, 30)
    assert mon.events("transition") == [] or {t["status"] for t in mon.events("transition")} <= {
        S.HEALTHY, S.CAUGHT_UP}
    q = mon.quorum()
    assert (q["status"], q["fault_tolerance"], q["poll_error"], q["poll_failures"]) == (S.HEALTHY, 1, None, 0)


def test_polls_timing_out_while_every_node_answers_for_itself_page_nothing_and_flag_no_voter():
    script, mon = WatchedKafka(), Monitor()
    watched(script, mon, 10)
    mark = len(mon.rows)
    script.poll_fails = "timeout"  # the broker the collector polls through hangs
    rows = watched(script, mon, 20)
    assert {r["status"] for r in rows} == {S.HEALTHY}, [(r["status"], r["reason"]) for r in rows]
    for v in (2, 3):
        assert S.UNREACHABLE not in replica_statuses(mon, mark, v)
    assert rows[-1]["poll_error"] == "timeout" and rows[-1]["poll_failures"] == 20
    assert "judged by the nodes' own views" in rows[-1]["reason"] and rows[-1]["fault_tolerance"] == 1
    script.poll_fails = None
    watched(script, mon, 5)
    assert mon.quorum()["status"] == S.HEALTHY and mon.replica(2)["status"] == S.CAUGHT_UP


def test_the_polled_follower_frozen_costs_no_majority_and_the_other_follower_nothing():
    """The node the collector talks to hangs: for a few polls nothing answers, then the
    collector asks another node. Meanwhile the other follower stays reachable."""
    script, mon = WatchedKafka(), Monitor()
    watched(script, mon, 10)
    mark = len(mon.rows)
    script.stop(3, "freeze")
    script.poll_fails = "timeout"
    rows = watched(script, mon, 3)
    script.poll_fails = None  # another node answers
    rows += watched(script, mon, 10)
    assert not {r["status"] for r in rows} & PAGING, [(r["status"], r["reason"]) for r in rows]
    assert S.UNREACHABLE not in replica_statuses(mon, mark, 2)
    frozen = mon.replica(3)
    assert (frozen["status"], frozen["cause"]) == (S.UNREACHABLE, S.DOWN)
    assert (mon.quorum()["status"], mon.quorum()["fault_tolerance"]) == (S.DEGRADED, 0)


def test_the_collector_reaching_no_node_and_no_node_answering_is_unobserved_not_a_verdict():
    script, mon = WatchedKafka(), Monitor()
    watched(script, mon, 10)
    for n in script.voters:
        script.frozen.add(n)  # every node hangs: the endpoints accept, and answer nothing
    script.poll_fails = "timeout"
    rows = watched(script, mon, 20)
    assert not {r["status"] for r in rows} & PAGING, [(r["status"], r["reason"]) for r in rows]
    q = mon.quorum()
    assert q["status"] == S.UNOBSERVED and q["fault_tolerance"] is None
    assert "the collector reaches no node" in q["reason"] and "timeout" in q["reason"]
    assert {mon.replica(v)["status"] for v in script.voters} <= {S.UNKNOWN, S.CAUGHT_UP}
    script.frozen.clear()
    script.poll_fails = None
    watched(script, mon, 3)
    assert mon.quorum()["status"] == S.HEALTHY


def test_a_secured_cluster_refusing_the_collector_is_unobserved_with_the_acl_it_needs_never_a_verdict():
    script, mon = WatchedKafka(), Monitor()
    watched(script, mon, 10)
    script.poll_fails = "CLUSTER_AUTHORIZATION_FAILED"  # an answer, but one about the collector's ACLs
    rows = watched(script, mon, 10)
    assert {r["status"] for r in rows} == {S.HEALTHY}, [(r["status"], r["reason"]) for r in rows]
    assert mon.quorum()["poll_error"] == "CLUSTER_AUTHORIZATION_FAILED"
    for n in script.voters:
        script.frozen.add(n)  # and no node's own view either: nothing is known of the voters
    for error in ("CLUSTER_AUTHORIZATION_FAILED", "authentication_failed", "tls_failed"):
        script.poll_fails = error
        rows = watched(script, mon, 15)
        assert not {r["status"] for r in rows} & PAGING, [(r["status"], r["reason"]) for r in rows]
        assert {mon.replica(v)["status"] for v in script.voters} <= {S.UNKNOWN, S.CAUGHT_UP}
        q = mon.quorum()
        assert q["status"] == S.UNOBSERVED and "the collector is refused" in q["reason"], q["reason"]
    assert "TLS handshake failed" in mon.quorum()["reason"]
    script.poll_fails = "CLUSTER_AUTHORIZATION_FAILED"
    watched(script, mon, 1)
    assert "needs DESCRIBE on the CLUSTER" in mon.quorum()["reason"]


def test_every_node_refusing_connections_is_a_real_outage_and_pages():
    script, mon = WatchedKafka(), Monitor()
    watched(script, mon, 10)
    for n in script.voters:
        script.stop(n, "kill")
    script.poll_fails = "connection_refused"
    script.noops = False
    rows = watched(script, mon, 10)
    assert S.UNOBSERVED not in {r["status"] for r in rows}
    assert mon.quorum()["status"] == S.LEADERLESS
    assert {(mon.replica(v)["status"], mon.replica(v)["cause"]) for v in script.voters} == {(S.UNREACHABLE, S.DOWN)}


def test_a_killed_follower_whose_endpoint_refuses_is_down_at_once_not_behind_first():
    script, mon = WatchedKafka(), Monitor()
    watched(script, mon, 10)
    mark = len(mon.rows)
    script.stop(3, "kill")
    watched(script, mon, 1)
    first = [r for r in mon.rows[mark:] if r["kind"] == "transition" and r.get("replica_id") == 3]
    assert [(t["status"], t["cause"]) for t in first] == [(S.UNREACHABLE, S.DOWN)], first
    assert "refuses connections" in mon.replica(3)["reason"]
    assert mon.quorum()["status"] == S.DEGRADED and mon.quorum()["fault_tolerance"] == 0


def test_a_killed_leader_is_down_at_once_once_its_successor_leads():
    script, mon = WatchedKafka(), Monitor()
    watched(script, mon, 10)
    mark = len(mon.rows)
    leader_killed_and_replaced(script, mon, failed_polls=3)
    watched(script, mon, 5)
    old = [(t["status"], t["cause"]) for t in mon.rows[mark:]
           if t["kind"] == "transition" and t.get("replica_id") == 1]
    assert old and old[0] == (S.UNREACHABLE, S.DOWN) and (S.LAGGING, S.BEHIND) not in old, old
    assert (mon.replica(1)["status"], mon.replica(1)["cause"]) == (S.UNREACHABLE, S.DOWN)
    assert mon.quorum()["leader_id"] == 2


def test_a_restarted_node_answering_again_is_no_longer_gone():
    script, mon = WatchedKafka(), Monitor()
    watched(script, mon, 10)
    script.stop(3, "kill")
    watched(script, mon, 3)
    script.killed.clear()
    script.mode[3] = "follow"
    watched(script, mon, 10)
    assert mon.replica(3)["status"] == S.CAUGHT_UP and mon.quorum()["status"] == S.HEALTHY
    assert mon.quorum()["fault_tolerance"] == 1


def test_a_follower_caught_up_when_its_leader_died_is_not_lagging_before_the_new_leader_saw_it_fetch():
    """Kafka's new leader starts its followers' caught-up times afresh: its first DescribeQuorum
    answer can show a follower that has fetched once and is not yet caught up by its count,
    the old leader's caught-up time 2 s and more behind (the election). That follower is not
    lagging: it had no leader to catch up with."""
    script, mon = WatchedKafka(), Monitor()
    watched(script, mon, 10)
    mark = len(mon.rows)
    leader_killed_and_replaced(script, mon, failed_polls=2, more_ms=400)  # 2.4 s with no leader in all
    first = script.round()
    for v in first[0]["voters"]:
        if v["replica_id"] == 3:  # fetched from the new leader, not yet at its end
            v["last_caught_up_timestamp_ms"] = -1
    mon.feed(first)
    watched(script, mon, 5)
    assert replica_statuses(mon, mark, 3) <= {S.CAUGHT_UP, S.UNKNOWN}, \
        [(r["status"], r.get("reason")) for r in mon.rows[mark:] if r.get("replica_id") == 3]
    assert mon.quorum()["leader_id"] == 2 and mon.replica(3)["status"] == S.CAUGHT_UP


def test_a_follower_lagging_before_a_failover_is_still_lagging_after_it():
    script, mon = WatchedKafka(), Monitor()
    watched(script, mon, 10)
    script.mode[3] = "lag"  # fetching, never at the leader's end
    watched(script, mon, 3)
    assert mon.replica(3)["status"] == S.LAGGING
    leader_killed_and_replaced(script, mon, failed_polls=2, follower_mode="lag")
    rows = watched(script, mon, 2)
    assert rows and mon.replica(3)["status"] in (S.LAGGING, S.STALLED), mon.replica(3)
