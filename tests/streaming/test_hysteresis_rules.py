"""Hysteresis (hysteresis.py), one case per rule: a table of (held verdict, candidate, expected
held verdict and events). A worse status applies at once, a better one after the hold, a status
entered in silence clears at once, a new cause under the same status is an event."""
from __future__ import annotations

import pytest

from streaming.health import statuses as S
from streaming.health.hysteresis import settle
from streaming.health.state import Verdict

HOLD_MS = 4000
NOW = 100_000


def held(status: str, since: int = NOW - 10_000, cause: str | None = None, silent: bool = False,
         pending_since: int = -1, initial: bool = False) -> Verdict:
    return Verdict(status, since, f"was {status}", silent, pending_since=pending_since, initial=initial, cause=cause)


# (id, held before, candidate status, its cause, hold, expected (status, since, pending_since), events)
CASES = [
    ("first verdict", None, S.LAGGING, S.BEHIND, HOLD_MS, (S.LAGGING, NOW, -1), []),
    ("first good after no evidence", held(S.UNKNOWN, initial=True), S.CAUGHT_UP, None, HOLD_MS,
     (S.CAUGHT_UP, NOW, -1), []),
    ("same status, same cause", held(S.LAGGING, cause=S.BEHIND, pending_since=NOW - 100), S.LAGGING, S.BEHIND,
     HOLD_MS, (S.LAGGING, NOW - 10_000, -1), []),
    ("same status, new cause", held(S.UNREACHABLE, cause=S.UNKNOWN_CAUSE), S.UNREACHABLE, S.PARTITIONED, HOLD_MS,
     (S.UNREACHABLE, NOW - 10_000, -1), [("cause", S.UNREACHABLE)]),
    ("worse at once", held(S.CAUGHT_UP), S.STALLED, S.BEHIND, HOLD_MS, (S.STALLED, NOW, -1),
     [("transition", S.STALLED)]),
    ("better held", held(S.LAGGING), S.CAUGHT_UP, None, HOLD_MS, (S.LAGGING, NOW - 10_000, NOW), []),
    ("better held on", held(S.LAGGING, pending_since=NOW - HOLD_MS + 1), S.CAUGHT_UP, None, HOLD_MS,
     (S.LAGGING, NOW - 10_000, NOW - HOLD_MS + 1), []),
    ("better after the hold", held(S.LAGGING, pending_since=NOW - HOLD_MS), S.CAUGHT_UP, None, HOLD_MS,
     (S.CAUGHT_UP, NOW, -1), [("transition", S.CAUGHT_UP)]),
    ("better after a silent one", held(S.UNREACHABLE, silent=True), S.CAUGHT_UP, None, HOLD_MS,
     (S.CAUGHT_UP, NOW, -1), [("transition", S.CAUGHT_UP)]),
    ("no hold", held(S.LAGGING), S.CAUGHT_UP, None, 0, (S.CAUGHT_UP, NOW, -1), [("transition", S.CAUGHT_UP)]),
    ("to unknown at once", held(S.LAGGING), S.UNKNOWN, S.UNKNOWN_CAUSE, HOLD_MS, (S.UNKNOWN, NOW, -1),
     [("transition", S.UNKNOWN)]),
]


@pytest.mark.parametrize("cur, candidate, cause, hold_ms, expected, events", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_settle(cur, candidate, cause, hold_ms, expected, events):
    seen = []
    v = settle(cur, candidate, f"now {candidate}", NOW, False, kind="replica", hold_ms=hold_ms, cause=cause,
               event=lambda kind, **f: seen.append((kind, f["status"])), rid=2, role="voter")
    assert (v.status, v.since, v.pending_since) == expected
    assert seen == events


def test_a_first_unknown_is_no_evidence_and_its_first_good_successor_news_to_nobody():
    first = settle(None, S.UNKNOWN, "no evidence yet", NOW, False, kind="replica", hold_ms=HOLD_MS, cause=None,
                   event=lambda *a, **k: pytest.fail("no event"))
    assert first.initial


@pytest.mark.parametrize("old, new, better", [
    (S.DEGRADED, S.HEALTHY, True), (S.LEADERLESS, S.NO_MAJORITY, True), (S.HEALTHY, S.SPLIT_BRAIN, False),
    (S.UNOBSERVED, S.HEALTHY, False),
], ids=["degraded to healthy", "leaderless to no majority", "healthy to split brain", "from unobserved"])
def test_the_quorum_order(old, new, better):
    assert S.is_improvement("quorum", old, new) is better
