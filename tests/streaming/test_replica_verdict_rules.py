"""The replica verdict's rules (replica_verdicts.py), one case per rule: a table of (evidence,
expected), the evidence a healthy follower's with the few facts the case is about changed."""
from __future__ import annotations

import pytest

from streaming.health import statuses as S
from streaming.health.config import HealthConfig
from streaming.health.replica_verdicts import (CAUSE_RULES, HOLD, STATUS_RULES, ReplicaFacts, ReplicaVerdict,
                                               replica_verdict)
from streaming.health.rules import first_match
from streaming.health.state import LagSample, Refusal, Report, Verdict

CFG = HealthConfig()  # fetch timeout 2000 ms: unreachable and lagging after 2000, slow past 1000 ms apart
FOLLOWER = ReplicaFacts(
    rid=2, leader=1, epoch=5, leader_alive=True, handover=False, held=None, gone=False, refused_age=0,
    via="node", view_age=0, view_allowance_ms=0, poll_interval=-1, stamp=100_000, fetch_silence=100,
    fetched=True, caught_up_age=100, behind_for=100, rejected=None, rejected_age=None, gap_ms=500, peak_ms=500,
    own_age=100, alive_within=2250, report=Report(5, "follower", 1, 99_900, 10, 9), back_for=60_000,
    silent_ms=-1, campaigns=0, lag=0, lag_ref=None)
HELD = Verdict(S.LAGGING, 90_000, "not caught up for 3000 ms; behind: 40 records behind the leader", False,
               cause=S.BEHIND)


def facts(**changed) -> ReplicaFacts:
    return FOLLOWER._replace(**changed)


def lagging(**changed) -> ReplicaFacts:
    return facts(caught_up_age=3000, behind_for=3000, **changed)


def unreachable(**changed) -> ReplicaFacts:
    return facts(fetch_silence=5000, **changed)


def report(state: str = "follower", leader: int = 1, epoch: int = 5) -> Report:
    return Report(epoch, state, leader, 99_900, 10, 9)


STATUS_CASES = [
    ("gone", facts(gone=True, refused_age=300, own_age=4000), S.UNREACHABLE, S.DOWN,
     "its metrics endpoint refuses connections (300 ms ago); down: nothing from node 2 for 4000 ms and nothing "
     "listens there"),
    ("handover", facts(handover=True, held=HELD), HELD.status, HELD.cause, HELD.reason),
    ("leader", facts(rid=1), S.CAUGHT_UP, None, "leader"),
    ("no live leader", facts(leader_alive=False), S.UNKNOWN, S.UNKNOWN_CAUSE,
     "no live leader to judge against; unknown: no evidence yet"),
    ("no view", facts(via=None, view_age=None), S.UNKNOWN, S.UNKNOWN_CAUSE,
     "the leader's view of its replicas has not arrived for None ms; unknown: no live leader's view to judge "
     "its fetches by"),
    ("polled too slowly", facts(via="poll", poll_interval=1500), S.UNKNOWN, S.UNKNOWN_CAUSE,
     "polled every 1500 ms: too slow to vouch for it within 2000 ms (poll every 1000 ms or less); unknown: "
     "no evidence yet"),
    ("no fetch", unreachable(report=None), S.UNREACHABLE, S.DOWN,
     "no valid fetch for 5000 ms; down: nothing from node 2 for 100 ms: its records stopped with its fetches"),
    ("never fetched", facts(fetched=False), S.UNKNOWN, S.UNKNOWN_CAUSE,
     "no valid fetch seen yet; unknown: no evidence yet"),
    ("caught up", FOLLOWER, S.CAUGHT_UP, None, "caught up"),
    ("stalled", facts(caught_up_age=None, behind_for=12_000), S.STALLED, S.BEHIND,
     "fetching but not caught up for 12000 ms; behind: 0 records behind the leader"),
    ("lagging", lagging(), S.LAGGING, S.BEHIND, "not caught up for 3000 ms; behind: 0 records behind the leader"),
]

CAUSE_CASES = [
    # not judged: no live leader or no view
    (S.UNKNOWN, "records stopped", facts(leader_alive=False, own_age=5000), S.DOWN, "nothing from node 2 for 5000 ms"),
    (S.UNKNOWN, "no evidence", facts(leader_alive=False), S.UNKNOWN_CAUSE, "no evidence yet"),
    # fetching, not caught up
    (S.LAGGING, "rejected", lagging(rejected=Refusal("fenced", 99_500, 3), rejected_age=500), S.REJECTED,
     "the leader refuses its fetches: fenced (3 in a row, the last 500 ms ago)"),
    (S.LAGGING, "slow", lagging(gap_ms=900, peak_ms=1800), S.SLOW,
     "valid fetches 900 ms apart on average, 1800 ms at the longest lately"),
    (S.LAGGING, "behind", lagging(lag=40, lag_ref=LagSample(96_000, 100, 97_000, 80)), S.BEHIND,
     "40 records behind the leader, the gap closing 13 records/s: caught up in about 3 s at that rate"),
    # no valid fetch for the fetch timeout
    (S.UNREACHABLE, "gone", unreachable(gone=True), S.DOWN, None),  # the `gone` status rule comes first
    (S.UNREACHABLE, "rejected", unreachable(rejected=Refusal("unknown_leader_epoch", 99_000, 9), rejected_age=1000),
     S.REJECTED, "the leader refuses its fetches: unknown_leader_epoch (9 in a row, the last 1000 ms ago)"),
    (S.UNREACHABLE, "watched from outside", unreachable(via="poll", own_age=None), S.UNKNOWN_CAUSE,
     "watched through DescribeQuorum only: a partition, a crash and a refused fetch look alike from outside"),
    (S.UNREACHABLE, "slow, silent a while", unreachable(gap_ms=1200, peak_ms=3000), S.SLOW,
     "valid fetches 1200 ms apart on average, 3000 ms at the longest lately, the last 5000 ms ago"),
    (S.UNREACHABLE, "back from a silence", unreachable(back_for=500, silent_ms=8000), S.UNKNOWN_CAUSE,
     "node 2 is back 500 ms after 8000 ms without a record, and has not fetched from leader 1 yet"),
    (S.UNREACHABLE, "campaigning", unreachable(report=report("candidate", -1, 7), campaigns=2), S.PARTITIONED,
     "node 2 is alive (its own record 100 ms ago) and campaigning in epoch 7 (2 election attempts)"),
    (S.UNREACHABLE, "acting as leader", unreachable(report=report("leader", 2, 4)), S.PARTITIONED,
     "node 2 is alive (its own record 100 ms ago) and still acting as leader of epoch 4"),
    (S.UNREACHABLE, "follows no leader", unreachable(report=report("unattached", -1)), S.PARTITIONED,
     "node 2 is alive (its own record 100 ms ago) and follows no leader (epoch 5)"),
    (S.UNREACHABLE, "follows another", unreachable(report=report(leader=3)), S.PARTITIONED,
     "node 2 is alive (its own record 100 ms ago) and follows node 3 in epoch 5"),
    (S.UNREACHABLE, "between election attempts", unreachable(campaigns=3), S.PARTITIONED,
     "node 2 is alive (its own record 100 ms ago) and between election attempts (3 since its last valid fetch) "
     "follows leader 1 again, its fetches not arriving for 5000 ms"),
    (S.UNREACHABLE, "still following", unreachable(), S.UNKNOWN_CAUSE,
     "node 2 is alive and follows leader 1, but no fetch of it arrived for 5000 ms"),
    (S.UNREACHABLE, "publishes nothing", unreachable(own_age=None, report=None), S.UNKNOWN_CAUSE,
     "node 2 publishes no records of its own: a partition and a crash look alike"),
    (S.UNREACHABLE, "records stopped", unreachable(own_age=9000), S.DOWN,
     "nothing from node 2 for 9000 ms: its records stopped with its fetches"),
]


@pytest.mark.parametrize("rule, e, status, cause, reason", STATUS_CASES, ids=[c[0] for c in STATUS_CASES])
def test_the_first_status_rule_that_applies_gives_the_verdict(rule, e, status, cause, reason):
    assert first_match(STATUS_RULES, e, CFG).name == rule
    v = replica_verdict(e, CFG)
    assert (v.status, v.cause, v.reason) == (status, cause, reason)


@pytest.mark.parametrize("status, rule, e, cause, evidence", CAUSE_CASES,
                         ids=[f"{c[0]}-{c[1]}" for c in CAUSE_CASES])
def test_the_first_cause_rule_for_the_status_tells_why(status, rule, e, cause, evidence):
    assert first_match(CAUSE_RULES[status], e, CFG).name == rule
    v = replica_verdict(e, CFG)
    assert v.cause == cause
    if evidence is not None:
        assert v.reason.endswith(f"; {cause}: {evidence}")


def test_every_rule_has_its_case():
    assert {c[0] for c in STATUS_CASES} == {r.name for r in STATUS_RULES}
    for status, rules in CAUSE_RULES.items():
        if status != S.STALLED:  # stalled shares lagging's rules
            assert {c[1] for c in CAUSE_CASES if c[0] == status} == {r.name for r in rules}, status


def test_the_leader_is_not_held_through_a_handover():
    assert replica_verdict(facts(rid=1, handover=True, held=HELD), CFG).status == S.CAUGHT_UP
    assert first_match(STATUS_RULES, facts(handover=True, held=None), CFG).gives != HOLD


@pytest.mark.parametrize("e, trend", [
    (lagging(lag=40), LagSample(100_000, 40, 100_000, 40)),                       # the first sample
    (lagging(lag=40, lag_ref=LagSample(96_000, 100, 97_000, 80)), LagSample(97_000, 80, 100_000, 40)),  # moved on
    (lagging(lag=40, lag_ref=LagSample(98_000, 60, 99_000, 50)), LagSample(98_000, 60, 99_000, 50)),    # kept
    (lagging(lag=None), None),                                                    # no lag known: nothing kept
    (lagging(gap_ms=900, peak_ms=1800, lag=40), None),                           # slow, not behind
    (facts(lag=40), None),                                                        # caught up
], ids=["first", "moved on", "kept", "no lag", "slow", "caught up"])
def test_only_the_behind_rule_returns_the_lag_sample_to_keep(e, trend):
    assert replica_verdict(e, CFG).trend == trend


def test_the_verdict_is_the_status_reason_and_cause():
    assert replica_verdict(FOLLOWER, CFG) == ReplicaVerdict(S.CAUGHT_UP, "caught up", None)
