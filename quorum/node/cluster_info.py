"""What the node tells clients and tools about the cluster outside the Raft core, as part of
`QuorumNode` (node.py): the brokers of Metadata and DescribeCluster, and DescribeQuorum,
forwarded to the leader as Kafka brokers forward to the active controller, or answered from
the core here with the replicas' data directory ids (learned from their fetches)."""
from __future__ import annotations

from typing import Any

from quorum.kafka_client.wire_connection import PeerUnavailable
from quorum.node import requests as rq
from quorum.node.clock import now_ms
from quorum.raft import messages as m
from quorum.wire import apis as w
from quorum.wire import translate
from quorum.wire.codec import Request, encode_response


class ClusterInfo:
    """QuorumNode's Metadata brokers, DescribeQuorum and replica directory ids, mixed into it:
    `self` is the node."""

    def _brokers(self) -> list[tuple[int, str, int]]:
        c = self.config
        out = [(i, e.host, e.port) for i, e in sorted(c.voters.items())]
        if not c.is_voter:
            out.append((c.node_id, c.listener.host, c.listener.port))
        return out

    def _metadata(self, body: Any) -> Any:
        core = self.core
        return rq.metadata_response(body, cluster_id=self.config.cluster_id, topic=self.config.topic,
                                    brokers=self._brokers(), leader_id=core.leader_id, epoch=core.epoch,
                                    voters=core.voters)

    async def _describe_quorum(self, req: Request) -> bytes | None:
        core = self.core
        leader = core.leader_id
        if not core.is_leader and leader >= 0 and leader != self.config.node_id and self.peers.knows(leader):
            # Forward to the leader, as Kafka brokers forward to the active controller.
            try:
                resp = await self.peers.request(leader, w.DESCRIBE_QUORUM, req.version, req.body,
                                                self.config.request_timeout_ms / 1000)
                resp._header = None  # re-headed with the client's correlation id
                return encode_response(req, resp)
            except PeerUnavailable:
                pass
        core_req = translate.describe_request_from_wire(req.body)
        parts = []
        topics = []
        for t in core_req.topics:
            parts = []
            for p in t.partitions:
                if t.topic_name == self.config.topic and p.partition_index == 0:
                    parts.append(core.describe_quorum(now_ms()))
                else:
                    parts.append(m.DescribeQuorumPartitionResponse(p.partition_index, 3, -1, -1, -1, (), (),
                                                                   "unknown topic or partition"))
            topics.append(m.DescribeQuorumTopicResponse(t.topic_name, tuple(parts)))
        body = m.DescribeQuorumResponse(0, tuple(topics))
        nodes = [(i, e.host, e.port) for i, e in sorted(self.config.voters.items())]
        return encode_response(req, translate.describe_response_to_wire(body, nodes, self._directory_ids))

    def _note_directory_id(self, req: Request) -> None:
        state = getattr(req.body, "replica_state", None)
        replica = state.replica_id if state is not None else getattr(req.body, "replica_id", -1)
        for t in req.body.topics:
            for p in t.partitions:
                self._note_directory(replica, getattr(p, "replica_directory_id", None))

    def _note_directory(self, replica: int | None, directory: Any) -> None:
        if replica is None or replica < 0:
            return  # a consumer, not a replica
        if directory is not None and directory.int != 0:
            self._directory_ids[replica] = directory
