"""What real quorums send, through the health state machine: skewed clocks, stray records,
late arrivals, elections, collectors. One test per condition of the issue "verdicts an on-call
engineer can trust"; each asserts the wrong verdict is gone AND that a real fault of the same
shape is still flagged."""
from __future__ import annotations

import copy

import pytest

from streaming.health import statuses as S
from streaming.health.config import HealthConfig

from .quorum_script import T0, QuorumScript
from .tracker_harness import Monitor

# each verdict here also holds when every record is folded one by one (conftest.py)
pytestmark = pytest.mark.usefixtures("reduction_differential")

CFG = HealthConfig()


def quorum_transitions(mon: Monitor) -> list[str]:
    return [s for _, _, s in mon.transitions(None)]


def all_transitions(mon: Monitor) -> list[dict]:
    return mon.events("transition")


# --- time ------------------------------------------------------------------------------------

SKEWS = [-300_000, -3000, 1000, 2300, 3000, 240_000, 300_000]


@pytest.mark.parametrize("skewed", ["follower", "leader"])
@pytest.mark.parametrize("skew_ms", SKEWS)
def test_one_node_clock_ahead_or_behind_changes_no_verdict(skew_ms, skewed):
    script, mon = QuorumScript(), Monitor()
    script.skew[3 if skewed == "follower" else 1] = skew_ms
    mon.run(script, 120_000, batch_ms=1000)
    assert all_transitions(mon) == [], all_transitions(mon)[:3]
    assert mon.quorum()["status"] == S.HEALTHY
    assert {mon.replica(r)["status"] for r in (1, 2, 3)} == {S.CAUGHT_UP}


@pytest.mark.parametrize("skew_ms", [-3000, 3000, 240_000])
def test_with_a_skewed_follower_a_silent_follower_is_still_unreachable_on_time(skew_ms):
    script, mon = QuorumScript(), Monitor()
    script.skew[3] = skew_ms
    mon.run(script, 5000)
    script.mode[2] = "silent"
    mon.run(script, 4000)
    [(t, previous, status)] = mon.transitions(2)
    assert (previous, status) == (S.CAUGHT_UP, S.UNREACHABLE) and 7000 <= t <= 7500
    assert mon.replica(3)["status"] == S.CAUGHT_UP  # the skewed node is judged on the leader's clock


def test_with_a_skewed_follower_a_dead_leader_is_still_leaderless():
    script, mon = QuorumScript(), Monitor()
    script.skew[3] = 3000
    mon.run(script, 5000)
    script.leader_talks, script.noops = False, False
    mon.run(script, 4000)
    assert quorum_transitions(mon) == [S.LEADERLESS]


@pytest.mark.parametrize("emitter", ["follower metrics", "leader fetch", "leader metrics"])
def test_one_record_stamped_four_minutes_ahead_changes_nothing(emitter):
    script, mon = QuorumScript(), Monitor()
    mon.run(script, 10_000)
    if emitter == "follower metrics":
        stray = script.metrics(2)
    elif emitter == "leader fetch":
        stray = script.fetch(2, script.leader_leo)
    else:
        stray = script.metrics(1)
    stray["time_ms"] += 240_000
    mon.feed(script.run(400) + [stray])
    mon.run(script, 60_000)
    assert all_transitions(mon) == [], all_transitions(mon)[:3]
    # ... and a real fault right after is flagged on time
    script.mode[3] = "silent"
    mon.run(script, 3000)
    assert [s for _, _, s in mon.transitions(3)] == [S.UNREACHABLE]


def test_records_of_one_node_arriving_seconds_late_change_no_verdict():
    # Node 3's own publisher holds its records back 3 s (a buffer after a broker hiccup): they
    # are judged at their own time, not as silence. (The leader's fetch records about node 3 come
    # with the leader's other records: one quorum's records share one Kafka partition.)
    script, mon = QuorumScript(), Monitor()
    late: list[list[dict]] = []
    for _ in range(60):
        batch = script.run(1000)
        mine = [r for r in batch if r.get("node_id") == 3]
        late.append(mine)
        mon.feed([r for r in batch if r.get("node_id") != 3] + (late.pop(0) if len(late) > 3 else []))
    assert all_transitions(mon) == [], all_transitions(mon)[:3]
    # the same node really stopping is still unreachable (its fetches are what stop)
    script.mode[3] = "silent"
    for _ in range(5):
        mon.feed(script.run(1000) + (late.pop(0) if late else []))
    assert [s for _, _, s in mon.transitions(3)] == [S.UNREACHABLE]


def test_a_frozen_leader_is_unreachable_when_the_new_leaders_clock_jumped_ahead():
    # Found by the nemesis (seed 2026, 30 min): node 3's clock stepped 7 s ahead, then leader 1
    # froze and node 3 won the election. Its stamps are outliers (ahead of every other clock
    # by more than any delay explains), so its view moves on the quorum's time; started on a
    # time in another clock's terms, that view stood still and the frozen old leader showed
    # `stalled` for 23 s instead of `unreachable`. Node 3's clock starts 3 s behind, so its
    # offset is not zero, as every node's is after the pipeline was silent a while.
    script, mon = QuorumScript(), Monitor()
    script.skew[3] = -3000
    mon.run(script, 10_000)
    script.skew[3] = 4000  # stepped 7 s ahead
    mon.run(script, 3000)
    script.leader_talks, script.noops = False, False
    script.mode[1] = "silent"
    mon.feed(script.run(1500))
    script.epoch, script.leader = script.epoch + 1, 3
    script.mode = {1: "silent", 2: "follow"}
    script.leader_talks = script.noops = True
    elected = script.t - T0
    mon.feed([script.state_change(3, "leader", from_state="candidate", leader=3)] + script.run(100))
    mon.run(script, 10_000)
    assert mon.quorum()["leader_id"] == 3
    became = [(t, new) for t, _, new in mon.transitions(1)]
    assert [new for _, new in became][-1:] == [S.UNREACHABLE], became
    assert became[-1][0] - elected <= CFG.unreachable_after_ms + 1000, (elected, became)
    assert mon.replica(2)["status"] == S.CAUGHT_UP


def test_a_whole_quorum_read_seconds_behind_changes_no_verdict():
    # The Kafka partition holding this quorum is read 3 s behind the others: its records come
    # late together, and are judged at their own time.
    script, mon = QuorumScript(), Monitor()
    pending: list[list[dict]] = []
    for _ in range(60):
        pending.append(script.run(1000))
        if len(pending) > 3:
            mon.feed(pending.pop(0))
    assert all_transitions(mon) == []
    script.mode[2] = "silent"
    for _ in range(8):
        pending.append(script.run(1000))
        mon.feed(pending.pop(0))
    assert [s for _, _, s in mon.transitions(2)] == [S.UNREACHABLE]


# --- epochs and leaders ------------------------------------------------------------------------

def test_a_record_with_an_absurd_epoch_is_rejected_not_adopted():
    script, mon = QuorumScript(), Monitor()
    mon.run(script, 5000)
    bad = script.metrics(2, epoch=2 ** 62)
    mon.feed([bad] + script.run(500))
    mon.run(script, 30_000)
    [rejected] = mon.events("rejected")
    assert rejected["status"] == "implausible_epoch" and str(2 ** 62) in rejected["reason"]
    assert all_transitions(mon) == []
    assert mon.quorum()["leader_epoch"] == 5


def test_a_partitioned_voter_campaigning_without_pre_vote_is_an_election_attempt_not_the_epoch():
    # pre_vote false: node 3, cut off, becomes candidate in ever higher epochs; the working
    # leader is not leaderless and is no zombie; node 3 itself is unreachable (the real fault).
    script, mon = QuorumScript(), Monitor()
    mon.run(script, 5000)
    script.mode[3] = "silent"
    for i in range(20):
        batch = script.run(1000)
        batch.append(script.metrics(3, state="candidate", epoch=script.epoch + 1 + i))
        mon.feed(batch)
    q = mon.quorum()
    assert (q["status"], q["leader_id"], q["leader_epoch"], q["zombie_leaders"]) == (S.DEGRADED, 1, 5, 0)
    assert q["candidate_epoch"] == script.epoch + 20
    assert quorum_transitions(mon) == [S.DEGRADED]
    assert mon.replica(3)["status"] == S.UNREACHABLE


def test_a_reformatted_cluster_with_the_same_id_is_a_new_incarnation():
    script, mon = QuorumScript(), Monitor()
    script.epoch = 57
    mon.run(script, 10_000)
    # formatted anew: epochs start again at 1, logs at 0
    fresh = QuorumScript(t0=script.t, epoch=1)
    fresh.leader_leo = fresh.hw = 0
    fresh.leo = {r: 0 for r in fresh.leo}
    mon.run(fresh, 30_000)
    [event] = mon.events("incarnation")
    assert "57" in event["reason"]
    q = mon.quorum()
    assert (q["status"], q["leader_epoch"], q["incarnation"]) == (S.HEALTHY, 1, 1)


def test_followers_naming_the_leader_with_an_advancing_high_watermark_keep_it_alive():
    # The leader's event publisher is down; the quorum works: not leaderless.
    script, mon = QuorumScript(), Monitor()
    mon.run(script, 5000)
    script.leader_talks = False
    mon.run(script, 30_000)
    assert quorum_transitions(mon) == []
    q = mon.quorum()
    assert (q["status"], q["leader_id"], q["majority_reachable"]) == (S.HEALTHY, 1, True)
    assert "followers" in q["reason"]
    # Nothing commits any more: the leader is gone after all. (The high watermark is seen to stop
    # a moment before the last follower's report of it ages out: `stalled`, then `leaderless`.)
    script.noops = False
    mon.run(script, 4000)
    assert quorum_transitions(mon)[-1] == S.LEADERLESS


def failover(script: QuorumScript, mon: Monitor, new_leader: int, split_votes: int) -> None:
    """The leader dies; the other voters campaign through `split_votes` failed elections (700 ms
    each, their metrics saying so); `new_leader` wins; the old leader comes back as a follower."""
    old = script.leader
    script.leader_talks = False
    script.noops = False
    for i in range(split_votes):
        epoch = script.epoch + 1 + i
        campaigning = [v for v in script.voters if v != old]
        batch = [r for r in script.run(700) if r["type"] != "metrics"]
        batch += [script.state_change(v, "candidate", epoch=epoch) for v in campaigning]
        batch += [script.metrics(v, state="candidate", epoch=epoch) for v in campaigning]
        mon.feed(batch)
    script.epoch += split_votes + 1
    script.leader = new_leader
    script.leo[new_leader] = script.leader_leo
    script.mode = {r: "follow" for r in (*script.voters, *script.observers) if r != new_leader}
    script.leader_talks = script.noops = True
    mon.feed([script.state_change(new_leader, "leader", epoch=script.epoch, leader=new_leader,
                                  from_state="candidate")] + script.run(500))


def test_one_failover_with_split_votes_is_one_leader_change_not_a_storm():
    script, mon = QuorumScript(), Monitor()
    mon.run(script, 5000)
    failover(script, mon, new_leader=2, split_votes=2)
    mon.run(script, 20_000)
    q = mon.quorum()
    assert (q["leader_id"], q["leader_epoch"], q["leader_changes_total"], q["leader_changes_window"]) == (2, 8, 1, 1)
    assert q["elections_total"] == 3
    assert "leader changes" not in q["reason"]


def test_three_leader_changes_in_the_window_are_still_a_storm():
    script, mon = QuorumScript(), Monitor()
    mon.run(script, 5000)
    for new_leader in (2, 3, 1):
        failover(script, mon, new_leader=new_leader, split_votes=1)
        mon.run(script, 5000)
    q = mon.quorum()
    assert q["leader_changes_window"] == 3 and q["status"] == S.DEGRADED and "leader changes" in q["reason"]


def test_a_graceful_handover_with_a_short_gap_is_not_leaderless():
    script, mon = QuorumScript(), Monitor()
    mon.run(script, 5000)
    # node 1 resigns (EndQuorumEpoch), 0.9 s without a leader, node 2 wins epoch 6
    script.leader_talks, script.noops = False, False
    mon.feed([script.state_change(1, "resigned", from_state="leader", leader=1)] + script.run(900))
    script.epoch, script.leader = 6, 2
    script.mode = {1: "follow", 3: "follow"}
    script.leader_talks = script.noops = True
    mon.feed([script.state_change(2, "leader", from_state="candidate", leader=2)] + script.run(100))
    mon.run(script, 20_000)
    assert S.LEADERLESS not in quorum_transitions(mon)
    assert mon.quorum()["leader_id"] == 2
    # nor is any follower: each keeps its verdict through the gap, as the quorum does
    assert mon.transitions(3) == [] and mon.transitions(1) == []
    # A failover whose gap is longer than the fetch timeout is leaderless, as it should be.
    script2, mon2 = QuorumScript(), Monitor()
    mon2.run(script2, 5000)
    failover(script2, mon2, new_leader=2, split_votes=4)
    assert S.LEADERLESS in quorum_transitions(mon2)


def test_an_evaluation_between_a_new_leaders_claim_and_its_first_fetch_flags_no_follower():
    # The new leader's claim and its followers' first fetches land in different micro-batches.
    script, mon = QuorumScript(), Monitor()
    mon.run(script, 5000)
    script.epoch, script.leader = 6, 2
    script.mode = {1: "follow", 3: "follow"}
    mon.feed([script.state_change(1, "resigned", from_state="leader", leader=1),
              script.state_change(2, "leader", from_state="candidate", leader=2)])
    mon.run(script, 10_000)
    assert mon.transitions(3) == [] and mon.transitions(1) == []
    assert mon.quorum()["leader_id"] == 2 and mon.replica(3)["status"] == S.CAUGHT_UP
    # a replica flagged before the handover keeps its verdict and its cause through the gap
    script, mon = QuorumScript(), Monitor()
    mon.run(script, 5000)
    script.mode[3] = "silent"
    mon.run(script, 5000)
    flagged = mon.replica(3)
    script.epoch, script.leader, script.mode[1] = 6, 2, "follow"
    mon.feed([script.state_change(1, "resigned", from_state="leader", leader=1),
              script.state_change(2, "leader", from_state="candidate", leader=2)])
    kept = mon.replica(3)
    assert (kept["status"], kept["cause"], kept["reason"]) == (flagged["status"], flagged["cause"], flagged["reason"])
    assert flagged["status"] == S.UNREACHABLE and mon.events("cause") == []


def test_a_backlog_in_a_quorums_first_batch_is_judged_at_every_tick_as_batch_by_batch():
    # a job started from the earliest offsets reads a quorum's history in one micro-batch
    def recorded(batch_ms: int) -> list[tuple[int, str, str]]:
        script, mon = QuorumScript(), Monitor()
        records = script.run(10_000)
        script.mode[3] = "silent"
        records += script.run(10_000)
        script.mode[3] = "follow"
        records += script.run(10_000)
        step = max(1, len(records) * batch_ms // 30_000)
        for i in range(0, len(records), step):
            mon.feed(records[i:i + step])
        windows = [(w["replica_id"], w["status"]) for w in mon.events("window")]
        return mon.transitions(3) + mon.transitions(None), windows
    (by_batch, windows), (backlog, backlog_windows) = recorded(500), recorded(30_000)
    assert backlog_windows == windows and windows, (windows, backlog_windows)
    assert [t[1:] for t in backlog] == [t[1:] for t in by_batch] and len(backlog) >= 4, (by_batch, backlog)
    assert all(abs(a[0] - b[0]) <= CFG.tick_ms for a, b in zip(by_batch, backlog)), (by_batch, backlog)


def test_hysteresis_applies_once_and_a_new_leader_is_never_held():
    script, mon = QuorumScript(), Monitor()
    mon.run(script, 10_000)
    script.mode[3] = "silent"
    mon.run(script, 10_000)
    script.mode[3] = "follow"
    mon.run(script, 10_000, batch_ms=100)
    (t_back_replica, _, status), = [t for t in mon.transitions(3) if t[2] == S.CAUGHT_UP]
    (t_back_quorum, _, q_status), = [t for t in mon.transitions(None) if t[2] == S.HEALTHY]
    hold = CFG.recovery_hold_ms
    assert status == S.CAUGHT_UP and q_status == S.HEALTHY
    assert 20_000 + hold <= t_back_replica <= 20_000 + hold + 600
    assert abs(t_back_quorum - t_back_replica) <= 200  # not a second hold on top
    # A new leader is caught up from its first word, never shown as anything else.
    failover(script, mon, new_leader=2, split_votes=0)
    mon.run(script, 5000)
    assert [s for _, _, s in mon.transitions(2) if s != S.CAUGHT_UP and s != S.UNKNOWN] == []
    assert mon.replica(2)["status"] == S.CAUGHT_UP


# --- voter sets ------------------------------------------------------------------------------

def test_a_voter_set_change_is_an_event_and_the_majority_follows_the_set_in_force():
    script, mon = QuorumScript(voters=(1, 2, 3), observers=(4,)), Monitor()
    mon.run(script, 5000)
    script.voters = (1, 2, 3, 4)  # KIP-853: node 4 added as a voter
    mon.run(script, 3000)
    [event] = mon.events("voter_set")
    assert "[1, 2, 3] -> [1, 2, 3, 4]" in event["reason"]
    assert (mon.quorum()["voters"], mon.replica(4)["role"]) == (4, "voter")
    # two of four voters gone is no majority (three of five would have been enough before)
    script.mode[3] = script.mode[4] = "silent"
    script.noops = False
    mon.run(script, 4000)
    assert mon.quorum()["status"] == S.NO_MAJORITY


# --- the collector path --------------------------------------------------------------------------

def polled(script: QuorumScript, mon: Monitor, ms: int, interval_ms: int = 1000, collector_skew: int = 0,
           failing: bool = False) -> None:
    for _ in range(ms // interval_ms):
        script.run(interval_ms)
        rec = script.poll_error(interval_ms=interval_ms) if failing else \
            script.snapshot(collector_skew=collector_skew, interval_ms=interval_ms)
        mon.feed([rec])


@pytest.mark.parametrize("collector_skew", [0, 1000, -1000, 60_000])
def test_a_collector_at_the_documented_interval_flags_nothing_for_ten_minutes(collector_skew):
    script, mon = QuorumScript(observers=(4,)), Monitor()
    polled(script, mon, 600_000, interval_ms=1000, collector_skew=collector_skew)
    assert all_transitions(mon) == [], all_transitions(mon)[:3]
    assert mon.quorum()["status"] == S.HEALTHY


def test_a_collector_flags_a_voter_that_stops_fetching():
    script, mon = QuorumScript(), Monitor()
    polled(script, mon, 10_000, collector_skew=1000)
    script.mode[3] = "silent"
    polled(script, mon, 5000)
    assert [s for _, _, s in mon.transitions(3)] == [S.UNREACHABLE]
    assert quorum_transitions(mon) == [S.DEGRADED]


@pytest.mark.parametrize("interval_ms", [2000, 5000])
def test_a_collector_too_slow_for_the_thresholds_cannot_vouch_but_does_not_page(interval_ms):
    script, mon = QuorumScript(), Monitor()
    polled(script, mon, 300_000, interval_ms=interval_ms)
    assert quorum_transitions(mon) == []
    assert mon.quorum()["status"] == S.HEALTHY
    assert {mon.replica(r)["status"] for r in (2, 3)} == {S.UNKNOWN}
    assert "too slow" in mon.replica(2)["reason"]


def test_describe_quorum_failing_is_leaderless_not_silence():
    script, mon = QuorumScript(), Monitor()
    polled(script, mon, 10_000)
    polled(script, mon, 5000, failing=True)
    assert quorum_transitions(mon) == [S.LEADERLESS]
    assert "DescribeQuorum failing (NOT_LEADER_OR_FOLLOWER" in mon.quorum()["reason"]
    polled(script, mon, 10_000)
    assert quorum_transitions(mon) == [S.LEADERLESS, S.HEALTHY]


# --- exactly-once: event numbers survive a replay -----------------------------------------------------

def test_a_replayed_batch_emits_the_same_events_with_the_same_numbers():
    script, mon = QuorumScript(), Monitor()
    mon.run(script, 5000)
    script.mode[3] = "silent"
    batch = script.run(4000)
    saved = copy.deepcopy(mon.state)
    first = [r for r in mon.feed(batch) if r.get("event_seq") is not None]
    mon.state = saved  # the state store as it was before the batch: Spark replays it
    replay = [r for r in mon.feed(batch) if r.get("event_seq") is not None]
    assert first and [(r["event_seq"], r["kind"], r.get("replica_id"), r["status"]) for r in first] == \
        [(r["event_seq"], r["kind"], r.get("replica_id"), r["status"]) for r in replay]
    seqs = [r["event_seq"] for r in first]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
