"""A real Apache Kafka KRaft quorum (three controllers, one broker) faulted for real, watched the
way an operator watches one: `quorum collect`'s polls at 1 s, judged by the job's health state
machine. Each test prints the time from the fault to the verdict and bounds it.

Through the leader's DescribeQuorum alone, a frozen, killed or cut-off follower looks the same
(its fetches stop): the verdict is `unreachable` and the cause stays `unknown`, never a guess.
With each node's own view from its JMX exporter endpoint (`quorum collect --node-metrics`), a
killed node is `down` (its endpoint answers nothing) and a cut-off one `partitioned` (it answers,
and campaigns).

The soak's length is QUORUM_KAFKA_SOAK_S seconds (30 by default; 600 is the full run)."""
from __future__ import annotations

import os
import time

import pytest

from kafka_tools import kafka_tool, METADATA_QUORUM
from packet_filter import PacketFilter
from streaming.health import statuses as S
from tests.prometheus_tools import rule, seconds

pytestmark = pytest.mark.slow

SOAK_S = int(os.environ.get("QUORUM_KAFKA_SOAK_S", "30"))
# a fetch timeout (2 s, Kafka's default) plus two polls and an evaluation
VERDICT_WITHIN_S = 2.0 + 2 * 1.0 + 1.0
# recovery holds for 2 fetch timeouts before a better status shows, plus a restarted JVM
RECOVERY_WITHIN_S = 30.0


def settle(watch, timeout_s: float = 30) -> int:
    """Wait until the watch shows a healthy quorum with every voter caught up; its mark then."""
    voters = watch.cluster.controller_ids()

    def healthy() -> bool:
        quorum = watch.latest("quorum")
        return quorum is not None and quorum["status"] == S.HEALTHY and all(
            (watch.latest("replica", v) or {}).get("status") == S.CAUGHT_UP for v in voters)
    watch.cluster.wait_for(healthy, timeout_s, "a healthy verdict")
    return watch.mark()


def seconds_since(t0: float, row: dict) -> float:
    return round(row["wall_ms"] / 1000 - t0, 1)


def replica_path(watch, mark: int, replica_id: int) -> list[tuple[str, str]]:
    return [(r["previous_status"], r["status"]) for r in watch.since(mark) if r.get("replica_id") == replica_id]


def quorum_path(watch, mark: int) -> list[tuple[str, str]]:
    return [(r["previous_status"], r["status"]) for r in watch.since(mark) if r.get("replica_id") is None]


def worsened_then_recovered(path: list[tuple[str, str]], worst: str, recovered: str) -> bool:
    """No flapping in a replica's path: its status only worsens (through `lagging`, say) until
    `worst`, then recovers once, straight to `recovered`."""
    order = S.REPLICA_STATUSES  # best to worst
    *worse, last = path or [(None, None)]
    return bool(worse) and worse[-1][1] == worst and last == (worst, recovered) and all(
        order.index(new) > order.index(old) for old, new in worse)


def test_a_healthy_quorum_polled_at_the_documented_interval_gives_no_transition(watch):
    mark = settle(watch)
    first = len(watch.records)
    time.sleep(SOAK_S)  # the healthy phase: a duration, not a condition
    polls = watch.records[first:]
    assert len(polls) >= SOAK_S - 2 and all(r["type"] == "quorum_snapshot" for r in polls), \
        [r for r in polls if r["type"] != "quorum_snapshot"]
    print(f"{len(polls)} polls of a healthy Kafka quorum ({SOAK_S} s): {len(watch.since(mark))} transitions")
    assert watch.since(mark) == []


def fault_a_follower(watch, follower: int, fault, undo, what: tuple[str, str], cause: str,
                     while_faulted=lambda mark, t0: None) -> None:
    """`fault` on a follower: `unreachable` within VERDICT_WITHIN_S, with `cause`; `undo`: caught up
    again, the replica having only worsened and then recovered once, the quorum degraded and
    healthy again; nothing else changed. `what`: the fault and its undoing, as printed."""
    mark = settle(watch)
    t0 = time.time()
    fault()
    try:
        row = watch.await_replica(mark, follower, S.UNREACHABLE, 3 * VERDICT_WITHIN_S)
        print(f"controller {follower} {what[0]}: unreachable after {seconds_since(t0, row)} s ({row['reason']})")
        assert seconds_since(t0, row) <= VERDICT_WITHIN_S
        found = watch.await_row(mark, lambda r: r.get("replica_id") == follower and r["cause"] == cause,
                                3 * VERDICT_WITHIN_S, f"cause {cause} for {follower}", kind="replica")
        print(f"  cause {cause} after {seconds_since(t0, found)} s")
        while_faulted(mark, t0)
    finally:
        undo()
    t1 = time.time()
    row = watch.await_replica(mark, follower, S.CAUGHT_UP, RECOVERY_WITHIN_S)
    print(f"controller {follower} {what[1]}: caught up after {seconds_since(t1, row)} s")
    settle(watch)
    path = replica_path(watch, mark, follower)
    assert worsened_then_recovered(path, S.UNREACHABLE, S.CAUGHT_UP), path
    assert quorum_path(watch, mark) == [(S.HEALTHY, S.DEGRADED), (S.DEGRADED, S.HEALTHY)]


def test_a_frozen_follower_is_unreachable_and_healthy_once_resumed_without_flapping(watch, kafka_cluster):
    follower = kafka_cluster.followers()[0]
    fault_a_follower(watch, follower, lambda: kafka_cluster.freeze(follower), lambda: kafka_cluster.resume(follower),
                     ("frozen", "continued"), S.UNDECIDED)  # DescribeQuorum alone cannot tell why


def test_a_killed_follower_is_unreachable_and_down_with_the_nodes_own_view(watch_with_nodes, kafka_cluster):
    follower = kafka_cluster.followers()[-1]
    fault_a_follower(watch_with_nodes, follower, lambda: kafka_cluster.kill(follower),
                     lambda: kafka_cluster.restart(follower), ("killed", "restarted"), S.DOWN)


def test_a_killed_leader_is_replaced_and_only_its_own_absence_pages(watch, kafka_cluster):
    mark = settle(watch)
    old = kafka_cluster.leader()
    epoch = watch.latest("quorum")["leader_epoch"]
    t0 = time.time()
    kafka_cluster.kill(old)
    try:
        row = watch.await_row(mark, lambda r: r["leader_id"] not in (-1, old) and r["leader_epoch"] > epoch,
                              30, "a new leader", kind="quorum")
        print(f"leader {old} killed: leader {row['leader_id']} of epoch {row['leader_epoch']} seen after "
              f"{seconds_since(t0, row)} s; quorum transitions: {quorum_path(watch, mark)}")
        old_row = watch.await_replica(mark, old, S.UNREACHABLE, 3 * VERDICT_WITHIN_S)
        print(f"old leader {old}: unreachable after {seconds_since(t0, old_row)} s")
    finally:
        kafka_cluster.restart(old)
    watch.await_replica(mark, old, S.CAUGHT_UP, RECOVERY_WITHIN_S)
    settle(watch)
    pages = {S.SPLIT_BRAIN, S.NO_MAJORITY, S.STALLED_QUORUM}
    assert not [p for p in quorum_path(watch, mark) if p[1] in pages], quorum_path(watch, mark)
    # `leaderless` is the truth while the election runs past the fetch timeout; it must be over long
    # before QuorumLeaderless' `for` would page
    path = [r for r in watch.since(mark) if r.get("replica_id") is None]
    for i, r in enumerate(path):
        if r["status"] == S.LEADERLESS:
            ended = path[i + 1]["wall_ms"] if i + 1 < len(path) else int(time.time() * 1000)
            print(f"leaderless for {(ended - r['wall_ms']) / 1000:.1f} s ({r['reason']})")
            assert ended - r["wall_ms"] < seconds(rule("QuorumLeaderless")["for"]) * 1000, path
    survivors = [v for v in kafka_cluster.controller_ids() if v != old]
    assert all(replica_path(watch, mark, v) in ([], [(S.CAUGHT_UP, S.UNKNOWN), (S.UNKNOWN, S.CAUGHT_UP)])
               for v in survivors), {v: replica_path(watch, mark, v) for v in survivors}


def test_a_follower_cut_off_by_the_network_is_partitioned_while_running_and_rejoins(watch_with_nodes,
                                                                                    kafka_cluster):
    watch = watch_with_nodes
    epoch = kafka_cluster.describe().leader_epoch
    follower = kafka_cluster.followers()[0]
    cut = PacketFilter(kafka_cluster)

    def while_cut(mark, t0):
        assert kafka_cluster.nodes[follower].running()
        # it campaigns (its own view says so: partitioned) but pre-vote keeps it from disturbing
        # the leader: no new epoch
        time.sleep(3 * watch.cfg.fetch_timeout_ms / 1000)  # long enough to have campaigned
        assert watch.latest("quorum")["leader_epoch"] == epoch

    try:
        fault_a_follower(watch, follower, lambda: cut.cut(follower), cut.heal, ("cut off", "healed"), S.PARTITIONED,
                         while_cut)
    finally:
        cut.close()
    assert watch.latest("quorum")["leader_epoch"] == epoch


def test_two_followers_stopped_leave_no_majority_and_the_high_watermark_stalls(watch, kafka_cluster):
    mark = settle(watch)
    followers = kafka_cluster.followers()
    t0 = time.time()
    for f in followers:
        kafka_cluster.freeze(f)
    try:
        row = watch.await_quorum(mark, S.NO_MAJORITY, 3 * VERDICT_WITHIN_S)
        print(f"controllers {followers} frozen: no_majority after {seconds_since(t0, row)} s ({row['reason']})")
        assert seconds_since(t0, row) <= VERDICT_WITHIN_S
        snapshots = [r for r in watch.records if r["type"] == "quorum_snapshot" and r["time_ms"] >= row["wall_ms"]]
        stalled = {r["high_watermark"] for r in snapshots}
        print(f"high watermark while frozen: {sorted(stalled)}; quorum transitions: {quorum_path(watch, mark)}")
        assert len(stalled) <= 1
    finally:
        for f in followers:
            kafka_cluster.resume(f)
    for f in followers:
        watch.await_replica(mark, f, S.CAUGHT_UP, RECOVERY_WITHIN_S)
    settle(watch, 60)


def test_adding_and_removing_a_controller_changes_the_voter_set_the_majority_counts(watch, kafka_cluster):
    mark = settle(watch)
    new = kafka_cluster.add_controller_node()
    try:
        kafka_cluster.wait_for(lambda: new in {o.replica_id for o in kafka_cluster.describe().observers}, 60,
                               f"controller {new} following as an observer")
        config = str(kafka_cluster.nodes[new].data_dir / "server.properties")
        added = kafka_tool(METADATA_QUORUM, "--bootstrap-controller", kafka_cluster.bootstrap_controllers,
                           "--command-config", config, "add-controller")
        assert added.returncode == 0, added.stdout + added.stderr
        row = watch.await_row(mark, lambda r: str(new) in r["reason"].split("->")[-1], 30,
                              f"a voter set with {new}", kind="voter_set")
        print(f"add-controller {new}: {row['reason']}")
        quorum = watch.await_row(mark, lambda r: r["voter_ids"] == f"1,2,3,{new}", 10, "the new set counted",
                                 kind="quorum")
        assert quorum["voters"] == 4
        kafka_cluster.wait_for(lambda: (watch.latest("replica", new) or {}).get("status") == S.CAUGHT_UP,
                               RECOVERY_WITHIN_S, f"voter {new} caught up")

        mark_removed = watch.mark()  # before the tool: its change can be polled before it exits
        removed = kafka_tool(METADATA_QUORUM, "--bootstrap-controller", kafka_cluster.bootstrap_controllers,
                             "remove-controller", "--controller-id", str(new),
                             "--controller-directory-id", kafka_cluster.nodes[new].directory_id)
        assert removed.returncode == 0, removed.stdout + removed.stderr
        row = watch.await_row(mark_removed, lambda r: str(new) not in r["reason"].split("->")[-1], 30,
                              f"a voter set without {new}", kind="voter_set")
        print(f"remove-controller {new}: {row['reason']}")
        quorum = watch.await_row(mark_removed, lambda r: r["voter_ids"] == "1,2,3", 10, "the old set counted",
                                 kind="quorum")
        assert quorum["voters"] == 3
    finally:
        kafka_cluster.retire(new)
    pages = {S.SPLIT_BRAIN, S.NO_MAJORITY, S.STALLED_QUORUM, S.LEADERLESS}
    assert not [p for p in quorum_path(watch, mark) if p[1] in pages], quorum_path(watch, mark)
