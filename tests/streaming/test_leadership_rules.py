"""Epochs and leaders (leadership.py), one case per rule: tables of (claims, support and reports,
expected epoch and leader). The current epoch comes from a claim another voter backs, or from a
majority of voters reporting it; a larger number alone is an election in progress."""
from __future__ import annotations

import pytest

from streaming.health.config import HealthConfig
from streaming.health.leadership import Leadership
from streaming.health.state import Report, new_state

CFG = HealthConfig()
T = 100_000


def quorum(voters=(1, 2, 3), epoch=5, leader=1):
    s = new_state("c", "t", 0)
    s.voter_set = list(voters) if voters is not None else None
    s.epoch, s.leader, s.epoch_first_ms, s.leader_alive_ms = epoch, leader, T - 10_000, T
    events = []
    return s, Leadership(CFG, s, lambda kind, **f: events.append(kind)), events


def report(epoch, state="follower", leader=1):
    return Report(epoch, state, leader, T, -1, -1)


# (id, voters, claims {epoch: [nodes]}, support {epoch: {leader: [voters]}}, expected leader of epoch 6)
CONFIRMED = [
    ("backed by a voter", (1, 2, 3), {6: [2]}, {6: {2: [3]}}, 2),
    ("not backed", (1, 2, 3), {6: [2]}, {}, -1),
    ("backed only by itself", (1, 2, 3), {6: [2]}, {6: {2: [2]}}, -1),
    ("backed by an observer", (1, 2, 3), {6: [2]}, {6: {2: [7]}}, -1),
    ("the only voter", (2,), {6: [2]}, {}, 2),
]


@pytest.mark.parametrize("voters, claims, support, leader", [c[1:] for c in CONFIRMED], ids=[c[0] for c in CONFIRMED])
def test_confirmed_leader(voters, claims, support, leader):
    s, lead, _ = quorum(voters)
    for epoch, nodes in claims.items():
        for n in nodes:
            lead.claim(n, epoch, T)
    for epoch, by_leader in support.items():
        for node, backers in by_leader.items():
            for v in backers:
                lead.support(node, epoch, v, T)
    assert lead.confirmed_leader(6) == leader


MAJORITY = [
    ("no voter set", None, {1: 6, 2: 6, 3: 6}, -1),
    ("all agree", (1, 2, 3), {1: 6, 2: 6, 3: 6}, 6),
    ("the majority's highest", (1, 2, 3), {1: 7, 2: 6, 3: 4}, 6),
    ("too few reports", (1, 2, 3), {1: 7}, -1),
]


@pytest.mark.parametrize("voters, epochs, majority", [c[1:] for c in MAJORITY], ids=[c[0] for c in MAJORITY])
def test_majority_epoch(voters, epochs, majority):
    s, lead, _ = quorum(voters)
    s.reports = {str(n): report(e) for n, e in epochs.items()}
    assert lead.majority_epoch() == majority


# (id, claim of epoch 6 by node 2 backed by, reports {node: epoch}, expected (epoch, leader, elections))
SETTLE = [
    ("a confirmed claim is adopted", [3], {}, (6, 2, 1)),
    ("a claim alone is an election in progress", [], {}, (5, 1, 0)),
    ("a majority reporting it is adopted, its leader not yet known", [], {2: 6, 3: 6}, (6, -1, 1)),
]


@pytest.mark.parametrize("backers, reports, expected", [c[1:] for c in SETTLE], ids=[c[0] for c in SETTLE])
def test_settle_epoch(backers, reports, expected):
    s, lead, _ = quorum()
    lead.claim(2, 6, T)
    for v in backers:
        lead.support(2, 6, v, T)
    s.reports = {str(n): report(e, leader=-1) for n, e in reports.items()}
    lead.settle_epoch(6, T)
    assert (s.epoch, s.leader, s.elections) == expected


def test_a_lower_epoch_is_not_adopted():
    s, lead, _ = quorum()
    lead.claim(2, 4, T)
    lead.support(2, 4, 3, T)
    lead.settle_epoch(4, T)
    assert (s.epoch, s.leader) == (5, 1)


def test_a_majority_back_in_epoch_after_the_leader_went_quiet_is_a_new_incarnation():
    s, lead, events = quorum()
    s.leader_alive_ms = T - 10 * CFG.leader_claim_window_ms
    s.reports = {str(n): report(1, leader=-1) for n in (1, 2, 3)}
    lead.settle_epoch(1, T)
    assert (s.incarnation, events) == (1, ["incarnation"])


@pytest.mark.parametrize("voters, changes, events", [
    ([1, 2, 3], 0, []), ([1, 2, 3, 4], 1, ["voter_set"]), ([], 0, []),
], ids=["the same", "a new voter", "none given"])
def test_set_voters(voters, changes, events):
    s, lead, seen = quorum()
    lead.set_voters(voters, T, "a test")
    assert (s.voter_set_changes, seen) == (changes, events)


@pytest.mark.parametrize("hw, advanced", [(50, False), (101, True)], ids=["not advanced", "advanced"])
def test_leader_progress(hw, advanced):
    s, lead, _ = quorum()
    s.hw, s.hw_advanced_ms = 100, T - 5000
    lead.leader_progress(120, hw, T)
    assert (s.leader_leo, s.hw_advanced_ms == T) == (120, advanced)


def test_changes_older_than_the_storm_window_are_forgotten():
    s, lead, _ = quorum()
    s.epoch_changes = [T - CFG.storm_window_ms - 1, T - CFG.storm_window_ms]
    s.leader_change_times = [T - CFG.storm_window_ms - 1, T]
    lead.forget_old_changes(T)
    assert (s.epoch_changes, s.leader_change_times) == ([T - CFG.storm_window_ms], [T])
