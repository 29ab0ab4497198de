"""The nemesis' schedule, model and judge, on schedules and series written out here: the same seed
draws the same faults within the model's limits; a page with a fault behind it is justified and
one without is false; a fault that outlasts its alert's threshold without the page is a missed
page. What else fails a run, rule by rule: test_nemesis_judge_rules.py."""
from __future__ import annotations

import pytest

from deploy.nemesis.judge import NOTIFY_WITHIN_S, Notification, Series, judge, report
from deploy.nemesis.model import STATUS_GRACE_S, Done, Model
from deploy.nemesis.runner import read_notifications, rfc3339_seconds, rule_seconds
from deploy.nemesis.schedule import MAX_VOTERS_OUT, VOTERS_OUT, Planned, active, draw

CLUSTER = "local-quorum"
FOR = rule_seconds()


@pytest.mark.parametrize("seed", [1, 7, 2026])
def test_a_seed_draws_one_schedule_within_the_models_limits(seed):
    print(f"seed {seed}")
    plan = draw(seed, 30)
    assert plan == draw(seed, 30) and plan != draw(seed + 1, 30)
    assert len(plan) >= 60
    assert {p.kind for p in plan} >= {"freeze", "kill", "cutoff", "kafka-freeze", "kafka-kill", "job-kill"}
    for p in plan:
        others = [o for o in active(plan, p.start_s) if o.cluster == p.cluster and o.index != p.index]
        out = sum(VOTERS_OUT.get(o.target, 0) for o in others + [p] if o.kind != "skew")
        assert out <= MAX_VOTERS_OUT, (p, others)
        if p.target.endswith("majority"):
            assert not [o for o in others if VOTERS_OUT.get(o.target, 0) and o.kind != "skew"], (p, others)
    assert not [p for p in draw(seed, 30, kafka_cutoff=False) if p.kind == "kafka-cutoff"]


def fault(index, kind, nodes, roles, start, healed, target="follower") -> Done:
    return Done(Planned(index, kind, target, 0, healed - start), CLUSTER, tuple(nodes), tuple(roles), start, healed)


def model(*done) -> Model:
    return Model(list(done), {CLUSTER: {1, 2, 3}}, {CLUSTER: {4}})


def alert(name, start, end, **labels):
    return ({"alertname": name, "alertstate": "firing", "cluster": CLUSTER, **labels},
            [float(t) for t in range(start, end + 1)])


def series(alerts=(), status=None, causes=None) -> Series:
    return Series(list(alerts), status or {}, causes or {}, {}, [])


def test_a_frozen_follower_must_page_for_itself_and_nothing_else_may():
    frozen = fault(0, "freeze", [2], ["follower"], 1000, 1060)
    unreachable = {(CLUSTER, 2): [(float(t), "unreachable") for t in range(1004, 1062)]}
    causes = {(CLUSTER, 2): [(float(t), "down") for t in range(1004, 1062)]}
    good = judge(model(frozen), series([alert("QuorumVoterUnreachable", 1015, 1090, replica="2")], unreachable,
                                       causes), FOR, 1200)
    assert (good.false_pages, good.missed_pages, good.wrong_causes) == ([], [], [])
    assert [round(latency) for _, latency, _ in good.detections] == [4]
    print("\n".join(report(good, 0, 3)))

    wrong = judge(model(frozen), series([alert("QuorumVoterUnreachable", 1015, 1090, replica="3"),
                                         alert("QuorumNoMajority", 1020, 1040)]), FOR, 1200)
    assert sorted(ep.alert for ep, _ in wrong.false_pages) == ["QuorumNoMajority", "QuorumVoterUnreachable"]
    assert len(wrong.missed_pages) == 1 and "voter 2" in wrong.missed_pages[0]
    assert report(wrong, 0, 3)[-1].startswith("nemesis: 1 faults, 0 detected, 2 false pages, 1 missed pages")


def test_a_short_fault_demands_no_page_and_a_page_long_after_the_heal_is_false():
    short = fault(0, "freeze", [2], ["follower"], 1000, 1015)
    verdict = judge(model(short), series([alert("QuorumVoterUnreachable", 1200, 1230, replica="2")]), FOR, 1300)
    assert verdict.missed_pages == [] and len(verdict.false_pages) == 1


def test_two_voters_out_must_page_a_lost_majority_and_may_page_one_failure_from_it():
    majority = fault(0, "kill", [1, 2], ["leader", "follower"], 1000, 1060, target="majority")
    none = judge(model(majority), series(), FOR, 1200)
    assert len(none.missed_pages) == 1 and "a majority" in none.missed_pages[0]
    paged = judge(model(majority), series([alert("QuorumLeaderless", 1020, 1100),
                                           alert("QuorumOneFailureFromNoMajority", 1065, 1080)]), FOR, 1200)
    assert (paged.false_pages, paged.missed_pages) == ([], [])


def test_the_monitor_down_excuses_a_missing_page():
    cut = fault(0, "cutoff", [3], ["follower"], 1000, 1060)
    assert len(judge(model(cut), series(), FOR, 1200).missed_pages) == 1
    job = Done(Planned(1, "job-kill", "job", 0, 0), None, (), (), 990, 990)
    assert judge(model(cut, job), series(), FOR, 1200).missed_pages == []


def test_an_election_storm_while_a_killed_and_a_slowed_voter_are_out_is_justified_and_not_without_them():
    """The leader's check-quorum counts a follower whose fetches come seconds apart as gone: with
    another voter killed it resigns, wins again and resigns, a real storm (seed 7, 3.5 min)."""
    killed = fault(0, "kill", [2], ["follower"], 1000, 1034)
    slowed = fault(1, "slow-disk", [3], ["follower"], 1004, 1015)
    storm = alert("QuorumElectionStorm", 1035, 1190)
    assert judge(model(killed, slowed), series([storm]), FOR, 1300).false_pages == []
    assert len(judge(model(killed), series([storm]), FOR, 1300).false_pages) == 1


def test_an_election_after_a_leader_fault_is_no_wrong_status_and_a_monitor_fault_excuses_only_its_own_spell():
    killed = fault(0, "kill", [1], ["leader"], 1000, 1030, target="leader")
    leaderless = series(status={}, causes={})
    leaderless.quorum_status[CLUSTER] = [(float(t), "leaderless") for t in range(1002, 1020)]
    assert judge(model(killed), leaderless, FOR, 1200).wrong_status_s[CLUSTER] == 0
    late = series()
    late.quorum_status[CLUSTER] = [(float(t), "leaderless") for t in range(1040, 1052)]
    assert judge(model(killed), late, FOR, 1200).wrong_status_s[CLUSTER] == 12 - STATUS_GRACE_S
    restart = Done(Planned(1, "events-restart", "events", 0, 0), None, (), (), 2000, 2015)
    assert model(restart).monitor_disturbed(2070, 2080) and not model(restart).monitor_disturbed(2080, 2090)
    job = Done(Planned(2, "job-kill", "job", 0, 0), None, (), (), 2000, 2000)
    assert model(job).monitor_disturbed(2025, 2030) and not model(job).monitor_disturbed(2031, 2040)


def test_a_leader_out_with_no_successor_possible_is_detected_by_the_quorums_status_and_a_follower_is_not():
    """Leader 1 frozen while follower 2 is frozen (seed 2026, 30 min, #22 and #23): no leader can
    be elected, so no replica is judged (the old leader `unknown`, cause `down`) and the quorum's
    `no_majority` is the verdict on the leader too. A follower's fault is detected by its own
    status only."""
    follower = fault(0, "freeze", [2], ["follower"], 1000, 1030)
    leader = fault(1, "freeze", [1], ["leader"], 1014, 1031, target="leader")
    unknown = {(CLUSTER, r): [(float(t), "unknown") for t in range(1016, 1032)] for r in (1, 3)}
    unknown[(CLUSTER, 2)] = [(float(t), "unreachable") for t in range(1003, 1016)]
    paging = Series([], unknown, {}, {CLUSTER: [(float(t), "no_majority") for t in range(1017, 1032)]}, [])
    latencies = {d.planned.index: latency for d, latency, _ in judge(model(follower, leader), paging, FOR, 1200).detections}
    assert latencies == {0: 3.0, 1: 3.0}
    quiet = Series([], unknown, {}, {}, [])
    assert [latency for _, latency, _ in judge(model(leader), quiet, FOR, 1200).detections] == [None]
    lone = fault(0, "freeze", [2], ["follower"], 1020, 1040)
    assert [latency for _, latency, _ in judge(model(lone), paging, FOR, 1200).detections] == [None]


def notified(name, received, starts_at, status="firing", **labels) -> Notification:
    return Notification(float(received), status, {"alertname": name, "cluster": CLUSTER, **labels}, float(starts_at))


def test_a_page_must_reach_the_operator_and_a_notification_must_have_fired_in_prometheus():
    """What Alertmanager notified is judged too: a page that fired in Prometheus and was never
    notified is missed for the operator; a notification of an alert Prometheus never fired is a
    false page."""
    frozen = fault(0, "freeze", [2], ["follower"], 1000, 1060)
    unreachable = {(CLUSTER, 2): [(float(t), "unreachable") for t in range(1004, 1062)]}
    fired = alert("QuorumVoterUnreachable", 1015, 1090, replica="2")

    def with_notifications(notifications, read=2000.0) -> Series:
        got = series([fired], unreachable)
        got.notifications, got.notifications_read = notifications, read
        return got
    good = judge(model(frozen), with_notifications([notified("QuorumVoterUnreachable", 1017, 1015, replica="2"),
                                                   notified("QuorumVoterUnreachable", 1120, 1015, "resolved",
                                                            replica="2")]), FOR, 1200)
    assert (good.false_pages, good.missed_pages) == ([], [])
    # an alert joining a group already notified waits for the group's next flush
    late = judge(model(frozen), with_notifications([notified("QuorumVoterUnreachable", 1070, 1015, replica="2")]),
                 FOR, 1200)
    assert late.missed_pages == []

    silent = judge(model(frozen), with_notifications([]), FOR, 1200)
    assert len(silent.missed_pages) == 1 and "no notification from Alertmanager" in silent.missed_pages[0]
    too_late = notified("QuorumVoterUnreachable", 1015 + NOTIFY_WITHIN_S + 5, 1015, replica="2")
    assert len(judge(model(frozen), with_notifications([too_late]), FOR, 1200).missed_pages) == 1
    # read before its window closed: not judged
    assert judge(model(frozen), with_notifications([], read=1030.0), FOR, 1200).missed_pages == []
    # not recorded at all (a stack that keeps no record): not judged either
    assert judge(model(frozen), series([fired], unreachable), FOR, 1200).missed_pages == []

    stray = judge(model(frozen), with_notifications([notified("QuorumVoterUnreachable", 1017, 1015, replica="2"),
                                                    notified("QuorumNoMajority", 1030, 1029)]), FOR, 1200)
    assert [(ep.alert, why) for ep, why in stray.false_pages] == [
        ("QuorumNoMajority", "notified by Alertmanager, never firing in Prometheus")]


def test_notifications_are_read_from_the_receivers_record(tmp_path):
    assert rfc3339_seconds("2026-12-05T07:00:01.250000000Z") == pytest.approx(1796454001.25)
    assert rfc3339_seconds("2026-12-05T07:00:01Z") == 1796454001.0
    record = tmp_path / "alert-notifications.jsonl"
    assert read_notifications(record, 0) == []
    record.write_text('{"received": 10.0, "status": "firing", "labels": {"alertname": "A"}, '
                      '"startsAt": "1970-01-01T00:00:09.5Z"}\n'
                      '{"received": 20.0, "status": "resolved", "labels": {"alertname": "A"}, '
                      '"startsAt": "1970-01-01T00:00:09.5Z"}\n')
    assert read_notifications(record, 15) == [Notification(20.0, "resolved", {"alertname": "A"}, 9.5)]
