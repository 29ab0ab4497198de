"""Why a replica is not caught up, on scripted quorums: a partitioned voter, a dead one, a
fenced one, a slow one and one that falls behind are different pages, each with its evidence in
the reason; and evidence that must not decide (a late record, a skewed clock) does not."""
from __future__ import annotations

import re

import pytest

from streaming.health import statuses as S

from .quorum_script import T0, QuorumScript
from .tracker_harness import Monitor

# each verdict here also holds when every record is folded one by one (conftest.py)
pytestmark = pytest.mark.usefixtures("reduction_differential")


def cut_off(script: QuorumScript, node: int, ms: int, *, state: str = "prospective") -> list[dict]:
    """`node`'s traffic dropped: no fetches reach the leader, but it runs and publishes metrics:
    following no leader, campaigning (a new epoch per attempt unless `state` is prospective)."""
    script.mode[node] = "silent"
    out = []
    for i in range(ms // 1000):
        out += script.run(1000)
        epoch = script.epoch + (i + 1 if state == "candidate" else 0)
        out.append(script.metrics(node, state=state, leader=-1, epoch=epoch))
    return out


def cause_of(mon: Monitor, rid: int) -> tuple[str, str, str]:
    row = mon.replica(rid)
    return row["status"], row["cause"], row["reason"]


def test_a_voter_cut_off_from_the_network_is_partitioned_and_the_quorum_names_the_partition():
    script, mon = QuorumScript(), Monitor()
    mon.run(script, 5000)
    mon.feed(cut_off(script, 3, 5000, state="candidate"))
    status, cause, reason = cause_of(mon, 3)
    assert (status, cause) == (S.UNREACHABLE, S.PARTITIONED)
    assert "alive" in reason and "campaigning in epoch" in reason and "election attempts" in reason
    q = mon.quorum()
    assert q["network_partition"] and (q["leader_side_voters"], q["cut_off_voters"]) == ("1,2", "3")
    assert q["status"] == S.DEGRADED and "network partition: voters [3] cut off from leader 1" in q["reason"] \
        and "holds majority" in q["reason"]
    # the transition event carries the cause
    [event] = [e for e in mon.events("transition") if e.get("replica_id") == 3]
    assert event["cause"] == S.PARTITIONED


def test_a_voter_cut_off_while_its_fetches_came_far_apart_is_partitioned_not_slow():
    """On a loaded machine a follower's fetches can come more than fetch timeout / 2 apart on
    average. Cut off, it keeps that mean gap (no fetch arrives to change it) and alternates
    prospective and follower of the same leader and epoch (a failed pre-vote goes back to the
    leader it knew): a silence of many gaps is not slowness, and a follower report between two
    election attempts does not make it undecided again."""
    script, mon = QuorumScript(), Monitor()
    mon.run(script, 5000)
    for _ in range(8):  # node 3's fetches 1.2 s apart: slower than 1,000 ms on average
        batch = [r for r in script.run(1200) if not (r["type"] == "fetch" and r["replica_id"] == 3)]
        mon.feed(batch + [script.fetch(3, script.leader_leo)])
    assert mon.replica(3)["status"] == S.CAUGHT_UP
    script.mode[3] = "silent"
    cut_at = script.t
    for i in range(12):
        batch = script.run(1000)
        state = "prospective" if i % 4 in (1, 2) else "follower"
        batch.append(script.state_change(3, state, leader=1,
                                         from_state="follower" if state == "prospective" else "prospective"))
        batch.append(script.metrics(3, state=state, leader=1))
        mon.feed(batch)
    rows = [r for r in mon.rows if r["kind"] == "replica" and r["replica_id"] == 3 and r["now_ms"] > cut_at]
    later = [(r["now_ms"] - cut_at, r["cause"]) for r in rows if r["now_ms"] - cut_at > 2 * 1200]
    assert later and all(cause == S.PARTITIONED for _, cause in later), later
    status, cause, reason = cause_of(mon, 3)
    assert (status, cause) == (S.UNREACHABLE, S.PARTITIONED) and "election attempts" in reason, reason


def test_a_voter_with_nothing_at_all_from_it_is_down():
    script, mon = QuorumScript(), Monitor()
    mon.run(script, 5000)
    script.mode[3] = "silent"  # no fetches and no metrics: frozen, or killed
    mon.run(script, 5000)
    status, cause, reason = cause_of(mon, 3)
    assert (status, cause) == (S.UNREACHABLE, S.DOWN) and "nothing from node 3" in reason
    assert not mon.quorum()["network_partition"]


@pytest.mark.parametrize("outcome", ["fenced", "inconsistent_cluster_id", "offset_out_of_range"])
def test_a_voter_whose_fetches_are_refused_is_rejected_with_the_error_named(outcome):
    script, mon = QuorumScript(), Monitor()
    mon.run(script, 5000)
    script.mode[3] = "silent"
    for _ in range(10):
        batch = script.run(500)
        batch.append(script.fetch(3, script.leo[3], outcome=outcome))
        batch.append(script.metrics(3))
        mon.feed(batch)
    status, cause, reason = cause_of(mon, 3)
    assert (status, cause) == (S.UNREACHABLE, S.REJECTED) and outcome in reason


def test_a_voter_fetching_seconds_apart_is_slow():
    script, mon = QuorumScript(), Monitor()
    mon.run(script, 5000)
    for i in range(12):  # a slowed disk: one valid fetch every 3 s, caught up each time
        batch = [r for r in script.run(1000) if not (r["type"] == "fetch" and r["replica_id"] == 3)]
        if i % 3 == 0:
            batch.append(script.fetch(3, script.leader_leo))
        mon.feed(batch)
    causes = [r["cause"] for r in mon.rows if r["kind"] == "replica" and r["replica_id"] == 3 and r["cause"]]
    # before its first slow fetch arrives it is not yet told apart from a stall; never a crash
    assert causes[-1] == S.SLOW and set(causes) <= {S.SLOW, S.UNKNOWN_CAUSE}
    assert "ms apart on average" in mon.replica(3)["reason"]


def test_a_slowed_disk_that_times_out_between_fetches_is_slow_not_partitioned():
    """A real node whose fsyncs take 3 s fetches every 3 s; its own fetch timeout (2 s) runs out
    during each fsync, so it campaigns once a cycle (a pre-vote refused at once, back to the
    known leader) and then fetches twice in a row (the fetch it sends on becoming a follower
    again, and the one the leader's new NoOps answer). Its fetches keep coming: slow, whatever
    its campaigns, and however the short and long gaps average."""
    script, mon = QuorumScript(), Monitor()
    mon.run(script, 5000)
    for i in range(15):
        batch = [r for r in script.run(1000) if not (r["type"] == "fetch" and r["replica_id"] == 3)]
        if i % 3 == 1:
            batch.append(script.state_change(3, "prospective", leader=1, from_state="follower"))
            batch.append(script.state_change(3, "follower", leader=1, from_state="prospective"))
        if i % 3 == 2:
            batch.append(script.fetch(3, script.leader_leo - 2))
            script.t += 5
            batch.append(script.fetch(3, script.leader_leo))
        mon.feed(batch)
    causes = [(r["now_ms"] - T0, r["cause"]) for r in mon.rows
              if r["kind"] == "replica" and r["replica_id"] == 3 and r["cause"]]
    assert causes and causes[-1][1] == S.SLOW, causes
    # once the slow pace shows (two slow fetches in), it stays slow: never partitioned
    settled = [c for t, c in causes if t > 5000 + 9000]
    assert settled and set(settled) == {S.SLOW}, causes


def test_a_voter_fetching_often_but_never_at_the_end_is_behind_with_the_trend():
    script, mon = QuorumScript(), Monitor()
    mon.run(script, 5000)
    script.mode[3] = "stuck"
    mon.run(script, 30_000)
    status, cause, reason = cause_of(mon, 3)
    assert (status, cause) == (S.STALLED, S.BEHIND)
    assert "records behind the leader" in reason and "growing 2 records/s" in reason
    # catching up: one record a fetch, ten fetches a second, while the leader appends 2 a second
    for _ in range(5):
        batch = []
        for _ in range(10):
            script.t += 100
            if script.t % 500 == 0:
                script.leader_leo += 1
            script.leo[3] += 1
            batch += [script.fetch(3, script.leo[3]), script.fetch(2, script.leader_leo)]
        mon.feed(batch + [script.metrics(n) for n in (1, 2, 3)])
    status, cause, reason = cause_of(mon, 3)
    # 8 records/s net, give or take one for where the measuring window's ends fall
    assert cause == S.BEHIND and re.search(r"closing [789] records/s: caught up in about \d+ s", reason), reason


def test_without_a_live_leader_the_cause_is_unknown_not_a_guess():
    script, mon = QuorumScript(), Monitor()
    mon.run(script, 5000)
    script.leader_talks, script.noops = False, False
    mon.run(script, 4000)
    assert mon.quorum()["status"] == S.LEADERLESS
    assert {cause_of(mon, r)[1] for r in (2, 3)} == {S.UNKNOWN_CAUSE}


def test_from_outside_a_partition_a_crash_and_a_refusal_look_alike():
    script, mon = QuorumScript(), Monitor()
    for _ in range(10):
        script.run(1000)
        mon.feed([script.snapshot()])
    script.mode[3] = "silent"
    for _ in range(5):
        script.run(1000)
        mon.feed([script.snapshot()])
    status, cause, reason = cause_of(mon, 3)
    assert (status, cause) == (S.UNREACHABLE, S.UNKNOWN_CAUSE) and "DescribeQuorum" in reason


def test_a_leader_cut_off_from_everyone_is_a_partition_of_the_leader_then_the_new_side_is_healthy():
    script, mon = QuorumScript(), Monitor()
    mon.run(script, 5000)
    # node 1 (leader, epoch 5) isolated: no fetches reach it; it keeps publishing as leader
    script.mode[2] = script.mode[3] = "silent"
    script.noops = False
    for _ in range(3):
        batch = script.run(1000)
        batch += [script.metrics(n, state="prospective", leader=-1) for n in (2, 3)]
        mon.feed(batch)
    q = mon.quorum()
    assert q["status"] == S.NO_MAJORITY and "leader 1 cut off from every voter" in q["reason"]
    assert (q["leader_side_voters"], q["cut_off_voters"]) == ("1", "2,3")
    # 2 and 3 elect 2 in epoch 6; node 1 still acts as leader of epoch 5 for a while (a zombie)
    script.epoch, script.leader = 6, 2
    script.mode = {1: "silent", 3: "follow"}
    script.noops = True
    for _ in range(6):  # past the quorum's recovery hold (from no majority)
        batch = [script.state_change(2, "leader", leader=2, from_state="candidate")] + script.run(1000)
        batch.append(script.metrics(1, state="leader", leader=1, epoch=5))
        mon.feed(batch)
    q = mon.quorum()
    assert (q["leader_id"], q["leader_epoch"], q["zombie_leaders"]) == (2, 6, 1)
    assert q["cut_off_voters"] == "1" and "previous leader 1 cut off from every voter; leader 2's side [2, 3] " \
        "holds majority" in q["reason"]
    status, cause, reason = cause_of(mon, 1)
    assert (status, cause) == (S.UNREACHABLE, S.PARTITIONED) and "still acting as leader of epoch 5" in reason
    # healed: node 1 follows the new leader; the quorum is healthy again
    script.mode = {1: "follow", 3: "follow"}
    mon.run(script, 10_000)
    q = mon.quorum()
    assert (q["status"], q["network_partition"]) == (S.HEALTHY, False)


@pytest.mark.parametrize("then", ["fetches", "stays_cut_off"])
def test_a_frozen_leader_resumed_is_not_a_partition_until_it_had_a_fetch_timeout_to_fetch(then):
    """A leader frozen (SIGSTOP) is down; the others elect 2. Resumed, its first record still
    says what it knew: leader of epoch 5, and no fetch of it has reached the new leader yet.
    That is a node coming back, not a partition: it is told apart one fetch timeout later, when
    a node really cut off would still publish and still not fetch."""
    script, mon = QuorumScript(), Monitor()
    mon.run(script, 5000)
    script.leader_talks, script.noops = False, False  # node 1 frozen: nothing from it at all
    mon.run(script, 2000)
    script.epoch, script.leader = 6, 2
    script.mode, script.leader_talks, script.noops = {1: "silent", 3: "follow"}, True, True
    mon.feed([script.state_change(2, "leader", leader=2, from_state="candidate")] + script.run(4000))
    assert cause_of(mon, 1)[:2] == (S.UNREACHABLE, S.DOWN)
    resumed = script.t
    batch = script.run(100)
    mon.feed(batch + [script.metrics(1, state="leader", leader=1, epoch=5)])
    mon.run(script, 400)
    assert cause_of(mon, 1)[:2] == (S.UNREACHABLE, S.UNKNOWN_CAUSE) and "is back" in cause_of(mon, 1)[2]
    if then == "fetches":
        script.mode[1] = "follow"
        mon.run(script, 10_000)
        assert mon.replica(1)["status"] == S.CAUGHT_UP
    else:
        for _ in range(4):  # publishing, following no one it can reach, never fetching
            mon.feed(script.run(1000) + [script.metrics(1, state="prospective", leader=-1, epoch=6)])
        assert cause_of(mon, 1)[:2] == (S.UNREACHABLE, S.PARTITIONED)
    causes = [(r["now_ms"] - resumed, r["cause"]) for r in mon.rows
              if r["kind"] == "replica" and r["replica_id"] == 1 and r["now_ms"] >= resumed]
    early = [c for c in causes if c[0] < mon.cfg.unreachable_after_ms and c[1] == S.PARTITIONED]
    assert not early, causes


def test_a_late_record_from_a_dead_node_does_not_make_it_alive():
    script, mon = QuorumScript(), Monitor()
    mon.run(script, 5000)
    script.mode[3] = "silent"
    stale = script.metrics(3)  # written just before it died, delivered 4 s later
    mon.run(script, 4000)
    mon.feed(script.run(500) + [stale])
    mon.run(script, 500)
    assert cause_of(mon, 3)[:2] == (S.UNREACHABLE, S.DOWN)
    assert [e["cause"] for e in mon.events("transition") if e.get("replica_id") == 3] == [S.DOWN]


@pytest.mark.parametrize("skew_ms", [-3000, 3000, 240_000])
def test_a_skewed_clock_decides_no_cause(skew_ms):
    script, mon = QuorumScript(), Monitor()
    script.skew[3] = skew_ms
    mon.run(script, 5000)
    mon.feed(cut_off(script, 3, 5000))
    assert cause_of(mon, 3)[:2] == (S.UNREACHABLE, S.PARTITIONED)
    script2, mon2 = QuorumScript(), Monitor()
    script2.skew[3] = skew_ms
    mon2.run(script2, 5000)
    script2.mode[3] = "silent"
    mon2.run(script2, 5000)
    assert cause_of(mon2, 3)[:2] == (S.UNREACHABLE, S.DOWN)


def test_a_campaigning_voter_whose_metrics_come_late_once_stays_partitioned_not_down():
    # Seen on real nodes: a cut-off voter's pre-vote rounds write state changes between its
    # per-second metrics. Those bursts say it is alive; they must not shorten the pace its
    # records are expected at, or metrics 1.5 s apart once read as the node dying.
    script, mon = QuorumScript(), Monitor()
    mon.run(script, 5000)
    script.mode[3] = "silent"
    causes = []
    for second in range(13):
        for step in range(10):
            out = script.run(100)
            if second % 3 == 0 and step in (1, 2):  # a pre-vote round every 3 s, as the node's did
                to, frm = ("candidate", "unattached") if step == 1 else ("unattached", "candidate")
                out.append(script.state_change(3, to, from_state=frm, epoch=script.epoch + 1))
            # metrics at the end of every second, but second 10's come 500 ms late
            if (step == 9 and second != 10) or (second == 11 and step == 4):
                out.append(script.metrics(3, state="unattached", leader=-1, epoch=script.epoch + 1))
            mon.feed(out)
            causes.append(mon.replica(3)["cause"])
    assert cause_of(mon, 3)[:2] == (S.UNREACHABLE, S.PARTITIONED)
    assert S.DOWN not in causes, causes


def test_a_partition_named_while_the_quorum_stays_degraded_is_an_event_of_its_own():
    # Seen on the local stack: a cut-off leader's successor showed the old leader behind, then
    # partitioned; the quorum was degraded throughout, so the partition never reached the health
    # topic. Its appearance and its end are `cause` events of the quorum.
    script, mon = QuorumScript(voters=(1, 2, 3, 4, 5)), Monitor()
    mon.run(script, 5000)
    script.mode[5] = "stuck"
    mon.run(script, 15_000)
    q = mon.quorum()
    assert q["status"] == S.DEGRADED and not q["network_partition"], q["reason"]
    mon.feed(cut_off(script, 3, 5000, state="candidate"))
    q = mon.quorum()
    assert q["status"] == S.DEGRADED and q["network_partition"], q["reason"]
    [event] = [e for e in mon.events("cause") if e.get("replica_id") is None]
    assert (event["cause"], event["previous_cause"], event["status"]) == ("network_partition", None, S.DEGRADED)
    assert "network partition: voters [3] cut off from leader 1" in event["reason"]
    script.mode[3] = "follow"
    mon.run(script, 10_000)
    q = mon.quorum()
    assert q["status"] == S.DEGRADED and not q["network_partition"], q["reason"]
    ended = [e for e in mon.events("cause") if e.get("replica_id") is None][1:]
    assert [(e["previous_cause"], e["cause"]) for e in ended] == [("network_partition", None)]
