"""Evidence about epochs and leaders, folded into a quorum's state (see tracker.py's docstring).

The current epoch comes from a leader claim another voter backs, or from a majority of voters
reporting it; a larger number alone is an election in progress, never the current epoch. The
current leader's view of its replicas lives on its own clock (`LeaderView`), carried over to the
next leader's clock at a failover.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

from .config import HealthConfig
from .state import LeaderView, QuorumState, Report, new_state

MAX_TIMES_KEPT = 64
EPOCHS_KEPT = 8
# what a new incarnation of the cluster keeps of the old one's state: the quorum's identity, its
# clocks and timers, what it showed last, and what the nodes said (every replica row is emitted
# afresh: they are new replicas)
KEPT_BY_INCARNATION = ("cluster_id", "topic", "partition", "seq", "event_seq", "clock", "started_ms",
                       "last_event_ms", "last_input_proc_ms", "last_input_wall_ms", "last_eval_ms", "timer_ms",
                       "status", "voter_set", "reports", "poll")
LEADER_CLOCK_TIMES = ("last_fetch", "last_caught_up", "first_fetch")  # a replica's times on the leader's clock


class ViewNow(NamedTuple):
    """The leader's view as of an evaluation: its clock's now (`stamp`) and the quorum time of it (`q`)."""
    node: int
    epoch: int
    stamp: int
    since: int
    via: str
    q: int


class Leadership:
    """Folds claims, support and reports into the quorum's epoch, leader and leader view."""

    def __init__(self, cfg: HealthConfig, s: QuorumState, event: Callable[..., None]):
        self.cfg, self.s, self.event = cfg, s, event

    def report(self, node: int, epoch: int, state: str, leader: int, t: int, hw: int | None) -> None:
        prev = self.s.reports.get(str(node))
        if hw is None and prev is not None:
            hw = prev.hw
        self.s.reports[str(node)] = Report(epoch, state, leader, t, -1 if hw is None else hw,
                                           prev.hw if prev is not None else -1)

    def hw_advanced_by(self, node: int, hw: int) -> bool:
        report = self.s.reports.get(str(node))
        return report is not None and 0 <= report.previous_hw < hw

    def claim(self, node: int, epoch: int, t: int) -> None:
        claims = self.s.claims.setdefault(str(epoch), {})
        claims[str(node)] = max(claims.get(str(node), -1), t)

    def support(self, leader: int, epoch: int, voter: int, t: int) -> None:
        by_leader = self.s.support.setdefault(str(epoch), {}).setdefault(str(leader), {})
        by_leader[str(voter)] = max(by_leader.get(str(voter), -1), t)

    def confirmed_leader(self, epoch: int) -> int:
        """The node whose claim of `epoch` another voter backs (or the only voter), else -1."""
        voters = self.s.voter_set
        for node in sorted(self.s.claims.get(str(epoch), {}), key=int):
            backers = set(self.s.support.get(str(epoch), {}).get(node, {})) - {node}
            if voters is not None:
                backers &= {str(v) for v in voters}
            if backers or voters == [int(node)]:
                return int(node)
        return -1

    def majority_epoch(self) -> int:
        """The highest epoch a majority of the voters has reached, by their latest reports."""
        voters = self.s.voter_set
        if not voters:
            return -1
        reports = self.s.reports
        epochs = sorted((reports[str(v)].epoch for v in voters if str(v) in reports), reverse=True)
        need = len(voters) // 2 + 1
        return epochs[need - 1] if len(epochs) >= need else -1

    def settle_epoch(self, epoch: int, t: int) -> None:
        """Adopt `epoch` (or the majority's) when the evidence confirms it; notice a new
        incarnation; learn the current epoch's leader once its claim is confirmed."""
        s = self.s
        self._new_incarnation(t)
        majority = self.majority_epoch()
        for candidate in sorted({epoch, majority}, reverse=True):
            if candidate <= s.epoch:
                break
            leader = self.confirmed_leader(candidate)
            if leader >= 0 or candidate <= majority:
                self._adopt(candidate, t)
                break
        if s.leader < 0 and s.epoch >= 0:
            leader = self.confirmed_leader(s.epoch)
            if leader >= 0:
                self._new_leader(leader, t)

    def _adopt(self, epoch: int, t: int) -> None:
        s = self.s
        if s.epoch >= 0:
            s.elections += epoch - s.epoch
            s.epoch_changes = (s.epoch_changes + [t])[-MAX_TIMES_KEPT:]
        if s.leader >= 0:
            s.previous_leader = s.leader
        s.epoch, s.epoch_first_ms, s.leader = epoch, t, -1
        for e in [e for e in s.claims if int(e) < epoch - EPOCHS_KEPT]:
            del s.claims[e]
        for e in [e for e in s.support if int(e) < epoch]:
            del s.support[e]

    def _new_leader(self, leader: int, t: int) -> None:
        """The current epoch's leader is known. Counted as a leader change unless it is the first
        leader this monitor sees (a failover with split votes is one change, whatever the epochs)."""
        s = self.s
        if s.view is not None:
            s.leader_changes += 1
            s.leader_change_times = (s.leader_change_times + [t])[-MAX_TIMES_KEPT:]
        s.leader, s.leader_leo = leader, -1

    def forget_old_changes(self, now_ms: int) -> None:
        """Forget epoch and leader changes older than the storm window (done after the quorum's
        evidence is gathered, which counts only the ones within it)."""
        s, window = self.s, self.cfg.storm_window_ms
        s.epoch_changes = [t for t in s.epoch_changes if now_ms - t <= window]
        s.leader_change_times = [t for t in s.leader_change_times if now_ms - t <= window]

    def _new_incarnation(self, t: int) -> None:
        """Honest nodes never go back in epoch: a majority of voters reporting a lower epoch than
        the current one, after it began, while its leader is no longer heard, is the cluster
        formatted anew under the same id."""
        s = self.s
        voters = s.voter_set
        if not voters or s.epoch < 0 or t - s.leader_alive_ms <= self.cfg.leader_claim_window_ms:
            return  # the current epoch's leader still heard: no new incarnation
        lower = [v for v in voters if str(v) in s.reports
                 and s.reports[str(v)].epoch < s.epoch and s.reports[str(v)].heard_ms >= s.epoch_first_ms]
        if len(lower) <= len(voters) // 2:
            return
        old_epoch, old_hw = s.epoch, s.hw
        fresh = new_state(s.cluster_id, s.topic, s.partition)
        fresh.incarnation = s.incarnation + 1
        for name in KEPT_BY_INCARNATION:
            setattr(fresh, name, getattr(s, name))
        fresh.reports = {n: r for n, r in s.reports.items() if r.epoch < old_epoch}
        for name in s.__slots__:
            setattr(s, name, getattr(fresh, name))
        self.event("incarnation", replica_id=None, now_ms=t, status=None,
                   reason=f"voters {sorted(lower)} went back from epoch {old_epoch} (high watermark "
                          f"{old_hw}): a new incarnation of the cluster")

    # --- the leader's view of its replicas, on its clock ---------------------------------------

    def leader_clock(self, leader: int, epoch: int, stamp: int | None, t: int, via: str) -> int:
        """Advance the current leader's view with one of its stamps; return the stamp to use (an
        outlier stamp, None, stands in as the view's clock moved on by the quorum time elapsed).
        `offset` maps the leader's stamps to quorum time: its source's offset in the clock for
        its own records, the snapshot's (leader now - collector time) for a poll."""
        s = self.s
        view = s.view
        if view is None or view.node != leader or view.epoch != epoch:
            previous = self.view_now(view)
            if stamp is None:
                # the quorum time `t` in the leader's clock, where the view's stamps live: its
                # source's offset as view_q maps them back (a view started on `t` itself stood
                # still for as long as that offset, the frozen old leader `stalled` meanwhile)
                entry = s.clock["sources"].get(f"node-{leader}") if via == "node" else None
                stamp = t + (entry[0] if entry is not None else 0)
            view = s.view = LeaderView(leader, epoch, stamp, stamp, via, stamp - t)
            self._rebase_replicas(previous, self.view_now(view))
            return stamp
        if stamp is None:
            stamp = view.stamp + max(0, t - self.view_q(view))
        view.stamp = max(view.stamp, stamp)
        view.via = via
        if via == "poll":
            view.offset = view.stamp - t
        return stamp

    def view_q(self, view: LeaderView) -> int:
        """Quorum time of the leader view's latest stamp (its clock's now)."""
        offset = view.offset
        if view.via == "node":
            entry = self.s.clock["sources"].get(f"node-{view.node}")
            offset = entry[0] if entry is not None else offset
        return min(view.stamp - offset, self.s.clock["now"])

    def view_now(self, view: LeaderView | None) -> ViewNow | None:
        if view is None:
            return None
        return ViewNow(view.node, view.epoch, view.stamp, view.since, view.via, self.view_q(view))

    def _rebase_replicas(self, old: ViewNow | None, new: ViewNow) -> None:
        """Carry each replica's leader-clock times over to the new leader's clock (through the
        quorum's clock), so a replica stalled before a failover is still stalled after it; the
        KIP-836 offsets start afresh, as the new leader's do. A replica caught up when the old
        view last spoke is caught up as the new one begins: the election between them gave it no
        leader to keep up with, and the new leader counts its caught-up time afresh."""
        for r in self.s.replicas.values():
            r.fetch_leader_leo = -1
            caught_up = old is not None and r.last_caught_up >= 0 \
                and old.stamp - r.last_caught_up <= self.cfg.lagging_after_ms
            for name in LEADER_CLOCK_TIMES:
                stamp = getattr(r, name)
                if stamp < 0 or old is None:
                    setattr(r, name, -1)
                    continue
                q = old.q - (old.stamp - stamp)
                setattr(r, name, new.stamp - (new.q - q))
            if caught_up:
                r.last_caught_up = max(r.last_caught_up, new.stamp)

    def leader_alive(self, t: int, allowance_ms: int) -> None:
        s = self.s
        if t >= s.leader_alive_ms:
            s.leader_alive_ms, s.leader_alive_allowance_ms = t, allowance_ms

    def leader_progress(self, leader_leo: int, hw: int, t: int) -> None:
        s = self.s
        if leader_leo >= 0:
            s.leader_leo = leader_leo
        if hw > s.hw:
            s.hw, s.hw_advanced_ms = hw, t

    def set_voters(self, voters: list[int], t: int, source: str) -> None:
        s = self.s
        if not voters or voters == s.voter_set:
            return
        if s.voter_set is not None:
            s.voter_set_changes += 1
            self.event("voter_set", replica_id=None, now_ms=t, status=None,
                       reason=f"voters {s.voter_set} -> {voters} (from {source})")
        s.voter_set = voters
