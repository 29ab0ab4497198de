"""The Vote API (52) and the elections it carries.

A request is refused when malformed or stale; one from a newer epoch moves the node to that
epoch first (KIP-595's numbered rules, and Kafka's for a pre-vote too); then the node's state
says whether it grants (`can_grant_vote`). A granted vote is persisted before the answer
leaves; a KIP-996 pre-vote records nothing. Answers are counted by the campaign that asked:
a pre-vote round won starts the election, an election won makes the leader, a lost one
backs off.

`VoteRequests` asks (the transitions call it when a campaign starts); `VoteHandler` answers
requests and counts answers, moving the node through `Transitions`.
"""
from __future__ import annotations

from dataclasses import dataclass

import random

from quorum.raft.config import RaftConfig
from quorum.raft.epoch_states import CampaignState
from quorum.raft.identity import NodeIdentity
from quorum.raft.log import ReplicatedLog
from quorum.raft.messages import (Errors, Message, VotePartitionRequest, VotePartitionResponse, VoteRequest,
                                  VoteResponse, VoteTopicRequest, VoteTopicResponse)
from quorum.raft.node_state import NodeState
from quorum.raft.outbox import Outbox
from quorum.raft.step import Step

VOTE_KINDS = ("vote", "pre_vote")


@dataclass(eq=False)
class VoteRequests:
    """A campaign's requests to every other voter."""
    identity: NodeIdentity
    log: ReplicatedLog
    outbox: Outbox

    def send(self, st: CampaignState) -> None:
        me = self.identity
        part = VotePartitionRequest(me.partition, st.epoch, me.node_id, self.log.last_epoch(),
                                    self.log.end_offset(), st.pre_vote)
        for v in me.other_voters():
            body = VoteRequest(me.cluster_id, (VoteTopicRequest(me.topic, (part,)),), voter_id=v)
            self.outbox.ask(v, body, "pre_vote" if st.pre_vote else "vote")


@dataclass(eq=False)
class VoteHandler:
    """Vote requests answered, and Vote answers counted by the campaign that asked."""
    identity: NodeIdentity
    config: RaftConfig
    rng: random.Random
    log: ReplicatedLog
    node: NodeState
    step: Step
    outbox: Outbox
    transitions: object        # transitions.Transitions (it imports this module, so not imported here)

    # --- counting ------------------------------------------------------------------------------

    def handle_response(self, message: Message, resp: VoteResponse) -> None:
        p = self.outbox.take(message, VOTE_KINDS)
        if p is None:
            return
        part = self.identity.our_partition(resp.topics)
        if resp.error_code != Errors.NONE or part is None:
            return
        if self.transitions.learn_from_response(part.leader_id, part.leader_epoch):
            return
        st = p.state   # only a campaign asks for votes
        if st is not self.node.state or not st.counts_votes():
            return
        st.record_vote(message.source, part.vote_granted)
        majority = self.identity.majority()
        if st.won(majority):
            if st.pre_vote:
                self.transitions.become_candidate("pre-vote won")
            else:
                self.transitions.become_leader(st)
        elif st.lost(len(self.identity.voters), majority):
            self._election_lost(st)

    def _election_lost(self, st: CampaignState) -> None:
        if st.pre_vote:
            self.transitions.prospective_done(st, "pre-vote rejected")
        else:
            # lost: back off (a 2-voter candidate gets here on the first rejection)
            st.lose(self.step.now, self._election_backoff(st.retries))

    def _election_backoff(self, retries: int) -> int:
        """Kafka's binary exponential backoff after a lost election: a random multiple of
        retry.backoff.ms below 2^retries of them, capped at election.backoff.max.ms."""
        n = self.rng.randrange(2 << min(max(retries, 1) - 1, 20))
        return min(self.config.retry_backoff_ms * n, self.config.election_backoff_max_ms)

    # --- answering -----------------------------------------------------------------------------

    def handle_request(self, message: Message, req: VoteRequest) -> None:
        part = self.identity.our_partition(req.topics)
        if not self.identity.cluster_ok(req.cluster_id):
            self._answer(message, Errors.INCONSISTENT_CLUSTER_ID, False, top_level=True)
            return
        if part is None:
            self._answer(message, Errors.UNKNOWN_TOPIC_OR_PARTITION, False, top_level=True)
            return
        if not _vote_request_valid(part):
            self._answer(message, Errors.INVALID_REQUEST, False)
        elif part.candidate_epoch < self.node.state.epoch:  # 1. a larger epoch is known
            self._answer(message, Errors.FENCED_LEADER_EPOCH, False)
        else:
            granted = self._grant_pre_vote(part) if part.pre_vote else self._grant_vote(part)
            self._answer(message, Errors.NONE, granted)

    def _log_up_to_date(self, last_epoch: int, end_offset: int) -> bool:
        return (last_epoch, end_offset) >= (self.log.last_epoch(), self.log.end_offset())

    def _grant_vote(self, part: VotePartitionRequest) -> bool:
        """KIP-595's numbered Vote rules; a granted vote is persisted before the answer."""
        st = self.node.state
        epoch, cand = part.candidate_epoch, part.candidate_id
        if not self.identity.is_voter or cand not in self.identity.voters:
            if epoch > st.epoch:                       # 3.1 accept the bump, refuse the vote
                self.transitions.become_unattached(epoch, "vote request with a newer epoch")
            return False
        up_to_date = self._log_up_to_date(part.last_offset_epoch, part.last_offset)
        if epoch > st.epoch:                           # 3. newer epoch: step down, vote if up to date
            self.transitions.become_unattached(epoch, "vote request with a newer epoch",
                                               voted_id=cand if up_to_date else -1)
            return up_to_date
        if not st.can_grant_vote(cand, up_to_date, False, self.step.now):   # 2. one vote per epoch,
            return False                                                   # and the state's rules
        if st.voted_id == -1:
            self.transitions.become_unattached(epoch, "granted a vote", voted_id=cand)
        return True

    def _grant_pre_vote(self, part: VotePartitionRequest) -> bool:
        """KIP-996: no vote is recorded, and the state decides (a follower refuses while its
        leader is alive)."""
        if part.candidate_epoch > self.node.state.epoch:
            # Kafka: a newer epoch is adopted even from a pre-vote. Without this a voter stuck
            # in a higher epoch (its own lost candidacy) could never rejoin a quorum whose
            # leader sits in a lower epoch and keeps refusing its stale log.
            self.transitions.become_unattached(part.candidate_epoch, "pre-vote request with a newer epoch")
        if not self.identity.is_voter or part.candidate_id not in self.identity.voters:
            return False
        up_to_date = self._log_up_to_date(part.last_offset_epoch, part.last_offset)
        return self.node.state.can_grant_vote(part.candidate_id, up_to_date, True, self.step.now)

    def _answer(self, message: Message, error: int, granted: bool, top_level: bool = False) -> None:
        st = self.node.state
        parts = ()
        if not top_level:
            parts = (VoteTopicResponse(self.identity.topic, (VotePartitionResponse(
                self.identity.partition, error, self.node.known_leader, st.epoch, granted),)),)
        self.outbox.answer(message, VoteResponse(error if top_level else Errors.NONE, parts))


def _vote_request_valid(part: VotePartitionRequest) -> bool:
    """Kafka's INVALID_REQUEST cases: negative ids, offsets or epochs, and a last epoch the
    candidate cannot have (a candidate bumped its epoch past its log's; a pre-vote did not)."""
    if part.candidate_id < 0 or part.candidate_epoch < 0 or part.last_offset < 0 or part.last_offset_epoch < 0:
        return False
    if part.pre_vote:
        return part.last_offset_epoch <= part.candidate_epoch
    return part.last_offset_epoch < part.candidate_epoch
