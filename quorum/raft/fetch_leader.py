"""Fetch (1) as a node answers it.

Every node answers a fetch, in Kafka's order of checks (cluster id, then epoch, then
leadership); only the leader serves one. It answers a log it cannot continue with a
DivergingEpoch, records the replica's progress (KIP-836) from a valid fetch, moves the high
watermark when a majority of voters holds more, and holds a fetch with nothing new until
data arrives, the high watermark moves or the long poll ends.
"""
from __future__ import annotations

from dataclasses import dataclass

from quorum.raft.config import RaftConfig
from quorum.raft.fetch_answers import FetchAnswers
from quorum.raft.identity import NodeIdentity
from quorum.raft.leader_appends import LeaderAppends
from quorum.raft.leader_state import LeaderState, ParkedFetch
from quorum.raft.log import ReplicatedLog
from quorum.raft.messages import EpochEndOffset, Errors, FetchPartition, FetchRequest, Message
from quorum.raft.node_state import NodeState
from quorum.raft.step import Step


@dataclass(eq=False)
class FetchRequestHandler:
    identity: NodeIdentity
    config: RaftConfig
    log: ReplicatedLog
    node: NodeState
    step: Step
    answers: FetchAnswers
    appends: LeaderAppends

    def handle_request(self, message: Message, req: FetchRequest) -> None:
        st = self.node.state
        answers = self.answers
        leo = self.log.end_offset()
        part = self.identity.our_partition(req.topics, "topic")
        # Kafka's order of checks: cluster id, then epoch, then leadership.
        if not self.identity.cluster_ok(req.cluster_id):
            if part is not None:
                answers.observe(req, part, Errors.INCONSISTENT_CLUSTER_ID, leo)
            answers.respond(message, Errors.NONE, top_error=Errors.INCONSISTENT_CLUSTER_ID)
            return
        if part is None:
            answers.respond(message, Errors.NONE, top_error=Errors.UNKNOWN_TOPIC_OR_PARTITION)
            return
        if (req.max_wait_ms < 0 or part.fetch_offset < 0 or part.last_fetched_epoch < 0
                or part.last_fetched_epoch > part.current_leader_epoch):
            error = Errors.INVALID_REQUEST
        elif part.current_leader_epoch < st.epoch:
            error = Errors.FENCED_LEADER_EPOCH
        elif part.current_leader_epoch > st.epoch:
            error = Errors.UNKNOWN_LEADER_EPOCH
        elif not isinstance(st, LeaderState):
            error = Errors.NOT_LEADER_OR_FOLLOWER
        else:
            self._serve(st, message, req, part, leo)
            return
        answers.observe(req, part, error, leo)
        answers.respond(message, error, self.node.high_watermark)

    def _serve(self, st: LeaderState, message: Message, req: FetchRequest, part: FetchPartition, leo: int) -> None:
        """The leader's answer to a fetch of its epoch."""
        now = self.step.now
        answers = self.answers
        replica = req.replica_id
        is_voter = replica in st.voter_progress
        offset, fetched_epoch = part.fetch_offset, part.last_fetched_epoch
        if offset != 0:
            # Kafka answers every fetch the log cannot continue, an offset past the log end
            # included, with the largest epoch at or below the fetched one and its end offset:
            # the follower truncates to it and goes on (an error answer left it stuck).
            e, end = self.log.end_offset_for_epoch(fetched_epoch)
            if e != fetched_epoch or offset > end:
                answers.observe(req, part, Errors.NONE, leo, diverging=True)
                answers.respond(message, Errors.NONE, self.node.high_watermark, EpochEndOffset(e, end))
                return
        if is_voter:   # only a valid fetch endorses the leader and counts for check quorum
            st.note_voter_fetch(replica, now, self.config.check_quorum_timeout_ms)
        if replica >= 0 and replica != self.identity.node_id:
            progress = st.progress_of(replica)
            progress.on_valid_fetch(offset, leo, now)
            if is_voter:
                self.appends.maybe_advance_high_watermark(st)
        else:
            progress = None
        answers.observe(req, part, Errors.NONE, leo)
        old = st.parked.pop(replica, None)
        if old is not None:   # a newer fetch supersedes a held one: answer the old one empty
            answers.respond(old.message, Errors.NONE, self.node.high_watermark)
        if (offset >= leo and req.max_wait_ms > 0 and progress is not None
                and progress.last_sent_high_watermark >= self.node.high_watermark):
            st.parked[replica] = ParkedFetch(message, offset, now + min(req.max_wait_ms,
                                                                        self.config.fetch_max_wait_ms))
            return
        answers.complete(message, offset, progress)
