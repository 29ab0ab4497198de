"""A replica's verdict: its status against the live leader's view, and, when it is not caught
up, the cause, with the evidence (see tracker.py's docstring for how evidence is judged).

Two tables of rules over `ReplicaFacts`, as the quorum's (quorum_verdict.py), first match wins:
`STATUS_RULES` give the status and why; `CAUSE_RULES[status]` give why a replica is not caught
up: `rejected` (the leader refuses its fetches), `slow` (fetches seconds apart), `behind`
(fetching often, never at the leader's end), `partitioned` (alive by its own records, its fetches
not reaching the leader), `down` (nothing from it at all), `unknown` (the evidence does not
decide: watched from outside, no live leader, a node that publishes nothing itself). The facts
are gathered (`ReplicaJudge.facts`) without changing state: the lag sample the `behind` rule
measured against comes back in the verdict (`trend`) for the tracker to keep.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

from . import lag_trend
from . import statuses as S
from .config import HealthConfig
from .leadership import ViewNow
from .rules import Rule, first_match
from .state import LagSample, QuorumState, Refusal, ReplicaState, Report, Verdict

CAMPAIGNING = ("candidate", "prospective")
HOLD = "hold"


class ReplicaVerdict(NamedTuple):
    status: str
    reason: str
    cause: str | None
    trend: LagSample | None = None  # the lag sample to measure the next trend against (rule `behind`)


class ReplicaFacts(NamedTuple):
    """What one evaluation knows of one replica (a tuple: gathered for every replica at every
    evaluation, so cheap to make). Times named `*_age`/`*_for` are durations: on the leader's
    clock for its fetches (`stamp` is its now), on the quorum's for the node's own records;
    None where there is nothing to measure from."""
    rid: int
    leader: int
    epoch: int
    leader_alive: bool
    handover: bool               # the leader changing hands, for less than the fetch timeout
    held: Verdict | None         # the verdict held so far
    gone: bool                   # its metrics endpoint refuses connections since its last own record
    refused_age: int
    via: str | None              # how the leader's view arrives ("node", "poll"); None without one
    view_age: int | None
    view_allowance_ms: int       # how long the view may stay the latest (the collector's poll gap)
    poll_interval: int           # -1 when no poll
    stamp: int | None            # the leader's clock's now
    fetch_silence: int | None    # since its last valid fetch (or the view's start)
    fetched: bool                # a valid fetch of it seen
    caught_up_age: int | None
    behind_for: int | None       # since it was last caught up (or first fetched)
    rejected: Refusal | None
    rejected_age: int | None
    gap_ms: int                  # its valid fetches' mean spacing
    peak_ms: int                 # and their longest lately
    own_age: int | None          # since its own last record
    alive_within: int            # how old that record may be for the node to count alive
    report: Report | None        # its own latest word on its state
    back_for: int                # since its records resumed after a silence
    silent_ms: int               # how long that silence was
    campaigns: int               # election attempts since its last valid fetch
    lag: int | None              # records behind the leader's log end
    lag_ref: LagSample | None    # the trend's base so far

    @property
    def alive(self) -> bool:
        return self.own_age is not None and self.own_age <= self.alive_within

    @property
    def speaks(self) -> bool:
        """Alive by its own records, and saying what it thinks of the leader."""
        return self.alive and self.report is not None

    @property
    def follows(self) -> bool:
        return self.report is not None and self.report.leader == self.leader and self.report.epoch == self.epoch

    @property
    def trend_base(self) -> LagSample | None:
        if self.lag is None or self.stamp is None:
            return None
        return lag_trend.next_sample(self.lag_ref, self.lag, self.stamp)


def _view_late(e: ReplicaFacts, cfg: HealthConfig) -> bool:
    return e.via is None or e.view_age > cfg.unreachable_after_ms + e.view_allowance_ms


def _poll_too_slow(e: ReplicaFacts, cfg: HealthConfig) -> bool:
    return e.via == "poll" and e.poll_interval > 0 and 2 * e.poll_interval > cfg.unreachable_after_ms


STATUS_RULES = (
    # positive evidence, whatever the leader's view says yet: not lagging first
    Rule("gone", S.UNREACHABLE, lambda e, cfg: e.gone,
         lambda e, cfg: f"its metrics endpoint refuses connections ({e.refused_age} ms ago)"),
    # as for the quorum: a replica keeps its verdict, and why, through a handover's gap
    Rule("handover", HOLD, lambda e, cfg: e.handover and e.held is not None
         and not (e.rid == e.leader and e.leader_alive), lambda e, cfg: ""),
    Rule("leader", S.CAUGHT_UP, lambda e, cfg: e.rid == e.leader and e.leader_alive, lambda e, cfg: "leader"),
    Rule("no live leader", S.UNKNOWN, lambda e, cfg: not e.leader_alive,
         lambda e, cfg: "no live leader to judge against"),
    Rule("no view", S.UNKNOWN, _view_late,
         lambda e, cfg: f"the leader's view of its replicas has not arrived for {e.view_age} ms"),
    Rule("polled too slowly", S.UNKNOWN, _poll_too_slow,
         lambda e, cfg: (f"polled every {e.poll_interval} ms: too slow to vouch for it within "
                         f"{cfg.unreachable_after_ms} ms (poll every {cfg.unreachable_after_ms // 2} ms or less)")),
    Rule("no fetch", S.UNREACHABLE, lambda e, cfg: e.fetch_silence > cfg.unreachable_after_ms,
         lambda e, cfg: f"no valid fetch for {e.fetch_silence} ms"),
    Rule("never fetched", S.UNKNOWN, lambda e, cfg: not e.fetched, lambda e, cfg: "no valid fetch seen yet"),
    Rule("caught up", S.CAUGHT_UP,
         lambda e, cfg: e.caught_up_age is not None and e.caught_up_age <= cfg.lagging_after_ms,
         lambda e, cfg: "caught up"),
    Rule("stalled", S.STALLED, lambda e, cfg: e.behind_for > cfg.stall_after_ms,
         lambda e, cfg: f"fetching but not caught up for {e.behind_for} ms"),
    Rule("lagging", S.LAGGING, lambda e, cfg: True, lambda e, cfg: f"not caught up for {e.behind_for} ms"),
)


def _slow(e: ReplicaFacts, cfg: HealthConfig) -> bool:
    # Seconds apart on average, or lately: a slowed node's fetches come in pairs (seconds, then
    # milliseconds apart), whose mean sits about the threshold.
    return e.peak_ms > cfg.slow_fetch_gap_ms


def _apart(e: ReplicaFacts) -> str:
    return f"valid fetches {e.gap_ms} ms apart on average, {e.peak_ms} ms at the longest lately"


def _partitioned(name: str, applies: Callable[[ReplicaFacts], bool], what: Callable[[ReplicaFacts], str]) -> Rule:
    """A node alive by its own records, saying it does not follow the leader (or campaigns
    between following it): its fetches do not reach the leader."""
    return Rule(name, S.PARTITIONED, lambda e, cfg: e.speaks and applies(e),
                lambda e, cfg: f"node {e.rid} is alive (its own record {e.own_age} ms ago) and {what(e)}")


REJECTED = Rule("rejected", S.REJECTED,
                lambda e, cfg: e.rejected is not None and e.rejected_age <= cfg.unreachable_after_ms,
                lambda e, cfg: (f"the leader refuses its fetches: {e.rejected.outcome} ({e.rejected.count} "
                                f"in a row, the last {e.rejected_age} ms ago)"))
BEHIND_CAUSES = (
    REJECTED,
    Rule("slow", S.SLOW, _slow, lambda e, cfg: _apart(e)),
    Rule("behind", S.BEHIND, lambda e, cfg: True, lambda e, cfg: lag_trend.trend_text(e.lag, e.trend_base, e.stamp)),
)
UNREACHABLE_CAUSES = (
    Rule("gone", S.DOWN, lambda e, cfg: e.gone,
         lambda e, cfg: f"nothing from node {e.rid} for {e.own_age} ms and nothing listens there"),
    REJECTED,
    Rule("watched from outside", S.UNKNOWN_CAUSE, lambda e, cfg: e.via == "poll" and e.own_age is None,
         lambda e, cfg: ("watched through DescribeQuorum only: a partition, a crash and a refused fetch "
                         "look alike from outside")),
    # Slow only while its fetches still come at their slow pace (a silence within twice its
    # recent longest gap), whatever its campaigns: its own fetch timeout runs out between slow
    # fetches too. A node cut off keeps the gaps it had (no fetch arrives to change them).
    Rule("slow, silent a while", S.SLOW,
         lambda e, cfg: e.speaks and _slow(e, cfg) and e.follows and e.fetch_silence <= 2 * e.peak_ms,
         lambda e, cfg: f"{_apart(e)}, the last {e.fetch_silence} ms ago"),
    # Back from a silence (a frozen process resumed): what it reports is what it knew before,
    # and its first fetch is still on its way. A node cut off keeps publishing, and is told
    # apart a fetch timeout later.
    Rule("back from a silence", S.UNKNOWN_CAUSE, lambda e, cfg: e.speaks and e.back_for < cfg.unreachable_after_ms,
         lambda e, cfg: (f"node {e.rid} is back {e.back_for} ms after {e.silent_ms} ms without a record, "
                         f"and has not fetched from leader {e.leader} yet")),
    _partitioned("campaigning", lambda e: e.report.state in CAMPAIGNING,
                 lambda e: f"campaigning in epoch {e.report.epoch} ({e.campaigns} election attempts)"),
    _partitioned("acting as leader", lambda e: e.report.state == "leader",
                 lambda e: f"still acting as leader of epoch {e.report.epoch}"),
    _partitioned("follows no leader", lambda e: e.report.leader < 0,
                 lambda e: f"follows no leader (epoch {e.report.epoch})"),
    _partitioned("follows another", lambda e: not e.follows,
                 lambda e: f"follows node {e.report.leader} in epoch {e.report.epoch}"),
    # A prospective node whose pre-vote fails goes back to the leader it knew, then times out
    # again: between attempts it reports following, its fetches still lost.
    _partitioned("between election attempts", lambda e: e.campaigns > 0,
                 lambda e: (f"between election attempts ({e.campaigns} since its last valid fetch) follows "
                            f"leader {e.leader} again, its fetches not arriving for {e.fetch_silence} ms")),
    # Still following: its own fetch timeout has not run out. A one-way partition or a stall:
    # not yet told apart.
    Rule("still following", S.UNKNOWN_CAUSE, lambda e, cfg: e.speaks,
         lambda e, cfg: (f"node {e.rid} is alive and follows leader {e.leader}, but no fetch of it "
                         f"arrived for {e.fetch_silence} ms")),
    Rule("publishes nothing", S.UNKNOWN_CAUSE, lambda e, cfg: e.own_age is None,
         lambda e, cfg: f"node {e.rid} publishes no records of its own: a partition and a crash look alike"),
    Rule("records stopped", S.DOWN, lambda e, cfg: True,
         lambda e, cfg: f"nothing from node {e.rid} for {e.own_age} ms: its records stopped with its fetches"),
)
CAUSE_RULES = {
    S.UNKNOWN: (
        Rule("records stopped", S.DOWN, lambda e, cfg: e.own_age is not None and not e.alive,
             lambda e, cfg: f"nothing from node {e.rid} for {e.own_age} ms"),
        Rule("no evidence", S.UNKNOWN_CAUSE, lambda e, cfg: True,
             lambda e, cfg: "no live leader's view to judge its fetches by" if e.via is None else "no evidence yet"),
    ),
    S.LAGGING: BEHIND_CAUSES,
    S.STALLED: BEHIND_CAUSES,
    S.UNREACHABLE: UNREACHABLE_CAUSES,
}


def replica_verdict(e: ReplicaFacts, cfg: HealthConfig) -> ReplicaVerdict:
    """The first status rule that applies (the held verdict for `HOLD`), and unless caught up,
    the first cause rule for that status: "status reason; cause: evidence"."""
    rule = first_match(STATUS_RULES, e, cfg)
    if rule.gives == HOLD:
        return ReplicaVerdict(e.held.status, e.held.reason, e.held.cause)
    reason = rule.tells(e, cfg)
    if rule.gives == S.CAUGHT_UP:
        return ReplicaVerdict(rule.gives, reason, None)
    cause = first_match(CAUSE_RULES[rule.gives], e, cfg)
    trend = e.trend_base if cause.gives == S.BEHIND else None
    return ReplicaVerdict(rule.gives, f"{reason}; {cause.gives}: {cause.tells(e, cfg)}", cause.gives, trend)


class ReplicaJudge:
    """Judges the replicas of one quorum at one evaluation."""

    def __init__(self, cfg: HealthConfig, s: QuorumState):
        self.cfg, self.s = cfg, s

    def verdict(self, rid: int, r: ReplicaState, now_ms: int, leader_alive: bool, view: ViewNow | None,
                view_age: int | None, handover: bool) -> ReplicaVerdict:
        return replica_verdict(self.facts(rid, r, now_ms, leader_alive, view, view_age, handover), self.cfg)

    def facts(self, rid: int, r: ReplicaState, now_ms: int, leader_alive: bool, view: ViewNow | None,
              view_age: int | None, handover: bool) -> ReplicaFacts:
        """The replica's evidence at `now_ms`, read from its state and the leader's view; nothing
        is written."""
        s = self.s
        stamp = view.stamp if view is not None else None
        lcu = r.last_caught_up
        poll = s.poll
        rejected = r.rejected
        leader_leo = s.leader_leo
        has_view = view is not None
        own_ms = r.own_ms
        # positional, in the fields' order: made for every replica at every evaluation
        return ReplicaFacts(
            rid, s.leader, s.epoch, leader_alive, handover, r.status, self.gone(r, now_ms), now_ms - r.refused_ms,
            view.via if has_view else None, view_age, s.leader_alive_allowance_ms,
            poll.interval if poll is not None else -1,
            stamp, stamp - max(r.last_fetch, view.since) if has_view else None, r.last_fetch >= 0,
            stamp - lcu if lcu >= 0 and has_view else None,
            stamp - (lcu if lcu >= 0 else r.first_fetch) if has_view else None,
            rejected, stamp - rejected.stamp if rejected is not None and has_view else None,
            r.gap_ms, max(r.gap_ms, r.gap_peak_ms),
            now_ms - own_ms if own_ms >= 0 else None, self.alive_within(r),
            s.reports.get(str(rid)), now_ms - r.back_ms, r.silent_ms, r.campaigns,
            max(0, leader_leo - r.leo) if leader_leo >= 0 and r.leo >= 0 else None, r.lag_ref)

    def gone(self, r: ReplicaState, now_ms: int) -> bool:
        """Its metrics endpoint, which answered before, refuses connections since its last own
        record, lately: its process is gone (a node that hangs still accepts them)."""
        refused = r.refused_ms
        return 0 <= r.own_ms < refused and now_ms - refused <= self.cfg.unreachable_after_ms

    def alive_within(self, r: ReplicaState) -> int:
        """How old its last own record may be for the node to count alive: its records' pace
        (two of its usual gaps, at most the fetch timeout) and a margin. Past it, gone; within
        it, a node that just stopped is not yet told apart."""
        cap = self.cfg.unreachable_after_ms
        pace = min(2 * r.own_gap_ms, cap) if r.own_gap_ms > 0 else cap
        return pace + cap // 8

    def follows(self, rid: int, now_ms: int) -> bool:
        """The replica's own latest report (or the last poll) names the live leader, recently."""
        s = self.s
        report = s.reports.get(str(rid))
        return report is not None and report.leader == s.leader and report.epoch == s.epoch \
            and now_ms - report.heard_ms <= self.cfg.unreachable_after_ms + s.leader_alive_allowance_ms
