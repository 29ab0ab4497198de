"""Answers the node gives without involving the Raft core: ApiVersions, Metadata, and the
decoding of Produce (the append path) records."""
from __future__ import annotations

from typing import Any

from kafka.record.memory_records import MemoryRecords

from quorum.storage import record_batches
from quorum.wire import apis as w
from quorum.wire.codec import supported_api_keys

LEADER_NOT_AVAILABLE = 5
UNKNOWN_TOPIC_OR_PARTITION = 3
CORRUPT_MESSAGE = 2
UNKNOWN_SERVER_ERROR = -1


def api_versions_response() -> Any:
    cls = w.SUPPORTED[w.API_VERSIONS].response
    return cls(error_code=0, api_keys=supported_api_keys(cls), throttle_time_ms=0)


def metadata_response(request: Any, *, cluster_id: str, topic: str, brokers: list[tuple[int, str, int]],
                      leader_id: int, epoch: int, voters: tuple[int, ...]) -> Any:
    """Brokers are the quorum's nodes; the controller is the leader; the only topic is the
    quorum topic, whose single partition is led by the Raft leader (so a Kafka producer
    finds where to append, and follows a leader change by refreshing metadata)."""
    cls = w.SUPPORTED[w.METADATA].response
    B, T = cls.MetadataResponseBroker, cls.MetadataResponseTopic
    P = T.MetadataResponsePartition
    wanted = request.topics
    names = [topic] if wanted is None else [t.name for t in wanted]
    topics = []
    for name in names:
        if name != topic:
            topics.append(T(error_code=UNKNOWN_TOPIC_OR_PARTITION, name=name, topic_id=None, is_internal=False,
                            partitions=[]))
            continue
        error = 0 if leader_id >= 0 else LEADER_NOT_AVAILABLE
        topics.append(T(error_code=0, name=topic, topic_id=w.topic_id(topic), is_internal=False, partitions=[
            P(error_code=error, partition_index=0, leader_id=leader_id, leader_epoch=epoch,
              replica_nodes=list(voters), isr_nodes=list(voters), offline_replicas=[])]))
    return cls(throttle_time_ms=0, brokers=[B(node_id=i, host=h, port=p, rack=None) for i, h, p in brokers],
               cluster_id=cluster_id, controller_id=leader_id, topics=topics, error_code=0)


def describe_cluster_response(*, cluster_id: str, brokers: list[tuple[int, str, int]], leader_id: int) -> Any:
    cls = w.SUPPORTED[w.DESCRIBE_CLUSTER].response
    B = cls.DescribeClusterBroker
    return cls(throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=1, cluster_id=cluster_id,
               controller_id=leader_id, brokers=[B(broker_id=i, host=h, port=p, rack=None, is_fenced=False)
                                                 for i, h, p in brokers])


def produce_values(partition_data: Any) -> list[bytes]:
    """Record values of one Produce partition, every batch CRC checked."""
    data = bytes(partition_data.records or b"")
    try:   # magic v2, uncompressed (what clients send here): the log's own fast codec
        return [r.value or b"" for pos, info in record_batches.scan(data)
                for r in record_batches.records_of(memoryview(data)[pos:pos + info.size])]
    except record_batches.CorruptBatch:
        pass   # older formats, compression, or a bad CRC: kafka-python decides
    records = MemoryRecords(data)
    values = []
    while records.has_next():
        batch = records.next_batch()
        if hasattr(batch, "validate_crc") and not batch.validate_crc():
            raise ValueError("record batch CRC mismatch")
        for r in batch:
            values.append(r.value or b"")
    return values


def produce_response(request: Any, version: int, results: dict[tuple[str, int], tuple[int, int]],
                     leader: tuple[int, int]) -> Any:
    """`results`: (topic, partition) -> (error code, base offset)."""
    cls = w.SUPPORTED[w.PRODUCE].response
    T = cls.TopicProduceResponse
    P = T.PartitionProduceResponse
    out = []
    for t in request.topic_data:
        parts = []
        for p in t.partition_data:
            error, base = results.get((t.name, p.index), (UNKNOWN_TOPIC_OR_PARTITION, -1))
            kw = {}
            if version >= 10 and error != 0:
                kw["current_leader"] = P.LeaderIdAndEpoch(leader_id=leader[0], leader_epoch=leader[1])
            parts.append(P(index=p.index, error_code=error, base_offset=base, log_append_time_ms=-1,
                           log_start_offset=0, record_errors=[], error_message=None, **kw))
        out.append(T(name=t.name, partition_responses=parts))
    return cls(responses=out, throttle_time_ms=0)
