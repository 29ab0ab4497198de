"""What a node reports of itself: the DescribeQuorum (55) answer and its raft metrics
(`raft-metrics` and KIP-835's)."""
from __future__ import annotations

from dataclasses import dataclass

from quorum.raft.config import RaftConfig
from quorum.raft.identity import NodeIdentity
from quorum.raft.leader_state import LeaderState
from quorum.raft.log import ReplicatedLog
from quorum.raft.messages import (DescribeQuorumPartitionResponse, DescribeQuorumRequest, DescribeQuorumResponse,
                                  DescribeQuorumTopicResponse, Errors, Message)
from quorum.raft.metrics import MetricsTracker, RaftMetrics
from quorum.raft.node_state import NodeState
from quorum.raft.outbox import Outbox
from quorum.raft.step import Step


@dataclass(eq=False)
class NodeStatus:
    identity: NodeIdentity
    config: RaftConfig
    log: ReplicatedLog
    node: NodeState
    step: Step
    outbox: Outbox
    tracker: MetricsTracker

    @property
    def state_name(self) -> str:
        """raft-metrics current-state."""
        return self.node.state.current_state(self.identity.is_voter)

    def describe_quorum(self, now: int) -> DescribeQuorumPartitionResponse:
        """The DescribeQuorum answer for this partition, as this node would give it."""
        st = self.node.state
        hw = self.node.high_watermark
        partition = self.identity.partition
        if not isinstance(st, LeaderState):
            return DescribeQuorumPartitionResponse(
                partition, Errors.NOT_LEADER_OR_FOLLOWER, self.node.known_leader, st.epoch, hw, (), (),
                "this node is not the leader")
        st.expire_observers(now, self.config.observer_expiry_ms)
        voters, observers = st.describe_replicas(now, self.log.end_offset())
        # Kafka's leader knows no high watermark (-1) until it has committed in its own epoch.
        return DescribeQuorumPartitionResponse(partition, Errors.NONE, self.identity.node_id, st.epoch,
                                               hw if hw > st.epoch_start_offset else -1, voters, observers)

    def metrics(self, now: int) -> RaftMetrics:
        st = self.node.state
        m = self.tracker
        la = self.node.last_applied
        hw = self.node.high_watermark
        return RaftMetrics(
            current_state=self.state_name, current_leader=self.node.known_leader,
            current_vote=st.voted_id, current_epoch=st.epoch, high_watermark=hw,
            log_end_offset=self.log.end_offset(), log_end_epoch=self.log.last_epoch(),
            commit_latency_avg=m.commit_latency.avg(now), commit_latency_max=m.commit_latency.max(now),
            election_latency_avg=m.election_latency.avg(now),
            election_latency_max=m.election_latency.max(now),
            fetch_records_rate=m.fetch_records.rate_per_s(now),
            append_records_rate=m.append_records.rate_per_s(now),
            poll_idle_ratio_avg=-1.0, number_unknown_voter_connections=st.unknown_voter_connections(),
            last_applied_record_offset=la.offset if la else -1,
            last_applied_record_timestamp=la.append_time_ms if la else -1,
            last_committed_record_offset=hw - 1,
            last_applied_record_lag_ms=now - la.append_time_ms if la else -1)

    def handle_describe_request(self, message: Message, req: DescribeQuorumRequest) -> None:
        part = self.identity.our_partition(req.topics)
        if part is None:
            body = DescribeQuorumResponse(Errors.UNKNOWN_TOPIC_OR_PARTITION, (), "unknown topic or partition")
        else:
            body = DescribeQuorumResponse(Errors.NONE, (DescribeQuorumTopicResponse(
                self.identity.topic, (self.describe_quorum(self.step.now),)),))
        self.outbox.answer(message, body)
