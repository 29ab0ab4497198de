"""A node's moves from one epoch state to the next, with what each move must do at once:
persist the election state before anything leaves, tell held fetches when leadership ends,
forget requests the new state no longer awaits, report the transition, and send what the
new state starts with (a campaign's votes, a leader's BeginQuorumEpoch and LeaderChange
record, a follower's fetch, a resigned leader's EndQuorumEpoch).

Transitions (a voter; observers only ever follow or look for the leader):
    unattached --election timeout--> prospective --majority pre-votes--> candidate
    prospective --majority rejects | election timeout--> follower (leader still known) | unattached
    candidate --majority votes--> leader;  --rejected--> backoff --> prospective;
              --election timeout--> prospective
    leader --check quorum lost | resign()--> resigned (sends EndQuorumEpoch until answered)
    resigned --election timeout--> unattached in the next epoch
    follower --fetch timeout--> prospective;  --EndQuorumEpoch--> successor backoff --> candidate
    any --higher epoch seen (a pre-vote's too)--> unattached (or follower when the leader is named)
    restart with a stored leadership of its own --> resigned in that epoch
"""
from __future__ import annotations

from dataclasses import dataclass

import random

from quorum.raft import kafka_records
from quorum.raft.config import RaftConfig
from quorum.raft.epoch_states import (CandidateState, EpochState, FollowerState, ProspectiveState,
                                      ResignedState, UnattachedState)
from quorum.raft.fetch_answers import FetchAnswers
from quorum.raft.fetch_follower import FollowerFetches
from quorum.raft.identity import NodeIdentity
from quorum.raft.leader_appends import LeaderAppends
from quorum.raft.leader_state import LeaderState
from quorum.raft.log import LEADER_CHANGE, ReplicatedLog
from quorum.raft.messages import NO_LEADER
from quorum.raft.metrics import MetricsTracker
from quorum.raft.node_state import NodeState
from quorum.raft.observations import StateTransition
from quorum.raft.outbox import Outbox
from quorum.raft.quorum_epoch import EpochAnnouncements
from quorum.raft.quorum_state_store import ElectionState, QuorumStateStore
from quorum.raft.step import Step
from quorum.raft.vote import VoteRequests


def election_deadline(config: RaftConfig, rng: random.Random, now: int) -> int:
    t = config.election_timeout_ms
    return now + t + rng.randint(0, t)


def initial_state(identity: NodeIdentity, config: RaftConfig, rng: random.Random,
                  stored: ElectionState | None, now: int) -> EpochState:
    """The state a node starts in from what its store kept."""
    def deadline() -> int | None:
        return election_deadline(config, rng, now) if identity.is_voter else None
    if stored is None:
        return UnattachedState(0, -1, deadline())
    if stored.leader_id == identity.node_id:
        # It cannot know who is most caught up: it names the other voters in id order
        # (Kafka names none, which starts every voter's election at once).
        return ResignedState(stored.epoch, identity.node_id, election_deadline(config, rng, now),
                             tuple(identity.other_voters()))
    if stored.leader_id != NO_LEADER:
        return FollowerState(stored.epoch, stored.leader_id, stored.voted_id, now, config.fetch_timeout_ms)
    return UnattachedState(stored.epoch, stored.voted_id, deadline())


@dataclass(eq=False)
class Transitions:
    identity: NodeIdentity
    config: RaftConfig
    rng: random.Random
    log: ReplicatedLog
    store: QuorumStateStore
    node: NodeState
    step: Step
    outbox: Outbox
    metrics: MetricsTracker
    votes: VoteRequests                  # what each new state starts with goes through these
    fetches: FollowerFetches
    announcements: EpochAnnouncements
    appends: LeaderAppends
    answers: FetchAnswers                # a leader stepping down answers its held fetches

    def __post_init__(self) -> None:
        self.persisted = self.store.read()   # the store is written only when this changes
        self.election_started_ms: int | None = None   # election latency: since the campaign began

    def _deadline(self) -> int:
        return election_deadline(self.config, self.rng, self.step.now)

    def _transition(self, new: EpochState, reason: str, persist: bool = True) -> None:
        node, is_voter = self.node, self.identity.is_voter
        old = node.state
        old_name = old.current_state(is_voter)
        if persist:
            es = new.election_state(self.identity.voters)
            if es != self.persisted:
                self.store.write(es)
                self.persisted = es
                self.step.out.quorum_state = es
        node.state = new
        if isinstance(old, LeaderState):
            self.answers.refuse_held(old)
        if not new.keeps_requests_of(old):
            self.outbox.forget_all()   # answers to what the old state asked are stale
        new_name = new.current_state(is_voter)
        if (old_name, old.epoch, old.leader_id) != (new_name, new.epoch, new.leader_id):
            now = self.step.now
            if new.ends_election and self.election_started_ms is not None:
                self.metrics.election_latency.record(now - self.election_started_ms, now)
                self.election_started_ms = None
            self.step.out.observations.append(StateTransition(now, old_name, new_name, new.epoch,
                                                              new.leader_id, reason))

    def start_pre_vote(self, reason: str) -> None:
        st = self.node.state
        if not self.config.pre_vote:
            self.become_candidate(reason)
            return
        if self.election_started_ms is None:
            self.election_started_ms = self.step.now
        # a follower keeps its leader (unattached and candidate know none); a candidate its retries
        new = ProspectiveState(st.epoch, st.leader_id, st.voted_id, self._deadline(), self.identity.node_id,
                               st.retries)
        self._transition(new, reason, persist=False)
        if new.won(self.identity.majority()):
            self.become_candidate("pre-vote won")
            return
        self.votes.send(new)

    def become_candidate(self, reason: str) -> None:
        old = self.node.state
        if self.election_started_ms is None:
            self.election_started_ms = self.step.now
        new = CandidateState(old.epoch + 1, self.identity.node_id, self._deadline(), old.retries + 1)
        self._transition(new, reason)  # the vote for itself is persisted before any request
        if new.won(self.identity.majority()):
            self.become_leader(new)
            return
        self.votes.send(new)

    def become_leader(self, won: CandidateState) -> None:
        me, config = self.identity, self.config
        granted = tuple(sorted(won.granted))
        new = LeaderState(won.epoch, me.node_id, me.voters, self.log.end_offset(), granted, self.step.now,
                          config.check_quorum_timeout_ms, config.begin_quorum_epoch_resend_ms,
                          config.max_idle_interval_ms)
        self._transition(new, "won the election")
        change = kafka_records.leader_change(me.node_id, me.voters, granted)
        self.appends.append(new, [(change, LEADER_CHANGE)])
        for v in me.other_voters():
            self.announcements.send_begin(new, v)

    def prospective_done(self, st: ProspectiveState, reason: str) -> None:
        """A pre-vote round ended without a majority: follow the leader still known, or wait."""
        if st.leader_id != NO_LEADER and st.leader_id != self.identity.node_id:
            self.become_follower(st.epoch, st.leader_id, reason + ": back to the known leader")
        else:
            self._transition(UnattachedState(st.epoch, st.voted_id, self._deadline()), reason, persist=False)

    def become_follower(self, epoch: int, leader_id: int, reason: str, fetch: bool = True) -> None:
        old = self.node.state
        voted = old.voted_id if old.epoch == epoch else -1
        new = FollowerState(epoch, leader_id, voted, self.step.now, self.config.fetch_timeout_ms)
        self._transition(new, reason)
        if fetch:
            self.fetches.send(new)

    def become_unattached(self, epoch: int, reason: str, voted_id: int = -1) -> None:
        deadline = self._deadline() if self.identity.is_voter else None
        self._transition(UnattachedState(epoch, voted_id, deadline), reason)

    def resign(self, st: LeaderState, reason: str) -> None:
        new = ResignedState(st.epoch, self.identity.node_id, self._deadline(), st.preferred_successors())
        self._transition(new, reason)
        self.announcements.send_ends(new)

    def learn_from_response(self, leader_id: int, leader_epoch: int) -> bool:
        """Every response names the responder's leader and epoch: learn from it. True if the
        state changed (the caller then stops handling the response)."""
        st = self.node.state
        me = self.identity.node_id
        if leader_epoch > st.epoch:
            if leader_id != NO_LEADER and leader_id != me:
                self.become_follower(leader_epoch, leader_id, "response named a newer leader")
            else:
                self.become_unattached(leader_epoch, "response carried a newer epoch")
            return True
        if (leader_epoch == st.epoch and leader_id != NO_LEADER and leader_id != me
                and st.leader_id == NO_LEADER):   # unattached, or campaigning without a leader
            self.become_follower(leader_epoch, leader_id, "response named the leader")
            return True
        return False
