"""A real Apache Kafka KRaft quorum (three controllers, one broker) faulted for real, watched the
way an operator watches one: `quorum collect`'s polls at 1 s, judged by the job's health state
machine. Each test prints the time from the fault to the verdict and bounds it.

Through the leader's DescribeQuorum alone, a frozen, killed or cut-off follower looks the same
(its fetches stop): the verdict is `unreachable` and the cause stays `unknown`, never a guess.
With each node's own view from its JMX exporter endpoint (`quorum collect --node-metrics`), a
killed node is `down` (its endpoint answers nothing) and a cut-off one `partitioned` (it answers,
and campaigns).

The soak's length is QUORUM_KAFKA_SOAK_S seconds (30 by default on the first shape the run
selects, 10 on the others; 600 is the full run)."""
from __future__ import annotations

import os
import time

import pytest

from kafka_tools import kafka_tool, METADATA_QUORUM
from deploy.packet_filter import PacketFilter
from streaming.health import statuses as S
from tests.prometheus_tools import rule, seconds

pytestmark = pytest.mark.slow

SOAK_S = int(os.environ.get("QUORUM_KAFKA_SOAK_S", "30"))
OTHER_SHAPES_SOAK_S = int(os.environ.get("QUORUM_KAFKA_SOAK_S", "10"))
# a fetch timeout (2 s, Kafka's default) plus two polls and an evaluation
VERDICT_WITHIN_S = 2.0 + 2 * 1.0 + 1.0
# recovery holds for 2 fetch timeouts before a better status shows, plus a restarted JVM
RECOVERY_WITHIN_S = 30.0
PAGING = {S.NO_MAJORITY, S.SPLIT_BRAIN, S.UNOBSERVED}  # stalled: judged by how long, see election_within_bounds
GAP_LIMIT_MS = 2 * 1000  # snapshots at most two intervals apart while one node hangs


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


def test_a_healthy_quorum_polled_at_the_documented_interval_gives_no_transition(watch, shape):
    from .conftest import SHAPES
    soak_s = SOAK_S if shape == SHAPES[0] else OTHER_SHAPES_SOAK_S
    mark = settle(watch)
    first = len(watch.records)
    time.sleep(soak_s)  # the healthy phase: a duration, not a condition
    polls = watch.records[first:]
    assert len(polls) >= soak_s - 2 and all(r["type"] == "quorum_snapshot" for r in polls), \
        [r for r in polls if r["type"] != "quorum_snapshot"]
    print(f"{len(polls)} polls of a healthy Kafka quorum ({soak_s} s): {len(watch.since(mark))} transitions")
    assert watch.since(mark) == []


def fault_a_follower(watch, follower: int, fault, undo, what: tuple[str, str], cause: str,
                     while_faulted=lambda mark, t0: None, rejoin_election: bool = False,
                     blind_spells: bool = False) -> None:
    """`fault` on a follower: `unreachable` within VERDICT_WITHIN_S, with `cause`; `undo`: caught up
    again, the replica having only worsened and then recovered once, the quorum degraded and
    healthy again; nothing else changed. `what`: the fault and its undoing, as printed.
    `rejoin_election`: the follower comes back in a higher epoch (it campaigned while cut off,
    without pre-vote) and forces an election, so the quorum may stall while it runs, within
    the alerts' bounds. `blind_spells`: the collector watches through brokers that may leave
    every DescribeQuorum unanswered for a few seconds (see `without_unobserved_spells`)."""
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
    undone = watch.mark()
    row = watch.await_replica(mark, follower, S.CAUGHT_UP, RECOVERY_WITHIN_S)
    print(f"controller {follower} {what[1]}: caught up after {seconds_since(t1, row)} s")
    settle(watch)
    path = replica_path(watch, mark, follower)
    assert worsened_then_recovered(without_blind_spells(watch, mark, follower, election=rejoin_election),
                                   S.UNREACHABLE, S.CAUGHT_UP), path
    path_of = (lambda m: without_unobserved_spells(watch, m)) if blind_spells else (lambda m: quorum_path(watch, m))
    quorum = path_of(mark)
    if rejoin_election and quorum[1:-1] and {new for _, new in quorum[1:-1]} <= {S.STALLED_QUORUM, S.LEADERLESS}:
        print(f"  its return forced an election: {quorum}")
        while_faulted_path = quorum[:len(quorum) - len(path_of(undone))]
        assert while_faulted_path == [(S.HEALTHY, S.DEGRADED)] and quorum[-1][1] == S.HEALTHY, quorum
        election_within_bounds(watch.quorum_rows(undone))
    else:
        assert quorum == [(S.HEALTHY, S.DEGRADED), (S.DEGRADED, S.HEALTHY)]


def without_unobserved_spells(watch, mark: int) -> list[tuple[str, str]]:
    """The quorum's path with its `unobserved` spells taken out, each checked to end long before
    QuorumUnobserved's `for:` would page. Kafka 3.9's combined nodes, one of them faulted, leave
    every broker's DescribeQuorum unanswered for a few seconds at times (see
    `without_blind_spells`); a collector watching through DescribeQuorum alone, with no node's
    own view, then has no evidence about the quorum, and says so."""
    limit_ms = (seconds(rule("QuorumUnobserved")["for"]) - 10) * 1000
    out: list[tuple[str, str]] = []
    entered = None
    for r in watch.since(mark):
        if r.get("replica_id") is not None:
            continue
        if r["status"] == S.UNOBSERVED:
            entered = r["wall_ms"]
            continue
        if r["previous_status"] == S.UNOBSERVED and entered is not None:
            print(f"  unobserved for {(r['wall_ms'] - entered) / 1000:.1f} s")
            assert r["wall_ms"] - entered < limit_ms, ("unobserved", r["wall_ms"] - entered)
            entered = None
        previous = out[-1][1] if out else r["previous_status"]
        if previous != r["status"]:
            out.append((previous, r["status"]))
    assert entered is None, "still unobserved"
    return out


def without_blind_spells(watch, mark: int, replica_id: int, election: bool = False) -> list[tuple[str, str]]:
    """The replica's path with the spells in which no broker answered DescribeQuorum taken out
    (`unknown`: the leader's view has not arrived). Kafka 3.9's combined nodes, one of them cut
    off, leave every broker's DescribeQuorum unanswered for a few seconds at times, whichever
    node the collector asks; the monitor then says it cannot judge, which is the truth.
    `election`: the replica's return may force an election, in which there is no live leader to
    judge it against either."""
    blind = ("the leader's view of its replicas has not arrived",) + (("no live leader to judge against",)
                                                                      if election else ())
    out: list[tuple[str, str]] = []
    for r in watch.since(mark):
        if r.get("replica_id") != replica_id:
            continue
        if r["status"] == S.UNKNOWN:
            assert any(reason in r["reason"] for reason in blind), r["reason"]
            continue
        previous = out[-1][1] if out else r["previous_status"]
        if previous != r["status"]:
            out.append((previous, r["status"]))
    return out


def test_a_frozen_follower_is_unreachable_and_healthy_once_resumed_without_flapping(watch, kafka_cluster):
    follower = kafka_cluster.followers()[0]
    fault_a_follower(watch, follower, lambda: kafka_cluster.freeze(follower), lambda: kafka_cluster.resume(follower),
                     ("frozen", "continued"), S.UNKNOWN_CAUSE,  # DescribeQuorum alone cannot tell why
                     blind_spells=kafka_cluster.kafka_line() < (4, 0))


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
    pages = {S.SPLIT_BRAIN, S.NO_MAJORITY}
    assert not [p for p in quorum_path(watch, mark) if p[1] in pages], quorum_path(watch, mark)
    # No commit between the kill and the new leader's first: `stalled` (held a moment by
    # hysteresis) is the truth then, longer when no node answered DescribeQuorum meanwhile. What
    # pages is the high watermark's age past 2 s for QuorumHighWatermarkStalled's `for:`.
    oldest_hw = max((r["hw_age_ms"] or 0 for r in watch.quorum_rows(mark)), default=0) / 1000
    print(f"  the high watermark at most {oldest_hw:.1f} s old")
    assert oldest_hw < 2 + seconds(rule("QuorumHighWatermarkStalled")["for"]) - 1, ("hw age", oldest_hw)
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

    # Kafka 4.0 brought pre-vote (KIP-996): before it a cut-off follower campaigns in ever higher epochs
    pre_vote = kafka_cluster.kafka_line() >= (4, 0)

    def while_cut(mark, t0):
        assert kafka_cluster.nodes[follower].running()
        # it campaigns (its own view says so: partitioned) but pre-vote keeps it from disturbing
        # the leader: no new epoch
        time.sleep(3 * watch.cfg.fetch_timeout_ms / 1000)  # long enough to have campaigned
        if pre_vote:
            assert watch.latest("quorum")["leader_epoch"] == epoch

    try:
        fault_a_follower(watch, follower, lambda: cut.cut(follower), cut.heal, ("cut off", "healed"), S.PARTITIONED,
                         while_cut, rejoin_election=not pre_vote)
    finally:
        cut.close()
    if pre_vote:
        assert watch.latest("quorum")["leader_epoch"] == epoch


def election_within_bounds(rows: list[dict]) -> None:
    """A leader lost stops commits while the election runs: `leaderless`, then `stalled` until
    the new leader's first commit, is the truth then. What pages is what the alerts read: no
    leader (leader id -1) for their `for:`, or the high watermark's age past 2 s for its `for:`;
    both must end well inside."""
    no_leader = [r["wall_ms"] for r in rows if r["leader_id"] == -1]
    span = (no_leader[-1] - no_leader[0]) / 1000 if no_leader else 0
    assert span < seconds(rule("QuorumLeaderless")["for"]) - 3, ("no leader", span)
    oldest_hw = max((r["hw_age_ms"] or 0 for r in rows), default=0) / 1000
    print(f"  no leader for {span:.1f} s, the high watermark at most {oldest_hw:.1f} s old")
    assert oldest_hw < 2 + seconds(rule("QuorumHighWatermarkStalled")["for"]) - 1, ("hw age", oldest_hw)


# a fetch timeout, an election (pre-vote, then the vote) and two polls
ANSWERS_AGAIN_WITHIN_S = 2.0 + 4.0 + 2 * 1.0


@pytest.mark.kafka_shape(combined=False, reason="its broker forwards DescribeQuorum to the controller it believes leads")
def test_a_leader_cut_off_by_the_network_does_not_blind_the_collector_polling_through_the_broker(
        watch_with_nodes, kafka_cluster):
    """The broker goes on forwarding DescribeQuorum to the cut-off leader until its own request
    timeout; the collector asks the controllers the last answer named meanwhile, so the new
    leader is seen once elected and the old one is judged, not left `unknown`."""
    if kafka_cluster.kafka_line() < (3, 9):
        pytest.skip("DescribeQuorum v2 (its `nodes`, the controllers' endpoints) came in Kafka 3.9")
    watch = watch_with_nodes
    mark = settle(watch)
    old = kafka_cluster.leader()
    epoch = watch.latest("quorum")["leader_epoch"]
    cut = PacketFilter(kafka_cluster)
    t0 = time.time()
    since_ms = int(t0 * 1000)
    cut.cut(old)
    try:
        row = watch.await_row(mark, lambda r: r["leader_id"] not in (-1, old) and r["leader_epoch"] > epoch,
                              3 * ANSWERS_AGAIN_WITHIN_S, "a new leader", kind="quorum")
        print(f"leader {old} cut off: leader {row['leader_id']} of epoch {row['leader_epoch']} seen after "
              f"{seconds_since(t0, row)} s")
        assert seconds_since(t0, row) <= ANSWERS_AGAIN_WITHIN_S
        judged = watch.await_replica(mark, old, S.UNREACHABLE, 3 * VERDICT_WITHIN_S)
        print(f"  old leader {old}: unreachable after {seconds_since(t0, judged)} s, cause {judged['cause']}")
        answered = watch.snapshot_times(row["wall_ms"])
        watch.cluster.wait_for(lambda: len(watch.snapshot_times(row["wall_ms"])) >= len(answered) + 5, 15,
                               "five more snapshots")  # the cut's steady state, watched for gaps
        gaps = watch.poll_gaps_ms(row["wall_ms"])
        print(f"  snapshot gaps once the new leader was seen: max {max(gaps, default=0)} ms over {len(gaps)} polls")
        assert gaps and max(gaps) <= GAP_LIMIT_MS, gaps
    finally:
        cut.heal()
        cut.close()
    watch.await_replica(mark, old, S.CAUGHT_UP, RECOVERY_WITHIN_S)
    settle(watch, 60)
    rows = watch.quorum_rows(mark)
    assert not {r["status"] for r in rows} & PAGING, [(r["status"], r["reason"]) for r in rows if r["status"] in PAGING]
    election_within_bounds(rows)
    for other in (v for v in kafka_cluster.controller_ids() if v != old):
        assert S.UNREACHABLE not in {r["status"] for r in watch.replica_rows(mark, other)}, other
    assert not [r for r in watch.replica_rows(mark, old) if r["cause"] == S.DOWN], "a running node shown down"
    first = watch.snapshot_times(since_ms)
    print(f"  first snapshot {(first[0] - since_ms) / 1000:.1f} s after the cut")


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


@pytest.mark.kafka_shape(dynamic=True, reason="add-controller needs a dynamic voter set (KIP-853)")
def test_adding_and_removing_a_controller_changes_the_voter_set_the_majority_counts(watch, kafka_cluster):
    mark = settle(watch)
    new = kafka_cluster.add_controller_node()
    try:
        kafka_cluster.wait_for(lambda: new in {o.replica_id for o in kafka_cluster.describe().observers}, 60,
                               f"controller {new} following as an observer")
        config = str(kafka_cluster.nodes[new].data_dir / "server.properties")
        added = kafka_tool(METADATA_QUORUM, "--bootstrap-controller", kafka_cluster.bootstrap_controllers,
                           "--command-config", config, "add-controller", version=kafka_cluster.kafka_version)
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
                             "--controller-directory-id", kafka_cluster.nodes[new].directory_id,
                             version=kafka_cluster.kafka_version)
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


# --- the node the collector talks to --------------------------------------------------------------
# The collector's own path faulted: the broker or controller it polls hangs or dies. It asks
# another node within the same poll, so snapshots keep coming; and while they do not, the nodes'
# own views vouch for the voters. Never a paging status for one node of three, never a healthy
# voter unreachable.

DOWN_WITHIN_S = 2.0 + 4  # the unreachable threshold + 4 s


@pytest.fixture
def hedged_watch(kafka_cluster):
    """The collector as an operator sets it up so that no single node is its only path: every
    broker listed when there are several (combined nodes), the controllers themselves
    (`--bootstrap-controller`) when there is one broker; every node's own view too."""
    from .conftest import _watch
    path = "brokers" if len(kafka_cluster.broker_ids()) > 1 else "controllers"
    yield from _watch(kafka_cluster, node_metrics=True, path=path)


def polled_node_faulted(watch, cluster, fault, undo, what: str) -> None:
    """Fault the node the collector's last poll went to, and hold the verdicts to what the
    fault deserves: a follower is `unreachable`, cause `down`, within DOWN_WITHIN_S, the quorum
    only degraded, the snapshots never further apart than GAP_LIMIT_MS; a leader is replaced,
    `leaderless` at most while the election runs. Either way no other voter is unreachable."""
    mark = settle(watch)
    node = watch.polled_node()
    leader = cluster.leader()
    role = "leader" if node == leader else ("follower" if node in cluster.voter_ids() else "broker")
    t0 = time.time()
    since_ms = int(t0 * 1000)
    fault(node)
    try:
        if role == "follower":
            row = watch.await_row(mark, lambda r: r.get("replica_id") == node and r["cause"] == S.DOWN,
                                  3 * DOWN_WITHIN_S, f"{node} down", kind="replica")
            print(f"{what} {role} {node} (polled by the collector): down after {seconds_since(t0, row)} s")
            assert seconds_since(t0, row) <= DOWN_WITHIN_S and row["status"] == S.UNREACHABLE
        else:
            row = watch.await_row(mark, lambda r: r["leader_id"] not in (-1, node) and r["status"] != S.LEADERLESS,
                                  30, "a new leader", kind="quorum")
            print(f"{what} {role} {node} (polled by the collector): leader {row['leader_id']} after "
                  f"{seconds_since(t0, row)} s")
            # through brokers, DescribeQuorum waits on Kafka's forwarding to the old controller a while
            answered = watch.cluster.wait_for(lambda: watch.snapshot_times(since_ms), 60, "a snapshot again")
            print(f"  snapshots again after {(answered[0] - since_ms) / 1000:.1f} s")
        time.sleep(3)  # the fault's steady state, watched for what must not happen: a duration
        gaps = watch.poll_gaps_ms(since_ms)
        print(f"  snapshot gaps while faulted: max {max(gaps, default=0)} ms over {len(gaps)} polls")
        if role != "leader":
            assert gaps and max(gaps) <= GAP_LIMIT_MS, gaps
    finally:
        undo(node)
    undone = watch.mark()
    if node in cluster.voter_ids():
        watch.await_replica(mark, node, S.CAUGHT_UP, RECOVERY_WITHIN_S)
    settle(watch, 60)
    quorum = [(r["status"], r["reason"]) for r in watch.quorum_rows(mark)]
    assert not {s for s, _ in quorum} & PAGING, [q for q in quorum if q[0] in PAGING]
    # one follower lost stops nothing; a leader lost stops commits while the election runs
    rows = watch.quorum_rows(mark)
    if role != "leader":
        during = watch.quorum_rows(mark, undone)
        assert not [r for r in during if r["status"] in (S.LEADERLESS, S.STALLED_QUORUM)], during[:3]
        after = watch.quorum_rows(undone)
        stopped = [r for r in after if r["status"] in (S.LEADERLESS, S.STALLED_QUORUM)]
        if stopped and role == "follower" and cluster.kafka_line() < (4, 0):
            # Before 4.0 (no pre-vote) a follower continued past its fetch timeout campaigns at
            # once, in a higher epoch, and the leader steps down: a real election, which must end
            # within the alerts' bounds
            print(f"  its return forced an election: {[(r['status'], r['reason']) for r in stopped][:2]}")
            election_within_bounds(after)
        else:
            assert not stopped, stopped[:3]
    else:
        election_within_bounds(rows)
    for other in (v for v in cluster.voter_ids() if v not in (node, leader)):
        statuses = {r["status"] for r in watch.replica_rows(mark, other)}
        assert S.UNREACHABLE not in statuses, (other, statuses)
    wrong = [(r["wall_ms"], r["cause"], r.get("reason")) for r in watch.replica_rows(mark, node)
             if r["status"] == S.UNREACHABLE and r["cause"] not in (S.DOWN, S.UNKNOWN_CAUSE)]
    assert not wrong, (f"{what} {role} {node} (t0 {int(t0 * 1000)})", wrong[:4])


def test_the_node_the_collector_polls_frozen_costs_it_one_poll_and_pages_nothing(hedged_watch, kafka_cluster):
    polled_node_faulted(hedged_watch, kafka_cluster, kafka_cluster.freeze, kafka_cluster.resume, "frozen")


def test_the_node_the_collector_polls_killed_is_down_at_once_and_pages_nothing(hedged_watch, kafka_cluster):
    mark = hedged_watch.mark()
    polled_node_faulted(hedged_watch, kafka_cluster, kafka_cluster.kill, kafka_cluster.restart, "killed")
    # its endpoint refused at once: never `lagging`/`behind` on the way to down
    killed = [r for r in hedged_watch.since(mark) if r.get("replica_id") is not None
              and r["status"] in (S.LAGGING, S.STALLED)]
    assert not killed, killed[:3]


def test_every_node_hanging_is_unobserved_and_pages_nothing_then_healthy_once_continued(hedged_watch,
                                                                                       kafka_cluster):
    """The collector's whole bootstrap list hangs (every node frozen: each accepts connections
    and answers nothing, its metrics endpoint too): the monitor cannot observe the quorum, and
    says so; it does not guess no majority or no leader."""
    watch = hedged_watch
    mark = settle(watch)
    t0 = time.time()
    nodes = sorted(kafka_cluster.nodes)
    for n in nodes:
        kafka_cluster.freeze(n)
    try:
        row = watch.await_quorum(mark, S.UNOBSERVED, 3 * VERDICT_WITHIN_S)
        print(f"every node frozen: unobserved after {seconds_since(t0, row)} s ({row['reason']})")
        assert seconds_since(t0, row) <= VERDICT_WITHIN_S and "timeout" in row["reason"]
        time.sleep(seconds(rule("QuorumNoMajority")["for"]))  # past the verdict alerts' `for:`: a duration
        frozen = watch.mark()
    finally:
        for n in nodes:
            kafka_cluster.resume(n)
    resumed = time.time()
    settle(watch, 90)
    during = [r["status"] for r in watch.quorum_rows(mark, frozen)]
    assert set(during) <= {S.HEALTHY, S.UNOBSERVED}, during
    assert {r["status"] for v in kafka_cluster.voter_ids() for r in watch.replica_rows(mark, v, frozen)} <= {
        S.CAUGHT_UP, S.UNKNOWN}
    # Continued all at once, every fetch timeout long past: the quorum may elect again, and
    # commits nothing until it has: `leaderless` or `stalled` is the truth for that moment, which
    # must end long before the alerts' `for:` would page.
    after = watch.quorum_rows(frozen)
    print(f"continued: {[(r['status'], round(r['wall_ms'] / 1000 - resumed, 1)) for r in after][:8]}")
    assert not {r["status"] for r in after} & {S.NO_MAJORITY, S.SPLIT_BRAIN}
    for status, alert in ((S.LEADERLESS, "QuorumLeaderless"), (S.STALLED_QUORUM, "QuorumHighWatermarkStalled")):
        times = [r["wall_ms"] for r in after if r["status"] == status]
        assert not times or (times[-1] - times[0]) / 1000 < seconds(rule(alert)["for"]) - 3, (status, after)


def test_polling_the_controllers_matches_polling_the_brokers(watch_controllers, kafka_cluster):
    """`--bootstrap-controller`: the same quorum, the leader answering."""
    settle(watch_controllers)
    snap = [r for r in watch_controllers.records if r["type"] == "quorum_snapshot"][-1]
    info = kafka_cluster.describe()
    assert (snap["leader_id"], snap["answered_by"]) == (info.leader_id, info.leader_id)
    assert sorted(v["replica_id"] for v in snap["voters"]) == sorted(v.replica_id for v in info.voters)
