"""The quorum's verdict: a table of rules over typed evidence, checked in order, the first that
applies wins (statuses.py lists the statuses in that order).

The evidence is gathered once per evaluation (`leader_evidence` before the replicas are judged,
`quorum_evidence` after), without changing state. A rule (rules.py) names itself, the status it
gives, when it applies, and the reason it tells; `HOLD` keeps the status held before (a handover
or an election under way is not leaderless until the fetch timeout).
"""
from __future__ import annotations

from dataclasses import dataclass

from quorum.kafka_client import kafka_failures

from . import statuses as S
from .config import HealthConfig
from .leadership import Leadership, ViewNow
from .replica_verdicts import CAMPAIGNING, ReplicaJudge, ReplicaVerdict
from .rules import Rule, first_match
from .state import PollState, QuorumState, Verdict

HOLD = "hold"
REACHABLE = (S.CAUGHT_UP, S.LAGGING, S.STALLED)


@dataclass(frozen=True, slots=True)
class LeaderEvidence:
    """What the evaluation knows of the current epoch's leader, before judging the replicas."""
    claimants: list[int]   # nodes claiming the current epoch lately
    alive: bool
    gone_for: int          # how long no leader was heard (quorum time)
    zombies: list[int]     # leaders of earlier epochs still claiming since this one began
    candidate_epoch: int   # the highest epoch campaigned for or claimed, -1 if none
    view: ViewNow | None   # the live leader's view of its replicas
    view_age: int | None
    handover: bool         # the old leader gone, or the new one's view not arrived, for less than the fetch timeout


@dataclass(frozen=True, slots=True)
class QuorumEvidence:
    now_ms: int
    epoch: int
    leader: int
    lead: LeaderEvidence
    voters: int             # the voter set's size
    caught_up: int
    reachable: int          # voters caught up, lagging, stalled, or unknown but following the live leader
    majority: bool
    behind: list[int]       # voters lagging, stalled or unreachable
    unknown: list[int]      # voters without a verdict, not known to follow the live leader either
    leader_side: list[int]  # the live leader and the voters reaching it
    cut_off: list[int]      # voters alive but cut off from the leader
    partition: str          # what a network partition looks like, "" if none
    hw: int
    hw_age: int | None
    hw_allowance_ms: int    # how long the leader's view may stay the latest (the collector's poll gap)
    leader_changes: int     # within the storm window
    poll: PollState | None
    polls_failing: bool
    unobserved: bool        # the collector reaches no node, and no node's own record arrives
    heard_ms: int           # the last the job heard of the quorum at all

    @property
    def fault_tolerance(self) -> int | None:
        """How many more voters the quorum can lose and keep a majority; None when that is not known."""
        if self.unobserved or self.unknown or not self.voters:
            return None
        return self.reachable - (self.voters // 2 + 1)


def _unobserved(e: QuorumEvidence, cfg: HealthConfig) -> str:
    refused = e.poll.error in kafka_failures.COLLECTOR_SIDE
    return (f"the collector {'is refused' if refused else 'reaches no node'}: DescribeQuorum failing "
            f"({kafka_failures.explain(e.poll.error) if refused else e.poll.error}, {e.poll.failures} polls "
            f"in a row), and no node's own record for {e.now_ms - e.heard_ms} ms")


def _leaderless(e: QuorumEvidence, cfg: HealthConfig) -> str:
    detail = f"; election in progress (epoch {e.lead.candidate_epoch})" if e.lead.candidate_epoch > e.epoch else ""
    if e.poll is not None and e.poll.failures:
        detail += f"; DescribeQuorum failing ({e.poll.error}, {e.poll.failures} polls in a row)"
    return f"no leader heard for epoch {e.epoch} for {e.lead.gone_for} ms{detail}"


def _healthy(e: QuorumEvidence, cfg: HealthConfig) -> str:
    if e.polls_failing:
        return f"judged by the nodes' own views: DescribeQuorum failing ({e.poll.error}, {e.poll.failures} polls in a row)"
    if e.lead.view_age is None or e.lead.view_age > cfg.unreachable_after_ms:
        return f"leader {e.leader} heard through its followers (its own records do not arrive)"
    return "all voters caught up"


RULES = (
    Rule("split brain", S.SPLIT_BRAIN, lambda e, cfg: len(e.lead.claimants) >= 2,
         lambda e, cfg: f"nodes {e.lead.claimants} claim epoch {e.epoch}"),
    Rule("unobserved", S.UNOBSERVED, lambda e, cfg: e.unobserved, _unobserved),
    Rule("leaderless", S.LEADERLESS,
         lambda e, cfg: not e.lead.alive and e.lead.gone_for > cfg.unreachable_after_ms, _leaderless),
    Rule("handover", HOLD, lambda e, cfg: not e.lead.alive, lambda e, cfg: ""),
    Rule("no majority", S.NO_MAJORITY, lambda e, cfg: not e.majority,
         lambda e, cfg: e.partition or f"{e.reachable} of {e.voters} voters reachable"),
    Rule("high watermark stalled", S.STALLED_QUORUM,
         lambda e, cfg: e.hw_age is None or e.hw_age > cfg.hw_stall_after_ms + e.hw_allowance_ms,
         lambda e, cfg: f"high watermark {e.hw} not advanced for {e.hw_age} ms"),
    Rule("voters behind", S.DEGRADED, lambda e, cfg: bool(e.behind),
         lambda e, cfg: e.partition or f"voters {e.behind} not caught up"),
    Rule("zombie leaders", S.DEGRADED, lambda e, cfg: bool(e.lead.zombies),
         lambda e, cfg: f"zombie leaders {e.lead.zombies}"),
    Rule("election storm", S.DEGRADED, lambda e, cfg: e.leader_changes >= cfg.storm_leader_changes,
         lambda e, cfg: f"{e.leader_changes} leader changes within {cfg.storm_window_ms} ms"),
    Rule("healthy", S.HEALTHY, lambda e, cfg: True, _healthy),
)


def quorum_verdict(e: QuorumEvidence, cfg: HealthConfig, held: Verdict | None) -> tuple[str, str] | None:
    """The first rule that applies: its status and reason (the held ones for `HOLD`, None if
    nothing is held yet)."""
    rule = first_match(RULES, e, cfg)
    if rule.gives == HOLD:
        return None if held is None else (held.status, held.reason)
    return rule.gives, rule.tells(e, cfg)


def partition_text(leader: int, leader_alive: bool, leader_side: list[int], cut_off: list[int],
                   voter_ids: list[int], voters: int, previous: int) -> str:
    """A network partition, told: voters alive but not reaching the leader (who still fetches from
    it is the leader's side); or the leader cut off from every other voter. "" if none."""
    if not cut_off:
        return ""
    side = "holds" if len(leader_side) > voters // 2 else "has no"
    if leader_alive and leader_side == [leader] and voters > 1:
        return f"network partition: leader {leader} cut off from every voter ({cut_off} alive); its side has no majority"
    if cut_off == [previous] and previous != leader and set(voter_ids) - {previous} <= set(leader_side):
        # The usual end of a leader cut off from everyone: the others elected a new one before
        # the job saw the old leader alone (check quorum resigns it soon after).
        return (f"network partition: previous leader {previous} cut off from every voter; "
                f"leader {leader}'s side {leader_side} {side} majority")
    return f"network partition: voters {cut_off} cut off from leader {leader}; its side {leader_side} {side} majority"


# --- the evidence ------------------------------------------------------------------------------

def leader_evidence(cfg: HealthConfig, s: QuorumState, lead: Leadership, judge: ReplicaJudge,
                    now_ms: int) -> LeaderEvidence:
    """What is known of the current epoch's leader at `now_ms`, before the replicas are judged."""
    epoch, leader = s.epoch, s.leader
    claims = {int(n): ms for n, ms in s.claims.get(str(epoch), {}).items()
              if now_ms - ms <= cfg.leader_claim_window_ms}
    leader_row = s.replicas.get(str(leader))
    alive = leader >= 0 and now_ms - s.leader_alive_ms <= cfg.unreachable_after_ms + s.leader_alive_allowance_ms \
        and not (leader_row is not None and judge.gone(leader_row, now_ms))
    gone_for = now_ms - max(s.leader_alive_ms, s.started_ms)
    zombies = {int(n) for e, by_node in s.claims.items() if int(e) < epoch
               for n, ms in by_node.items()
               if ms > s.epoch_first_ms and now_ms - ms <= cfg.leader_claim_window_ms} - set(claims)
    candidate_epoch = max([r.epoch for r in s.reports.values() if r.state in CAMPAIGNING and r.epoch >= epoch]
                          + [int(e) for e in s.claims if int(e) > epoch] + [-1])
    view = lead.view_now(s.view) if s.view is not None and s.view.node == leader else None
    # A handover under way: the old leader gone, or the new one's view of its replicas not yet
    # arrived, for less than the fetch timeout. Followers fetch from a new leader within
    # milliseconds; an evaluation that falls in between judges nothing new about them.
    handover = (gone_for <= cfg.unreachable_after_ms if not alive
                else view is None and now_ms - s.epoch_first_ms <= cfg.unreachable_after_ms)
    return LeaderEvidence(sorted(claims), alive, gone_for, sorted(zombies), candidate_epoch, view,
                          now_ms - view.q if view is not None else None, handover)


def quorum_evidence(cfg: HealthConfig, s: QuorumState, judge: ReplicaJudge, now_ms: int, lead: LeaderEvidence,
                    verdicts: dict[int, ReplicaVerdict]) -> QuorumEvidence:
    """What the replicas' verdicts say of the voters, with the rest the rules judge by (leader
    changes counted within the storm window; the tracker forgets older ones after)."""
    status = {rid: v.status for rid, v in verdicts.items()}
    voter_ids = [int(rid) for rid, r in s.replicas.items() if r.role == "voter"]
    voters = len(s.voter_set) if s.voter_set is not None else len(voter_ids)
    following = {v for v in voter_ids if status.get(v) == S.UNKNOWN and lead.alive and judge.follows(v, now_ms)}
    reachable = sum(1 for v in voter_ids if status.get(v) in REACHABLE or v in following)
    leader_side = sorted({s.leader} | {v for v in voter_ids if status.get(v) in REACHABLE}) if lead.alive else []
    cut_off = sorted(v for v in voter_ids if verdicts.get(v) is not None and verdicts[v].cause == S.PARTITIONED)
    hw_since = s.hw_advanced_ms if s.hw_advanced_ms >= 0 else s.started_ms
    poll = s.poll
    polls_failing = poll is not None and poll.failures > 0
    heard = max(poll.ok_ms if poll is not None else -1, s.nodes_heard_ms, s.started_ms)
    return QuorumEvidence(
        now_ms=now_ms, epoch=s.epoch, leader=s.leader, lead=lead, voters=voters,
        caught_up=sum(1 for v in voter_ids if status.get(v) == S.CAUGHT_UP), reachable=reachable,
        majority=voters > 0 and reachable > voters // 2,
        behind=sorted(v for v in voter_ids if status.get(v) in (S.LAGGING, S.STALLED, S.UNREACHABLE)),
        unknown=[v for v in voter_ids if status.get(v) == S.UNKNOWN and v not in following],
        leader_side=leader_side, cut_off=cut_off,
        partition=partition_text(s.leader, lead.alive, leader_side, cut_off, voter_ids, voters, s.previous_leader),
        hw=s.hw, hw_age=now_ms - hw_since if hw_since >= 0 else None, hw_allowance_ms=s.leader_alive_allowance_ms,
        leader_changes=sum(1 for t in s.leader_change_times if now_ms - t <= cfg.storm_window_ms),
        poll=poll, polls_failing=polls_failing,
        # the collector reaches no node, and no node's own record arrives: nothing to judge by (a
        # poll error that is evidence, an error answer or refused connections, is judged by the rules)
        unobserved=polls_failing and poll.blind and now_ms - heard > cfg.unreachable_after_ms,
        heard_ms=heard)
