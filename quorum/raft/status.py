"""What a node reports of itself, as part of `RaftNode` (node.py): the DescribeQuorum (55)
answer and its raft metrics (`raft-metrics` and KIP-835's)."""
from __future__ import annotations

from quorum.raft.messages import (DescribeQuorumPartitionResponse, DescribeQuorumRequest, DescribeQuorumResponse,
                                  DescribeQuorumTopicResponse, Errors, Message)
from quorum.raft.metrics import RaftMetrics


class NodeStatus:
    """RaftNode's DescribeQuorum and metrics, mixed into it: `self` is the node."""

    def describe_quorum(self, now: int) -> DescribeQuorumPartitionResponse:
        """The DescribeQuorum answer for this partition, as this node would give it."""
        st = self.state
        if not self.is_leader:
            return DescribeQuorumPartitionResponse(
                self.partition, Errors.NOT_LEADER_OR_FOLLOWER, self._known_leader(), st.epoch,
                self.high_watermark, (), (), "this node is not the leader")
        st.expire_observers(now, self.config.observer_expiry_ms)
        voters, observers = st.describe_replicas(now, self.log.end_offset())
        # Kafka's leader knows no high watermark (-1) until it has committed in its own epoch.
        hw = self.high_watermark if self.high_watermark > st.epoch_start_offset else -1
        return DescribeQuorumPartitionResponse(self.partition, Errors.NONE, self.node_id, st.epoch,
                                               hw, voters, observers)

    def metrics(self, now: int) -> RaftMetrics:
        st = self.state
        m = self._metrics
        la = self._last_applied
        return RaftMetrics(
            current_state=self.state_name, current_leader=self._known_leader(),
            current_vote=st.voted_id, current_epoch=st.epoch, high_watermark=self.high_watermark,
            log_end_offset=self.log.end_offset(), log_end_epoch=self.log.last_epoch(),
            commit_latency_avg=m.commit_latency.avg(now), commit_latency_max=m.commit_latency.max(now),
            election_latency_avg=m.election_latency.avg(now),
            election_latency_max=m.election_latency.max(now),
            fetch_records_rate=m.fetch_records.rate_per_s(now),
            append_records_rate=m.append_records.rate_per_s(now),
            poll_idle_ratio_avg=-1.0, number_unknown_voter_connections=st.unknown_voter_connections(),
            last_applied_record_offset=la.offset if la else -1,
            last_applied_record_timestamp=la.append_time_ms if la else -1,
            last_committed_record_offset=self.high_watermark - 1,
            last_applied_record_lag_ms=now - la.append_time_ms if la else -1)

    def _handle_describe_request(self, message: Message, req: DescribeQuorumRequest) -> None:
        part = self._our_partition(req.topics)
        if part is None:
            body = DescribeQuorumResponse(Errors.UNKNOWN_TOPIC_OR_PARTITION, (), "unknown topic or partition")
        else:
            body = DescribeQuorumResponse(Errors.NONE, (DescribeQuorumTopicResponse(
                self.topic, (self.describe_quorum(self._now),)),))
        self._send(message.source, body, correlation_id=message.correlation_id)
