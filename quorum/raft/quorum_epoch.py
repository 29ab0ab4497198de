"""BeginQuorumEpoch (53) and EndQuorumEpoch (54), as part of `RaftNode` (node.py).

A new leader asks every voter for BeginQuorumEpoch until each has endorsed it (a valid fetch
endorses it too); a voter learns the leader from it and follows. A resigned leader sends
EndQuorumEpoch, naming its preferred successors, to every other voter until each has
answered; a follower told so waits a backoff by its rank among the successors, then
campaigns.
"""
from __future__ import annotations

from typing import Sequence

from quorum.raft.epoch_states import FollowerState, ResignedState
from quorum.raft.leader_state import LeaderState
from quorum.raft.messages import (NO_LEADER, BeginQuorumEpochPartitionRequest, BeginQuorumEpochRequest,
                                  BeginQuorumEpochResponse, BeginQuorumEpochTopicRequest,
                                  EndQuorumEpochPartitionRequest, EndQuorumEpochRequest, EndQuorumEpochResponse,
                                  EndQuorumEpochTopicRequest, EpochPartitionResponse, EpochTopicResponse, Errors,
                                  Message)


class QuorumEpochProtocol:
    """RaftNode's side of BeginQuorumEpoch and EndQuorumEpoch, mixed into it: `self` is the node."""

    # --- BeginQuorumEpoch ----------------------------------------------------------------------

    def _send_begin_quorum_epoch(self, st: LeaderState, voter: int) -> None:
        part = BeginQuorumEpochPartitionRequest(self.partition, self.node_id, st.epoch)
        self._send(voter, BeginQuorumEpochRequest(self.cluster_id, (BeginQuorumEpochTopicRequest(
            self.topic, (part,)),)), kind="begin")

    def _handle_begin_request(self, message: Message, req: BeginQuorumEpochRequest) -> None:
        part = self._partition_or_refuse(message, req, BeginQuorumEpochResponse)
        if part is None:
            return
        st = self.state
        error = Errors.NONE
        if part.leader_epoch < st.epoch:
            error = Errors.FENCED_LEADER_EPOCH
        elif part.leader_id == self.node_id or part.leader_id not in self.voters:
            error = Errors.INVALID_REQUEST
        elif part.leader_epoch == st.epoch and st.leader_id not in (NO_LEADER, part.leader_id):
            error = Errors.INVALID_REQUEST   # another leader is already known for this epoch
        elif not (st.follows(part.leader_id) and st.epoch == part.leader_epoch):
            self._become_follower(part.leader_epoch, part.leader_id, "BeginQuorumEpoch")
        self._answer_epoch(message, BeginQuorumEpochResponse, Errors.NONE, error)

    def _handle_begin_response(self, message: Message, resp: BeginQuorumEpochResponse) -> None:
        p = self._take_pending(message, "begin")
        part = self._our_partition(resp.topics) if p is not None else None
        if part is None or resp.error_code != Errors.NONE:
            return
        if self._maybe_handle_common_response(part.error_code, part.leader_id, part.leader_epoch):
            return
        leader = p.state   # only a leader asks for endorsements
        if leader is self.state and part.error_code == Errors.NONE:
            leader.endorsed.add(message.source)

    # --- EndQuorumEpoch ------------------------------------------------------------------------

    def _end_in_flight(self) -> set[int]:
        return {p.destination for p in self._pending.values() if p.kind == "end"}

    def _send_end_quorum_epochs(self, st: ResignedState) -> None:
        """EndQuorumEpoch to every voter that has not answered it yet and has no request in
        flight; an error answer waits retry.backoff.ms, a lost one the request timeout."""
        part = EndQuorumEpochPartitionRequest(self.partition, self.node_id, st.epoch, st.successors)
        for v in st.end_quorum_epoch_due(self._now, self._end_in_flight()):
            self._send(v, EndQuorumEpochRequest(self.cluster_id, (EndQuorumEpochTopicRequest(
                self.topic, (part,)),)), kind="end")

    def _handle_end_request(self, message: Message, req: EndQuorumEpochRequest) -> None:
        part = self._partition_or_refuse(message, req, EndQuorumEpochResponse)
        if part is None:
            return
        st = self.state
        if part.leader_epoch < st.epoch:
            self._answer_epoch(message, EndQuorumEpochResponse, Errors.NONE, Errors.FENCED_LEADER_EPOCH)
            return
        if part.leader_id < 0 or part.leader_id == self.node_id:
            self._answer_epoch(message, EndQuorumEpochResponse, Errors.NONE, Errors.INVALID_REQUEST)
            return
        leader = part.leader_id
        if part.leader_epoch > st.epoch or st.leader_id == NO_LEADER:
            # A newer epoch, or this one without a known leader. As Kafka does, learn the
            # (resigning) leader of that epoch: the answer names it and the successor backoff
            # below applies as to any of its followers.
            self._become_follower(part.leader_epoch, leader, "EndQuorumEpoch", fetch=False)
            st = self.state
        if self.is_voter and st.follows(leader):
            st.leader_resigning(self._now, self._successor_backoff(part.preferred_successors))
        self._answer_epoch(message, EndQuorumEpochResponse, Errors.NONE, Errors.NONE)
        if isinstance(st, FollowerState) and st.successor_due(self._now):
            self._tick_follower(st)   # the first successor campaigns at once

    def _successor_backoff(self, successors: Sequence[int]) -> int:
        """Kafka's strict exponential backoff: position p of n preferred successors waits
        min(B, (B >> (n-1)) << (p-1)); the first starts at once, a voter not named waits B."""
        b = self.config.election_backoff_max_ms
        if self.node_id not in successors:
            return 0 if not successors else b
        p, n = successors.index(self.node_id), len(successors)
        return 0 if p == 0 else min(b, (b >> (n - 1)) << (p - 1))

    def _handle_end_response(self, message: Message, resp: EndQuorumEpochResponse) -> None:
        p = self._take_pending(message, "end")
        if p is None:
            return
        part = self._our_partition(resp.topics)
        if part is not None and resp.error_code == Errors.NONE:
            if self._maybe_handle_common_response(part.error_code, part.leader_id, part.leader_epoch):
                return
        resigned = p.state   # only a resigned leader asks
        if resigned is self.state:
            ok = part is not None and resp.error_code == Errors.NONE and part.error_code == Errors.NONE
            resigned.end_quorum_epoch_answered(message.source, ok, self._now, self.config.retry_backoff_ms)

    # --- both ----------------------------------------------------------------------------------

    def _partition_or_refuse(self, message: Message, req, response_cls):
        """Our partition of a Begin/EndQuorumEpoch request, or None after refusing it."""
        part = self._our_partition(req.topics)
        if not self._cluster_ok(req.cluster_id):
            self._answer_epoch(message, response_cls, Errors.INCONSISTENT_CLUSTER_ID)
        elif part is None:
            self._answer_epoch(message, response_cls, Errors.UNKNOWN_TOPIC_OR_PARTITION)
        else:
            return part
        return None

    def _answer_epoch(self, message: Message, cls, top_error: int, part_error: int | None = None) -> None:
        st = self.state
        topics = ()
        if part_error is not None:
            topics = (EpochTopicResponse(self.topic, (EpochPartitionResponse(
                self.partition, part_error, self._known_leader(), st.epoch),)),)
        self._send(message.source, cls(top_error, topics), correlation_id=message.correlation_id)
