"""The health state machine on scripted quorums, pure Python (event time only; silence and
timers are in test_processor_timers.py). Each test names the rule it checks."""
from __future__ import annotations


import pytest

from streaming.health import statuses as S
from streaming.health.config import HealthConfig

from .quorum_script import T0, QuorumScript
from .tracker_harness import Monitor

# each verdict here also holds when every record is folded one by one (conftest.py)
pytestmark = pytest.mark.usefixtures("reduction_differential")


def test_healthy_quorum_flags_nothing_over_ten_minutes_of_synthetic_time():
    script, mon = QuorumScript(observers=(4,)), Monitor()
    mon.run(script, 600_000, batch_ms=2000)
    assert mon.quorum()["status"] == S.HEALTHY
    assert {mon.replica(r)["status"] for r in (1, 2, 3, 4)} == {S.CAUGHT_UP}
    assert [t for t in mon.rows if t["kind"] == "transition"] == []
    assert mon.replica(2)["caught_up_ratio"] == 1.0
    q = mon.quorum()
    assert (q["leader_id"], q["leader_epoch"], q["voters"], q["voters_caught_up"], q["voters_reachable"]) == (1, 5, 3, 3, 3)
    assert q["majority_reachable"] is True and q["hw_age_ms"] <= 1000 and q["elections_total"] == 0


def test_replica_that_keeps_fetching_without_catching_up_is_lagging_then_stalled():
    script, mon = QuorumScript(), Monitor()
    mon.run(script, 5000)
    script.mode[3] = "stuck"
    mon.run(script, 15_000)
    [(t_lag, _, lagging), (t_stall, _, stalled)] = mon.transitions(3)
    assert (lagging, stalled) == (S.LAGGING, S.STALLED)
    # KIP-836: its last caught-up time stays near when it got stuck (5 s); lagging after the
    # fetch timeout (2 s), stalled after the stall threshold (10 s), each within one batch.
    assert 7000 < t_lag <= 7500 and 15_000 < t_stall <= 15_500
    r = mon.replica(3)
    assert r["lag_records"] == script.leader_leo - script.leo[3] > 0
    assert 14_000 <= r["lag_ms"] <= 15_500 and r["last_fetch_age_ms"] <= 100
    assert mon.quorum()["status"] == S.DEGRADED and mon.quorum()["voters_caught_up"] == 2


def test_replica_with_no_fetch_for_the_fetch_timeout_while_the_leader_lives_is_unreachable():
    script, mon = QuorumScript(), Monitor()
    mon.run(script, 5000)
    script.mode[2] = "silent"
    mon.run(script, 4000)
    # Seen by the leader's clock 2 s after its last fetch; stamped on the quorum's clock, which
    # trails the leader's latest record by at most an eighth of the window (250 ms).
    [(t, previous, status)] = mon.transitions(2)
    assert (previous, status) == (S.CAUGHT_UP, S.UNREACHABLE) and 7250 <= t <= 7500
    assert mon.replica(2)["last_fetch_age_ms"] == 4000
    q = mon.quorum()
    assert (q["status"], q["voters_reachable"], q["majority_reachable"]) == (S.DEGRADED, 2, True)


def flapping_replica_transitions(cfg: HealthConfig) -> list[tuple[int, str, str]]:
    """Replica 2 stuck for 2.5 s, then caught up for 0.2 s, over and over: it touches the
    leader's end every 2.7 s, just slower than the 2 s it takes to count as lagging."""
    script, mon = QuorumScript(), Monitor(cfg)
    mon.run(script, 3000)
    for _ in range(6):
        script.mode[2] = "stuck"
        mon.run(script, 2500, batch_ms=100)
        script.mode[2] = "follow"
        mon.run(script, 200, batch_ms=100)
    return mon.transitions(2)


def test_without_hysteresis_a_replica_on_the_edge_flaps():
    assert len(flapping_replica_transitions(HealthConfig(recovery_hold_ms=0))) >= 8


def test_hysteresis_keeps_a_replica_on_the_edge_flagged_until_it_stays_caught_up():
    assert [(p, s) for _, p, s in flapping_replica_transitions(HealthConfig())] == [(S.CAUGHT_UP, S.LAGGING)]


def test_recovery_clears_the_flag_after_the_hold():
    script, mon = QuorumScript(), Monitor()
    mon.run(script, 3000)
    script.mode[2] = "silent"
    mon.run(script, 3000)
    assert mon.replica(2)["status"] == S.UNREACHABLE
    script.mode[2] = "follow"
    mon.run(script, 6000, batch_ms=100)
    t, previous, status = mon.transitions(2)[-1]
    assert (previous, status) == (S.UNREACHABLE, S.CAUGHT_UP)
    hold = HealthConfig().recovery_hold_ms
    assert 6000 + hold <= t <= 6000 + hold + 200  # fetching again from 6 s, cleared after the hold


def test_worse_status_applies_at_once_better_status_after_the_hold():
    assert S.is_improvement("replica", S.STALLED, S.CAUGHT_UP)
    assert not S.is_improvement("replica", S.CAUGHT_UP, S.LAGGING)
    assert not S.is_improvement("replica", S.UNKNOWN, S.CAUGHT_UP)  # no evidence to hold on to
    assert S.is_improvement("quorum", S.LEADERLESS, S.HEALTHY)


def test_observer_lagging_does_not_degrade_the_quorum():
    script, mon = QuorumScript(observers=(4,)), Monitor()
    mon.run(script, 3000)
    script.mode[4] = "stuck"
    mon.run(script, 5000)
    assert (mon.replica(4)["role"], mon.replica(4)["status"]) == ("observer", S.LAGGING)
    assert mon.quorum()["status"] == S.HEALTHY


def test_fewer_than_a_majority_of_voters_reachable_is_no_majority():
    script, mon = QuorumScript(voters=(1, 2, 3, 4, 5)), Monitor()
    mon.run(script, 3000)
    script.mode[3] = script.mode[4] = script.mode[5] = "silent"
    script.noops = False  # without a majority the high watermark cannot move either
    mon.run(script, 4000)
    q = mon.quorum()
    assert (q["status"], q["voters"], q["voters_reachable"], q["majority_reachable"]) == (S.NO_MAJORITY, 5, 2, False)


def test_quorum_whose_leader_dies_is_leaderless_and_its_replicas_unknown():
    script, mon = QuorumScript(), Monitor()
    mon.run(script, 3000)
    script.leader_talks = False  # followers still publish metrics: the input is alive
    script.noops = False         # and nothing commits: their high watermark stands still
    mon.run(script, 4000)
    q = mon.quorum()
    assert (q["status"], q["leader_id"]) == (S.LEADERLESS, -1)
    # Unreachable needs a live leader to say so: without one the followers are unknown.
    assert {mon.replica(r)["status"] for r in (2, 3)} == {S.UNKNOWN}


def test_high_watermark_not_advancing_is_a_stalled_quorum():
    script, mon = QuorumScript(), Monitor()
    mon.run(script, 3000)
    script.noops = False
    mon.run(script, 3000)
    q = mon.quorum()
    assert q["status"] == S.STALLED_QUORUM and q["hw_age_ms"] > HealthConfig().hw_stall_after_ms
    assert [s for _, _, s in mon.transitions(None)] == [S.STALLED_QUORUM]


def test_two_leaders_in_one_epoch_is_split_brain():
    script, mon = QuorumScript(), Monitor()
    mon.run(script, 3000)
    mon.feed([script.fetch(3, script.leader_leo, leader=2)])  # node 2 also leads epoch 5
    q = mon.quorum()
    assert (q["status"], q["leaders_claimed"]) == (S.SPLIT_BRAIN, 2)


def test_leader_of_an_older_epoch_still_talking_is_a_zombie():
    script, mon = QuorumScript(), Monitor()
    mon.run(script, 3000)
    script.leader, script.epoch = 2, 6  # node 2 wins epoch 6; node 1 keeps answering fetches in 5
    mon.run(script, 1000)
    mon.feed([script.fetch(3, script.leader_leo, leader=1, epoch=5)])
    q = mon.quorum()
    assert (q["leader_id"], q["leader_epoch"], q["zombie_leaders"], q["leaders_claimed"]) == (2, 6, 1, 1)
    assert q["status"] == S.DEGRADED and "zombie" in q["reason"]
    assert q["elections_total"] == 1


def test_three_epoch_changes_within_the_window_is_an_election_storm():
    script, mon = QuorumScript(), Monitor()
    mon.run(script, 2000)
    for leader in (2, 3, 1):
        script.leader, script.epoch = leader, script.epoch + 1
        mon.run(script, 3000)
    q = mon.quorum()
    assert (q["elections_total"], q["epoch_changes_window"], q["status"]) == (3, 3, S.DEGRADED)
    mon.run(script, 60_000, batch_ms=5000)
    assert (mon.quorum()["epoch_changes_window"], mon.quorum()["status"]) == (0, S.HEALTHY)


def test_log_end_offset_going_backwards_is_a_truncation_with_the_records_lost():
    script, mon = QuorumScript(), Monitor()
    mon.run(script, 2000)
    mon.feed([script.metrics(3, leo=130)])
    mon.feed([script.metrics(3, leo=121)])
    [event] = [r for r in mon.rows if r["kind"] == "truncation"]
    assert (event["replica_id"], event["records_lost"], event["log_end_offset"]) == (3, 9, 121)
    mon.feed(script.run(500))
    assert (mon.replica(3)["truncations_total"], mon.replica(3)["truncated_records_total"]) == (1, 9)


def test_valid_fetch_below_a_diverging_one_is_a_truncation_even_when_metrics_never_show_it():
    # a node truncates and catches up between two metrics records: the leader's fetch records
    # (diverging at 130, then valid at 121) are what show it
    script, mon = QuorumScript(), Monitor()
    mon.run(script, 2000)
    mon.feed([script.metrics(3, leo=130)])
    mon.feed([script.fetch(3, 130, outcome="diverging")])
    mon.feed([script.fetch(3, 121)])
    [event] = [r for r in mon.rows if r["kind"] == "truncation"]
    assert (event["replica_id"], event["records_lost"], event["log_end_offset"]) == (3, 9, 121)
    mon.feed([script.metrics(3, leo=121)])  # the same truncation seen again is not counted twice
    assert (mon.replica(3)["truncations_total"], mon.replica(3)["truncated_records_total"]) == (1, 9)


def test_kip836_rule_caught_up_when_reaching_the_previous_leader_end():
    # Rule 2 of the facts file: not at the leader's end now, but at least at what the end was at
    # the previous fetch, so caught up as of that previous fetch's time.
    script, mon = QuorumScript(), Monitor()
    script.noops = False
    mon.feed([script.fetch(2, 100)])          # t=T0, leader end 100: rule 1, caught up at T0
    script.t += 1000
    script.leader_leo = 110
    mon.feed([script.fetch(2, 105)])          # behind 110, but 105 >= previous end 100: caught up at T0
    script.t += 1000
    script.leader_leo = 120
    mon.feed([script.fetch(2, 112)])          # 112 >= previous end 110: caught up as of T0+1000
    assert mon.replica(2)["last_caught_up_ms"] == T0 + 1000
    assert mon.replica(2)["lag_records"] == 8


def test_a_lost_fetch_record_does_not_lose_the_caught_up_time_the_leader_published():
    # The same three fetches as above, the middle one lost: replaying what is left gives an older
    # caught-up time (112 >= 100, the end at the fetch before the gap: caught up as of T0); the
    # leader's own KIP-836 result, carried in each record, keeps T0+1000.
    def fetches(carry: bool) -> list[dict]:
        script = QuorumScript()
        script.noops = False
        out = []
        for step, (end, offset) in enumerate(((100, 100), (110, 105), (120, 112))):
            script.t, script.leader_leo = T0 + 1000 * step, end
            rec = script.fetch(2, offset)
            if carry:
                rec["last_caught_up_timestamp_ms"] = T0 + 1000 * max(0, step - 1)
            out.append(rec)
        return out

    for carry, expected in ((True, T0 + 1000), (False, T0)):
        first, _lost, last = fetches(carry)
        mon = Monitor()
        mon.feed([first])
        mon.feed([last])
        assert mon.replica(2)["last_caught_up_ms"] == expected, f"carried: {carry}"
    complete = Monitor()
    for rec in fetches(carry=True):
        complete.feed([rec])
    assert complete.replica(2)["last_caught_up_ms"] == T0 + 1000


def test_quorum_snapshot_records_are_taken_as_the_leader_reports_them():
    from quorum import events as E
    mon = Monitor()
    rs = [E.SnapshotReplica(1, 500, T0, T0), E.SnapshotReplica(2, 500, T0 - 100, T0 - 100),
          E.SnapshotReplica(3, 420, T0 - 100, T0 - 30_000)]
    snap = E.QuorumSnapshot("c1", "__cluster_metadata", 0, T0, 1, 7, 500, tuple(rs),
                            (E.SnapshotReplica(9, 10, T0 - 400_000, T0 - 400_000),), "broker:9092")
    mon.feed([E.to_dict(snap)])
    assert mon.replica(3)["status"] == S.STALLED and mon.replica(3)["lag_records"] == 80
    assert mon.replica(2)["status"] == S.CAUGHT_UP
    q = mon.quorum()
    assert (q["leader_id"], q["leader_epoch"], q["high_watermark"], q["voters"]) == (1, 7, 500, 3)
    # The observer was last heard 400 s ago: forgotten, as the leader forgets it after 300 s.
    assert [r["replica_id"] for r in mon.rows if r["kind"] == "forget"] == [9]


def test_caught_up_windows_record_the_intervals_and_the_ratio():
    script, mon = QuorumScript(), Monitor(HealthConfig(caught_up_horizon_ms=20_000))
    mon.run(script, 10_000)
    script.mode[2] = "stuck"
    mon.run(script, 6000)
    script.mode[2] = "follow"
    mon.run(script, 6000)
    windows = [(r["status"], r["window_start_ms"] - T0, r["window_end_ms"] - T0)
               for r in mon.rows if r["kind"] == "window" and r["replica_id"] == 2]
    assert [w[0] for w in windows] == ["caught_up", "lagging"]
    assert windows[0][2] == windows[1][1]  # contiguous
    ratio = mon.replica(2)["caught_up_ratio"]
    lagging_ms = windows[1][2] - windows[1][1]
    assert ratio == pytest.approx(1 - lagging_ms / 20_000, abs=0.03)


def test_a_voter_not_heard_from_yet_does_not_degrade_the_quorum_until_it_times_out():
    script, mon = QuorumScript(), Monitor()
    script.mode[3] = "silent"
    mon.feed(script.run(1000))  # the leader's voter set names 3, which has not fetched yet
    assert (mon.replica(3)["status"], mon.quorum()["status"]) == (S.UNKNOWN, S.HEALTHY)
    mon.run(script, 2000)
    assert (mon.replica(3)["status"], mon.quorum()["status"]) == (S.UNREACHABLE, S.DEGRADED)
