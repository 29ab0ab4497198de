"""DescribeQuorum asked of one named Kafka node, on the project's wire client: what the launchers
and the test harnesses wait on while a quorum forms."""
from __future__ import annotations

import asyncio

from quorum.kafka_client.wire_connection import PeerConnection
from quorum.wire.apis import DESCRIBE_QUORUM, SUPPORTED


def describe_quorum_directly(node_id: int, host: str, port: int, timeout_s: float = 5.0, version: int = 2) -> dict:
    """DescribeQuorum of __cluster_metadata-0 sent to this one node, on a connection of its own
    (an admin client may pick any node it knows, and a Kafka controller answers no metadata
    request to bootstrap from): the answer's to_dict(). PeerUnavailable when it cannot answer."""
    request_cls = SUPPORTED[DESCRIBE_QUORUM].request
    topic = request_cls.TopicData
    body = request_cls(topics=[topic(topic_name="__cluster_metadata",
                                     partitions=[topic.PartitionData(partition_index=0)])])

    async def ask() -> dict:
        conn = PeerConnection(node_id, host, port, "quorum-describe", 1 << 20)
        try:
            return (await conn.request(DESCRIBE_QUORUM, version, body, timeout_s)).to_dict()
        finally:
            conn.close()
    return asyncio.run(ask())
