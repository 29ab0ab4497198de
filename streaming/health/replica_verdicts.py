"""A replica's verdict: its status against the live leader's view, and, when it is not caught
up, the cause, with the evidence (see tracker.py's docstring for how evidence is judged)."""
from __future__ import annotations

from typing import NamedTuple

from . import statuses as S
from .config import HealthConfig
from .leadership import ViewNow
from .state import LagSample, QuorumState, ReplicaState

CAMPAIGNING = ("candidate", "prospective")
SAMPLE_TREND_MS = 3000  # the lag trend of a replica that is behind is measured over the last 3-6 s


class ReplicaVerdict(NamedTuple):
    status: str
    reason: str
    cause: str | None


class ReplicaJudge:
    """Judges the replicas of one quorum at one evaluation."""

    def __init__(self, cfg: HealthConfig, s: QuorumState):
        self.cfg, self.s = cfg, s

    def verdict(self, rid: int, r: ReplicaState, now_ms: int, leader_alive: bool, view: ViewNow | None,
                view_age: int | None, handover: bool) -> ReplicaVerdict:
        leader = self.s.leader
        if self.gone(r, now_ms):
            # positive evidence, whatever the leader's view says yet: not lagging first
            return ReplicaVerdict(S.UNREACHABLE, (
                f"its metrics endpoint refuses connections ({now_ms - r.refused_ms} ms ago); down: "
                f"nothing from node {rid} for {now_ms - r.own_ms} ms and nothing listens there"), S.DOWN)
        if handover and r.status is not None and not (rid == leader and leader_alive):
            # as for the quorum: a replica keeps its verdict, and why, through a handover's gap
            return ReplicaVerdict(r.status.status, r.status.reason, r.status.cause)
        status, reason = self._candidate(rid, r, leader_alive, view, view_age)
        if status == S.CAUGHT_UP:
            return ReplicaVerdict(status, reason, None)
        cause, evidence = self._cause(rid, r, status, view, now_ms)
        return ReplicaVerdict(status, f"{reason}; {cause}: {evidence}", cause)

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

    def _candidate(self, rid: int, r: ReplicaState, leader_alive: bool, view: ViewNow | None,
                   view_age: int | None) -> tuple[str, str]:
        cfg, s = self.cfg, self.s
        if rid == s.leader and leader_alive:
            return S.CAUGHT_UP, "leader"
        if not leader_alive:
            return S.UNKNOWN, "no live leader to judge against"
        if view is None or view_age > cfg.unreachable_after_ms + s.leader_alive_allowance_ms:
            return S.UNKNOWN, f"the leader's view of its replicas has not arrived for {view_age} ms"
        poll = s.poll
        if view.via == "poll" and poll is not None and poll.interval > 0 \
                and 2 * poll.interval > cfg.unreachable_after_ms:
            return S.UNKNOWN, (f"polled every {poll.interval} ms: too slow to vouch for it within "
                               f"{cfg.unreachable_after_ms} ms (poll every {cfg.unreachable_after_ms // 2} ms or less)")
        now = view.stamp  # the leader's clock
        silent_since = max(r.last_fetch, view.since)
        if now - silent_since > cfg.unreachable_after_ms:
            return S.UNREACHABLE, f"no valid fetch for {now - silent_since} ms"
        if r.last_fetch < 0:
            return S.UNKNOWN, "no valid fetch seen yet"
        lcu = r.last_caught_up
        if lcu >= 0 and now - lcu <= cfg.lagging_after_ms:
            return S.CAUGHT_UP, "caught up"
        behind_since = lcu if lcu >= 0 else r.first_fetch
        if now - behind_since > cfg.stall_after_ms:
            return S.STALLED, f"fetching but not caught up for {now - behind_since} ms"
        return S.LAGGING, f"not caught up for {now - behind_since} ms"

    def _cause(self, rid: int, r: ReplicaState, status: str, view: ViewNow | None, now_ms: int) -> tuple[str, str]:
        """Why a replica is not caught up, from the evidence, with the evidence: `rejected` (the
        leader refuses its fetches), `slow` (fetches seconds apart), `behind` (fetching often,
        never at the leader's end), `partitioned` (alive by its own records, its fetches not
        reaching the leader), `down` (nothing from it at all), `unknown` (the evidence does not
        decide: watched from outside, no live leader, a node that publishes nothing itself)."""
        cfg = self.cfg
        own_age = now_ms - r.own_ms if r.own_ms >= 0 else None
        alive = own_age is not None and own_age <= self.alive_within(r)
        if status == S.UNKNOWN:
            if own_age is not None and not alive:
                return S.DOWN, f"nothing from node {rid} for {own_age} ms"
            return S.UNDECIDED, "no live leader's view to judge its fetches by" if view is None else "no evidence yet"
        now = view.stamp
        rejected = r.rejected
        if rejected is not None and now - rejected.stamp <= cfg.unreachable_after_ms:
            return S.REJECTED, (f"the leader refuses its fetches: {rejected.outcome} ({rejected.count} in a row, "
                                f"the last {now - rejected.stamp} ms ago)")
        # Seconds apart on average, or lately: a slowed node's fetches come in pairs (seconds,
        # then milliseconds apart), whose mean sits about the threshold.
        peak = max(r.gap_ms, r.gap_peak_ms)
        slow = peak > cfg.slow_fetch_gap_ms
        apart = f"valid fetches {r.gap_ms} ms apart on average, {peak} ms at the longest lately"
        if status in (S.LAGGING, S.STALLED):
            return (S.SLOW, apart) if slow else (S.BEHIND, self._trend(r, now))
        if view.via == "poll" and r.own_ms < 0:
            return S.UNDECIDED, ("watched through DescribeQuorum only: a partition, a crash and a refused fetch "
                                 "look alike from outside")
        report = self.s.reports.get(str(rid))
        if alive and report is not None:
            return self._cut_off_or_not(rid, r, view, now_ms, own_age, slow, peak, apart)
        if own_age is None:
            return S.UNDECIDED, f"node {rid} publishes no records of its own: a partition and a crash look alike"
        return S.DOWN, f"nothing from node {rid} for {own_age} ms: its records stopped with its fetches"

    def _cut_off_or_not(self, rid: int, r: ReplicaState, view: ViewNow, now_ms: int, own_age: int, slow: bool,
                        peak: int, apart: str) -> tuple[str, str]:
        """An unreachable node that is alive by its own records: cut off, unless its fetches are
        only slow or its return from a silence is too fresh to tell."""
        s, leader = self.s, self.s.leader
        report = s.reports[str(rid)]
        silent_for = view.stamp - max(r.last_fetch, view.since)
        follows = report.leader == leader and report.epoch == s.epoch
        # Slow only while its fetches still come at their slow pace (a silence within twice
        # its recent longest gap), whatever its campaigns: its own fetch timeout runs out
        # between slow fetches too. A node cut off keeps the gaps it had (no fetch arrives
        # to change them), however long the silence.
        if slow and follows and silent_for <= 2 * peak:
            return S.SLOW, f"{apart}, the last {silent_for} ms ago"
        back_for = now_ms - r.back_ms
        if back_for < self.cfg.unreachable_after_ms:
            # Back from a silence (a frozen process resumed): what it reports is what it
            # knew before, and its first fetch is still on its way. A node cut off keeps
            # publishing, and is told apart a fetch timeout later.
            return S.UNDECIDED, (f"node {rid} is back {back_for} ms after {r.silent_ms} ms without a record, "
                                 f"and has not fetched from leader {leader} yet")
        if report.state in CAMPAIGNING:
            what = f"campaigning in epoch {report.epoch} ({r.campaigns} election attempts)"
        elif report.state == "leader":
            what = f"still acting as leader of epoch {report.epoch}"
        elif report.leader < 0:
            what = f"follows no leader (epoch {report.epoch})"
        elif not follows:
            what = f"follows node {report.leader} in epoch {report.epoch}"
        elif r.campaigns > 0:
            # A prospective node whose pre-vote fails goes back to the leader it knew, then
            # times out again: between attempts it reports following, its fetches still lost.
            what = (f"between election attempts ({r.campaigns} since its last valid fetch) follows "
                    f"leader {leader} again, its fetches not arriving for {silent_for} ms")
        else:
            # Still following: its own fetch timeout has not run out. A one-way partition or
            # a stall: not yet told apart.
            return S.UNDECIDED, (f"node {rid} is alive and follows leader {leader}, but no fetch of it "
                                 f"arrived for {silent_for} ms")
        return S.PARTITIONED, f"node {rid} is alive (its own record {own_age} ms ago) and {what}"

    def _trend(self, r: ReplicaState, now: int) -> str:
        """How far behind, and whether the gap grows or shrinks (and when it would close)."""
        leader_leo = self.s.leader_leo
        lag = max(0, leader_leo - r.leo) if leader_leo >= 0 and r.leo >= 0 else None
        if lag is None:
            return "fetching, not at the leader's end"
        ref = r.lag_ref
        if ref is None or now - ref.now_ms > 2 * SAMPLE_TREND_MS or now < ref.now_ms:
            ref = r.lag_ref = LagSample(now, lag, now, lag)
        elif now - ref.now_ms >= SAMPLE_TREND_MS:
            ref = r.lag_ref = LagSample(ref.now_ms, ref.now_lag, now, lag)
        text = f"{lag} records behind the leader"
        if now - ref.then_ms >= 2000:
            rate = (lag - ref.then_lag) * 1000 / (now - ref.then_ms)
            if rate >= 0.5:
                text += f", the gap growing {rate:.0f} records/s"
            elif rate <= -0.5:
                text += f", the gap closing {-rate:.0f} records/s: caught up in about {lag / -rate:.0f} s at that rate"
            else:
                text += ", the gap steady"
        return text
