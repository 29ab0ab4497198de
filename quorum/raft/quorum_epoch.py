"""BeginQuorumEpoch (53) and EndQuorumEpoch (54).

A new leader asks every voter for BeginQuorumEpoch until each has endorsed it (a valid fetch
endorses it too); a voter learns the leader from it and follows. A resigned leader sends
EndQuorumEpoch, naming its preferred successors, to every other voter until each has
answered; a follower told so waits a backoff by its rank among the successors, then
campaigns.

`EpochAnnouncements` sends both requests (the transitions and the timers call it);
`QuorumEpochHandler` answers them and reads their answers.
"""
from __future__ import annotations

from dataclasses import dataclass

from typing import Sequence

from quorum.raft.config import RaftConfig
from quorum.raft.epoch_states import FollowerState, ResignedState
from quorum.raft.identity import NodeIdentity
from quorum.raft.leader_state import LeaderState
from quorum.raft.messages import (NO_LEADER, BeginQuorumEpochPartitionRequest, BeginQuorumEpochRequest,
                                  BeginQuorumEpochResponse, BeginQuorumEpochTopicRequest,
                                  EndQuorumEpochPartitionRequest, EndQuorumEpochRequest, EndQuorumEpochResponse,
                                  EndQuorumEpochTopicRequest, EpochPartitionResponse, EpochTopicResponse, Errors,
                                  Message)
from quorum.raft.node_state import NodeState
from quorum.raft.outbox import Outbox
from quorum.raft.step import Step


@dataclass(eq=False)
class EpochAnnouncements:
    """A leader's BeginQuorumEpoch and a resigned leader's EndQuorumEpoch requests."""
    identity: NodeIdentity
    step: Step
    outbox: Outbox

    def send_begin(self, st: LeaderState, voter: int) -> None:
        me = self.identity
        part = BeginQuorumEpochPartitionRequest(me.partition, me.node_id, st.epoch)
        self.outbox.ask(voter, BeginQuorumEpochRequest(me.cluster_id, (BeginQuorumEpochTopicRequest(
            me.topic, (part,)),)), "begin")

    def end_in_flight(self) -> set[int]:
        return self.outbox.destinations("end")

    def send_ends(self, st: ResignedState) -> None:
        """EndQuorumEpoch to every voter that has not answered it yet and has no request in
        flight; an error answer waits retry.backoff.ms, a lost one the request timeout."""
        me = self.identity
        part = EndQuorumEpochPartitionRequest(me.partition, me.node_id, st.epoch, st.successors)
        for v in st.end_quorum_epoch_due(self.step.now, self.end_in_flight()):
            self.outbox.ask(v, EndQuorumEpochRequest(me.cluster_id, (EndQuorumEpochTopicRequest(
                me.topic, (part,)),)), "end")


@dataclass(eq=False)
class QuorumEpochHandler:
    """BeginQuorumEpoch and EndQuorumEpoch requests answered, and their answers read."""
    identity: NodeIdentity
    config: RaftConfig
    node: NodeState
    step: Step
    outbox: Outbox
    transitions: object        # transitions.Transitions (it imports this module, so not imported here)
    timers: object             # timers.StateTimers, likewise: the first successor campaigns at once

    # --- BeginQuorumEpoch ----------------------------------------------------------------------

    def handle_begin_request(self, message: Message, req: BeginQuorumEpochRequest) -> None:
        part = self._partition_or_refuse(message, req, BeginQuorumEpochResponse)
        if part is None:
            return
        st = self.node.state
        error = Errors.NONE
        if part.leader_epoch < st.epoch:
            error = Errors.FENCED_LEADER_EPOCH
        elif part.leader_id == self.identity.node_id or part.leader_id not in self.identity.voters:
            error = Errors.INVALID_REQUEST
        elif part.leader_epoch == st.epoch and st.leader_id not in (NO_LEADER, part.leader_id):
            error = Errors.INVALID_REQUEST   # another leader is already known for this epoch
        elif not (st.follows(part.leader_id) and st.epoch == part.leader_epoch):
            self.transitions.become_follower(part.leader_epoch, part.leader_id, "BeginQuorumEpoch")
        self._answer(message, BeginQuorumEpochResponse, Errors.NONE, error)

    def handle_begin_response(self, message: Message, resp: BeginQuorumEpochResponse) -> None:
        p = self.outbox.take(message, ("begin",))
        part = self.identity.our_partition(resp.topics) if p is not None else None
        if part is None or resp.error_code != Errors.NONE:
            return
        if self.transitions.learn_from_response(part.leader_id, part.leader_epoch):
            return
        leader = p.state   # only a leader asks for endorsements
        if leader is self.node.state and part.error_code == Errors.NONE:
            leader.endorsed.add(message.source)

    # --- EndQuorumEpoch ------------------------------------------------------------------------

    def handle_end_request(self, message: Message, req: EndQuorumEpochRequest) -> None:
        part = self._partition_or_refuse(message, req, EndQuorumEpochResponse)
        if part is None:
            return
        st = self.node.state
        now = self.step.now
        if part.leader_epoch < st.epoch:
            self._answer(message, EndQuorumEpochResponse, Errors.NONE, Errors.FENCED_LEADER_EPOCH)
            return
        if part.leader_id < 0 or part.leader_id == self.identity.node_id:
            self._answer(message, EndQuorumEpochResponse, Errors.NONE, Errors.INVALID_REQUEST)
            return
        leader = part.leader_id
        if part.leader_epoch > st.epoch or st.leader_id == NO_LEADER:
            # A newer epoch, or this one without a known leader. As Kafka does, learn the
            # (resigning) leader of that epoch: the answer names it and the successor backoff
            # below applies as to any of its followers.
            self.transitions.become_follower(part.leader_epoch, leader, "EndQuorumEpoch", fetch=False)
            st = self.node.state
        if self.identity.is_voter and st.follows(leader):
            st.leader_resigning(now, self._successor_backoff(part.preferred_successors))
        self._answer(message, EndQuorumEpochResponse, Errors.NONE, Errors.NONE)
        if isinstance(st, FollowerState) and st.successor_due(now):
            self.timers.tick_follower(st)   # the first successor campaigns at once

    def _successor_backoff(self, successors: Sequence[int]) -> int:
        """Kafka's strict exponential backoff: position p of n preferred successors waits
        min(B, (B >> (n-1)) << (p-1)); the first starts at once, a voter not named waits B."""
        b = self.config.election_backoff_max_ms
        me = self.identity.node_id
        if me not in successors:
            return 0 if not successors else b
        p, n = successors.index(me), len(successors)
        return 0 if p == 0 else min(b, (b >> (n - 1)) << (p - 1))

    def handle_end_response(self, message: Message, resp: EndQuorumEpochResponse) -> None:
        p = self.outbox.take(message, ("end",))
        if p is None:
            return
        part = self.identity.our_partition(resp.topics)
        if part is not None and resp.error_code == Errors.NONE:
            if self.transitions.learn_from_response(part.leader_id, part.leader_epoch):
                return
        resigned = p.state   # only a resigned leader asks
        if resigned is self.node.state:
            ok = part is not None and resp.error_code == Errors.NONE and part.error_code == Errors.NONE
            resigned.end_quorum_epoch_answered(message.source, ok, self.step.now, self.config.retry_backoff_ms)

    # --- both ----------------------------------------------------------------------------------

    def _partition_or_refuse(self, message: Message, req, response_cls):
        """Our partition of a Begin/EndQuorumEpoch request, or None after refusing it."""
        part = self.identity.our_partition(req.topics)
        if not self.identity.cluster_ok(req.cluster_id):
            self._answer(message, response_cls, Errors.INCONSISTENT_CLUSTER_ID)
        elif part is None:
            self._answer(message, response_cls, Errors.UNKNOWN_TOPIC_OR_PARTITION)
        else:
            return part
        return None

    def _answer(self, message: Message, cls, top_error: int, part_error: int | None = None) -> None:
        st = self.node.state
        topics = ()
        if part_error is not None:
            topics = (EpochTopicResponse(self.identity.topic, (EpochPartitionResponse(
                self.identity.partition, part_error, self.node.known_leader, st.epoch),)),)
        self.outbox.answer(message, cls(top_error, topics))
