"""The quorum verdict's rules (quorum_verdict.py), one case per rule: a table of (evidence,
expected), the evidence a healthy quorum's with the few facts the case is about changed; and
its evidence gathered without changing the state."""
from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from streaming.health import statuses as S
from streaming.health.config import HealthConfig
from streaming.health.leadership import Leadership
from streaming.health.quorum_verdict import (RULES, LeaderEvidence, QuorumEvidence, partition_text,
                                             quorum_evidence, quorum_verdict)
from streaming.health.replica_verdicts import ReplicaJudge, ReplicaVerdict
from streaming.health.rules import first_match
from streaming.health.state import PollState, ReplicaState, Verdict, new_state

CFG = HealthConfig()  # fetch timeout 2000 ms; high watermark stalled after 2000 ms; storm: 3 changes in 60 s
NOW = 1_000_000
LEAD = LeaderEvidence(claimants=[1], alive=True, gone_for=0, zombies=[], candidate_epoch=-1, view=None,
                      view_age=0, handover=False)
HEALTHY = QuorumEvidence(
    now_ms=NOW, epoch=5, leader=1, lead=LEAD, voters=3, caught_up=3, reachable=3, majority=True, behind=[],
    unknown=[], leader_side=[1, 2, 3], cut_off=[], partition="", hw=100, hw_age=0, hw_allowance_ms=0,
    leader_changes=0, poll=None, polls_failing=False, unobserved=False, heard_ms=NOW)
HELD = Verdict(S.DEGRADED, NOW - 5000, "voters [3] not caught up", False)
FAILING = PollState(1000, failures=4, error="timeout", blind=True)


def quorum(lead: dict | None = None, **changed) -> QuorumEvidence:
    return replace(HEALTHY, lead=replace(LEAD, **(lead or {})), **changed)


CASES = [
    ("split brain", quorum({"claimants": [1, 2]}), (S.SPLIT_BRAIN, "nodes [1, 2] claim epoch 5")),
    ("unobserved", quorum({"alive": False, "gone_for": 9000}, poll=FAILING, polls_failing=True, unobserved=True,
                          heard_ms=NOW - 9000),
     (S.UNOBSERVED, "the collector reaches no node: DescribeQuorum failing (timeout, 4 polls in a row), and no "
                    "node's own record for 9000 ms")),
    ("leaderless", quorum({"alive": False, "gone_for": 2500, "candidate_epoch": 6}),
     (S.LEADERLESS, "no leader heard for epoch 5 for 2500 ms; election in progress (epoch 6)")),
    ("handover", quorum({"alive": False, "gone_for": 500}), (HELD.status, HELD.reason)),
    ("no majority", quorum(reachable=1, majority=False), (S.NO_MAJORITY, "1 of 3 voters reachable")),
    ("high watermark stalled", quorum(hw_age=2500),
     (S.STALLED_QUORUM, "high watermark 100 not advanced for 2500 ms")),
    ("voters behind", quorum(behind=[3], caught_up=2), (S.DEGRADED, "voters [3] not caught up")),
    ("zombie leaders", quorum({"zombies": [2]}), (S.DEGRADED, "zombie leaders [2]")),
    ("election storm", quorum(leader_changes=3), (S.DEGRADED, "3 leader changes within 60000 ms")),
    ("healthy", quorum({"view_age": 100}), (S.HEALTHY, "all voters caught up")),
]


@pytest.mark.parametrize("rule, e, expected", CASES, ids=[c[0] for c in CASES])
def test_the_first_rule_that_applies_gives_the_status_and_reason(rule, e, expected):
    assert first_match(RULES, e, CFG).name == rule
    assert quorum_verdict(e, CFG, HELD) == expected


def test_every_rule_has_its_case():
    assert [c[0] for c in CASES] == [r.name for r in RULES]


@pytest.mark.parametrize("e, reason", [
    (quorum(poll=FAILING, polls_failing=True),
     "judged by the nodes' own views: DescribeQuorum failing (timeout, 4 polls in a row)"),
    (quorum({"view_age": None}), "leader 1 heard through its followers (its own records do not arrive)"),
    (quorum({"view_age": 2500}), "leader 1 heard through its followers (its own records do not arrive)"),
], ids=["polls failing", "no view of its own", "its view late"])
def test_a_healthy_quorum_tells_how_it_is_seen(e, reason):
    assert quorum_verdict(e, CFG, None) == (S.HEALTHY, reason)


def test_a_handover_with_nothing_held_gives_no_verdict_yet():
    assert quorum_verdict(quorum({"alive": False, "gone_for": 500}), CFG, None) is None


def test_a_partition_is_the_reason_when_there_is_one():
    text = "network partition: voters [3] cut off from leader 1; its side [1, 2] holds majority"
    assert quorum_verdict(quorum(behind=[3], cut_off=[3], partition=text), CFG, None) == (S.DEGRADED, text)


@pytest.mark.parametrize("args, text", [
    ((1, True, [1, 2], [], [1, 2, 3], 3, -1), ""),
    ((1, True, [1, 2], [3], [1, 2, 3], 3, -1),
     "network partition: voters [3] cut off from leader 1; its side [1, 2] holds majority"),
    ((1, True, [1], [2, 3], [1, 2, 3], 3, -1),
     "network partition: leader 1 cut off from every voter ([2, 3] alive); its side has no majority"),
    ((2, True, [1, 2, 3][1:], [1], [1, 2, 3], 3, 1),
     "network partition: previous leader 1 cut off from every voter; leader 2's side [2, 3] holds majority"),
], ids=["none", "a voter cut off", "the leader alone", "the previous leader alone"])
def test_partition_text(args, text):
    assert partition_text(*args) == text


def state_with_changes():
    s = new_state("c", "t", 0)
    s.epoch, s.leader, s.started_ms, s.hw, s.hw_advanced_ms = 5, 1, 0, 100, NOW
    s.voter_set = [1, 2, 3]
    for rid in (1, 2, 3):
        s.replicas[str(rid)] = ReplicaState("voter")
    s.epoch_changes = [NOW - 90_000, NOW - 30_000, NOW - 1000]
    s.leader_change_times = [NOW - 70_000, NOW - 20_000, NOW - 1000]
    return s


def test_the_evidence_counts_changes_within_the_storm_window_and_changes_no_state():
    s = state_with_changes()
    before = copy.deepcopy(s)
    verdicts = {rid: ReplicaVerdict(S.CAUGHT_UP, "caught up", None) for rid in (1, 2, 3)}
    e = quorum_evidence(CFG, s, ReplicaJudge(CFG, s), NOW, LEAD, verdicts)
    assert (e.leader_changes, e.caught_up, e.majority) == (2, 3, True)
    assert s == before


def test_the_tracker_forgets_changes_older_than_the_storm_window():
    s = state_with_changes()
    Leadership(CFG, s, lambda *a, **k: None).forget_old_changes(NOW)
    assert (s.epoch_changes, s.leader_change_times) == ([NOW - 30_000, NOW - 1000], [NOW - 20_000, NOW - 1000])
