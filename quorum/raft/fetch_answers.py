"""A node's answers to Fetch requests, and the fetches a leader holds (KIP-595's long poll):
how an answer is built and reported, and when a held fetch is answered. The leader's fetch
handling (fetch_leader.py), its appends (leader_appends.py) and its stepping down
(transitions.py) all answer fetches through here."""
from __future__ import annotations

from dataclasses import dataclass

from quorum.raft.config import RaftConfig
from quorum.raft.identity import NodeIdentity
from quorum.raft.leader_state import LeaderState
from quorum.raft.log import ReplicatedLog
from quorum.raft.messages import (EpochEndOffset, Errors, FetchableTopicResponse, FetchPartition,
                                  FetchPartitionData, FetchRequest, FetchResponse, LeaderIdAndEpoch, Message)
from quorum.raft.node_state import NodeState
from quorum.raft.observations import FetchObservation
from quorum.raft.outbox import Outbox
from quorum.raft.step import Step


@dataclass(eq=False)
class FetchAnswers:
    identity: NodeIdentity
    config: RaftConfig
    log: ReplicatedLog
    node: NodeState
    step: Step
    outbox: Outbox

    def respond(self, message: Message, error: int, hw: int = -1, diverging: EpochEndOffset | None = None,
                records: tuple = (), top_error: int = Errors.NONE) -> None:
        me = self.identity
        parts = ()
        if top_error == Errors.NONE:
            parts = (FetchableTopicResponse(me.topic, (FetchPartitionData(
                me.partition, error, hw, LeaderIdAndEpoch(self.node.known_leader, self.node.state.epoch),
                diverging, records),)),)
        self.outbox.answer(message, FetchResponse(top_error, parts))

    def observe(self, req: FetchRequest, part: FetchPartition, error: int, leader_leo: int,
                diverging: bool = False) -> None:
        """Report a replica's fetch as answered (a consumer's, replica id -1, is no replica's)."""
        if req.replica_id < 0:
            return
        st = self.node.state
        progress = st.known_progress(req.replica_id)   # the leader's KIP-836 view, as it stands now
        end, fetched, caught_up = ((progress.end_offset, progress.last_fetch_timestamp,
                                    progress.last_caught_up_timestamp) if progress is not None else (-1, -1, -1))
        self.step.out.observations.append(FetchObservation(
            self.step.now, st.epoch, isinstance(st, LeaderState), req.replica_id, part.fetch_offset,
            part.last_fetched_epoch, leader_leo, self.node.high_watermark, error, diverging, end, fetched,
            caught_up))

    def complete(self, message: Message, offset: int, progress) -> None:
        """Answer a fetch with the records from `offset` on."""
        hw = self.node.high_watermark
        records = tuple(self.log.read(offset, self.config.fetch_max_records))
        if progress is not None:
            progress.last_sent_high_watermark = hw
        self.respond(message, Errors.NONE, hw, None, records)

    def complete_held(self, st: LeaderState, only_expired: bool = False) -> None:
        if not st.parked:
            return
        now = self.step.now
        for replica, pf in list(st.parked.items()):
            if only_expired and pf.deadline > now:
                continue
            del st.parked[replica]
            self.complete(pf.message, pf.fetch_offset, st.known_progress(replica))

    def refuse_held(self, old: LeaderState) -> None:
        """A node that stopped leading tells its held fetches at once."""
        for pf in old.parked.values():
            self.respond(pf.message, Errors.NOT_LEADER_OR_FOLLOWER, self.node.high_watermark)
        old.parked.clear()
