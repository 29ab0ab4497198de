"""The core's message dataclasses (`quorum.raft.messages`) to kafka-python wire objects
and back. Field names match (the core uses the schemas' names in snake_case), so this is
mechanical except for Fetch: records travel as Kafka record batches, v13+ names topics by
id, and v15+ moves the replica id into the tagged `ReplicaState`.
"""
from __future__ import annotations

import uuid
from typing import Any

from quorum.raft import messages as m
from quorum.storage.durable_log import batches_to_records, records_to_batches
from quorum.wire import apis as w

# Directory ids in Vote requests (KIP-853): a candidate of a static voter set sends none, as
# Kafka's voters of kraft.version 0 do; a receiver compares them only when its voter set has them
NO_DIRECTORY = uuid.UUID(int=0)


class TopicNames:
    """Topic id <-> name for Fetch v13+: the node knows its quorum topics."""

    def __init__(self, topics: list[str]):
        self.by_id = {w.topic_id(t): t for t in topics}

    def name(self, topic_id) -> str:
        return self.by_id.get(topic_id, f"<unknown topic id {topic_id}>")


# --- Vote ----------------------------------------------------------------------------------------

def vote_request_to_wire(r: m.VoteRequest) -> w.VoteRequest:
    T, P = w.VoteRequest.TopicData, w.VoteRequest.TopicData.PartitionData
    return w.VoteRequest(cluster_id=r.cluster_id, voter_id=r.voter_id, topics=[
        T(topic_name=t.topic_name, partitions=[
            P(partition_index=p.partition_index, candidate_epoch=p.candidate_epoch, candidate_id=p.candidate_id,
              candidate_directory_id=NO_DIRECTORY, voter_directory_id=NO_DIRECTORY,
              last_offset_epoch=p.last_offset_epoch, last_offset=p.last_offset, pre_vote=p.pre_vote)
            for p in t.partitions]) for t in r.topics])


def vote_request_from_wire(r: Any) -> m.VoteRequest:
    return m.VoteRequest(r.cluster_id, tuple(
        m.VoteTopicRequest(t.topic_name, tuple(
            m.VotePartitionRequest(p.partition_index, p.candidate_epoch, p.candidate_id, p.last_offset_epoch,
                                   p.last_offset, bool(p.pre_vote)) for p in t.partitions))
        for t in r.topics), r.voter_id)


def vote_response_to_wire(r: m.VoteResponse) -> w.VoteResponse:
    T, P = w.VoteResponse.TopicData, w.VoteResponse.TopicData.PartitionData
    return w.VoteResponse(error_code=r.error_code, topics=[
        T(topic_name=t.topic_name, partitions=[
            P(partition_index=p.partition_index, error_code=p.error_code, leader_id=p.leader_id,
              leader_epoch=p.leader_epoch, vote_granted=p.vote_granted) for p in t.partitions])
        for t in r.topics])


def vote_response_from_wire(r: Any) -> m.VoteResponse:
    return m.VoteResponse(r.error_code, tuple(
        m.VoteTopicResponse(t.topic_name, tuple(
            m.VotePartitionResponse(p.partition_index, p.error_code, p.leader_id, p.leader_epoch,
                                    bool(p.vote_granted)) for p in t.partitions)) for t in r.topics))


# --- BeginQuorumEpoch / EndQuorumEpoch -----------------------------------------------------------

def begin_request_to_wire(r: m.BeginQuorumEpochRequest) -> w.BeginQuorumEpochRequest:
    T, P = w.BeginQuorumEpochRequest.TopicData, w.BeginQuorumEpochRequest.TopicData.PartitionData
    return w.BeginQuorumEpochRequest(cluster_id=r.cluster_id, topics=[
        T(topic_name=t.topic_name, partitions=[
            P(partition_index=p.partition_index, leader_id=p.leader_id, leader_epoch=p.leader_epoch)
            for p in t.partitions]) for t in r.topics])


def begin_request_from_wire(r: Any) -> m.BeginQuorumEpochRequest:
    return m.BeginQuorumEpochRequest(r.cluster_id, tuple(
        m.BeginQuorumEpochTopicRequest(t.topic_name, tuple(
            m.BeginQuorumEpochPartitionRequest(p.partition_index, p.leader_id, p.leader_epoch)
            for p in t.partitions)) for t in r.topics))


def end_request_to_wire(r: m.EndQuorumEpochRequest) -> w.EndQuorumEpochRequest:
    T, P = w.EndQuorumEpochRequest.TopicData, w.EndQuorumEpochRequest.TopicData.PartitionData
    return w.EndQuorumEpochRequest(cluster_id=r.cluster_id, topics=[
        T(topic_name=t.topic_name, partitions=[
            P(partition_index=p.partition_index, leader_id=p.leader_id, leader_epoch=p.leader_epoch,
              preferred_successors=list(p.preferred_successors)) for p in t.partitions]) for t in r.topics])


def end_request_from_wire(r: Any) -> m.EndQuorumEpochRequest:
    return m.EndQuorumEpochRequest(r.cluster_id, tuple(
        m.EndQuorumEpochTopicRequest(t.topic_name, tuple(
            m.EndQuorumEpochPartitionRequest(p.partition_index, p.leader_id, p.leader_epoch,
                                             tuple(p.preferred_successors or ())
                                             or tuple(c.candidate_id for c in p.preferred_candidates or ()))
            for p in t.partitions)) for t in r.topics))


def _epoch_response_to_wire(cls, r) -> Any:
    T, P = cls.TopicData, cls.TopicData.PartitionData
    return cls(error_code=r.error_code, topics=[
        T(topic_name=t.topic_name, partitions=[
            P(partition_index=p.partition_index, error_code=p.error_code, leader_id=p.leader_id,
              leader_epoch=p.leader_epoch) for p in t.partitions]) for t in r.topics])


def _epoch_response_from_wire(cls, r) -> Any:
    return cls(r.error_code, tuple(
        m.EpochTopicResponse(t.topic_name, tuple(
            m.EpochPartitionResponse(p.partition_index, p.error_code, p.leader_id, p.leader_epoch)
            for p in t.partitions)) for t in r.topics))


# --- Fetch -----------------------------------------------------------------------------------------

def fetch_request_to_wire(r: m.FetchRequest, version: int) -> Any:
    T, P = w.FetchRequest.FetchTopic, w.FetchRequest.FetchTopic.FetchPartition
    topics = []
    for t in r.topics:
        names = {"topic": t.topic} if version <= 12 else {"topic_id": w.topic_id(t.topic)}
        topics.append(T(**names, partitions=[
            P(partition=p.partition, current_leader_epoch=p.current_leader_epoch, fetch_offset=p.fetch_offset,
              last_fetched_epoch=p.last_fetched_epoch, log_start_offset=p.log_start_offset,
              partition_max_bytes=p.partition_max_bytes) for p in t.partitions]))
    kw: dict[str, Any] = {}
    if version >= 15:
        kw["replica_state"] = w.FetchRequest.ReplicaState(replica_id=r.replica_id, replica_epoch=r.replica_epoch)
    else:
        kw["replica_id"] = r.replica_id
    return w.FetchRequest(cluster_id=r.cluster_id, max_wait_ms=r.max_wait_ms, min_bytes=r.min_bytes,
                          max_bytes=r.max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
                          topics=topics, forgotten_topics_data=[], rack_id="", **kw)


def fetch_request_from_wire(r: Any, version: int, names: TopicNames) -> m.FetchRequest:
    if version >= 15:
        rs = r.replica_state
        replica_id = rs.replica_id if rs is not None else -1
        replica_epoch = rs.replica_epoch if rs is not None else -1
    else:
        replica_id, replica_epoch = r.replica_id, -1
    topics = tuple(m.FetchTopic(t.topic if version <= 12 else names.name(t.topic_id), tuple(
        m.FetchPartition(p.partition, p.current_leader_epoch, p.fetch_offset, p.last_fetched_epoch,
                         p.log_start_offset, p.partition_max_bytes) for p in t.partitions)) for t in r.topics)
    return m.FetchRequest(r.cluster_id, replica_id, r.max_wait_ms, topics, r.min_bytes, r.max_bytes, replica_epoch)


def fetch_response_to_wire(r: m.FetchResponse, version: int) -> Any:
    T, P = w.FetchResponse.FetchableTopicResponse, w.FetchResponse.FetchableTopicResponse.PartitionData
    topics = []
    for t in r.responses:
        names = {"topic": t.topic} if version <= 12 else {"topic_id": w.topic_id(t.topic)}
        parts = []
        for p in t.partitions:
            kw: dict[str, Any] = {}
            if p.diverging_epoch is not None:
                kw["diverging_epoch"] = P.EpochEndOffset(epoch=p.diverging_epoch.epoch,
                                                         end_offset=p.diverging_epoch.end_offset)
            kw["current_leader"] = P.LeaderIdAndEpoch(leader_id=p.current_leader.leader_id,
                                                      leader_epoch=p.current_leader.leader_epoch)
            parts.append(P(partition_index=p.partition_index, error_code=p.error_code,
                           high_watermark=p.high_watermark, last_stable_offset=p.high_watermark,
                           log_start_offset=p.log_start_offset, aborted_transactions=None,
                           preferred_read_replica=-1,
                           records=records_to_batches(p.records) if p.records else b"", **kw))
        topics.append(T(**names, partitions=parts))
    return w.FetchResponse(throttle_time_ms=r.throttle_time_ms, error_code=r.error_code, session_id=0,
                           responses=topics)


def fetch_response_from_wire(r: Any, version: int, names: TopicNames) -> m.FetchResponse:
    topics = []
    for t in r.responses:
        parts = []
        for p in t.partitions:
            de = p.diverging_epoch
            diverging = None if de is None or de.epoch < 0 else m.EpochEndOffset(de.epoch, de.end_offset)
            cl = p.current_leader
            leader = m.LeaderIdAndEpoch(cl.leader_id, cl.leader_epoch) if cl is not None else m.LeaderIdAndEpoch(-1, -1)
            records = tuple(batches_to_records(bytes(p.records))) if p.records else ()
            sid = getattr(p, "snapshot_id", None)
            snapshot = None if sid is None or sid.end_offset < 0 else m.EpochEndOffset(sid.epoch, sid.end_offset)
            parts.append(m.FetchPartitionData(p.partition_index, p.error_code, p.high_watermark, leader,
                                              diverging, records, p.log_start_offset, snapshot))
        topics.append(m.FetchableTopicResponse(t.topic if version <= 12 else names.name(t.topic_id), tuple(parts)))
    return m.FetchResponse(r.error_code, tuple(topics), r.throttle_time_ms)


# --- DescribeQuorum --------------------------------------------------------------------------------

def describe_request_from_wire(r: Any) -> m.DescribeQuorumRequest:
    return m.DescribeQuorumRequest(tuple(
        m.DescribeQuorumTopicRequest(t.topic_name, tuple(
            m.DescribeQuorumPartitionRequest(p.partition_index) for p in t.partitions)) for t in r.topics))


def describe_request_to_wire(r: m.DescribeQuorumRequest) -> Any:
    T = w.SUPPORTED[w.DESCRIBE_QUORUM].request.TopicData
    return w.SUPPORTED[w.DESCRIBE_QUORUM].request(topics=[
        T(topic_name=t.topic_name, partitions=[T.PartitionData(partition_index=p.partition_index)
                                               for p in t.partitions]) for t in r.topics])


def describe_response_to_wire(r: m.DescribeQuorumResponse, nodes: list[tuple[int, str, int]] = (),
                              directory_ids: dict[int, Any] | None = None) -> Any:
    """`directory_ids`: replica id -> uuid.UUID for v2's ReplicaDirectoryId (absent: the zero Uuid)."""
    cls = w.SUPPORTED[w.DESCRIBE_QUORUM].response
    T = cls.TopicData
    P = T.PartitionData
    RS = P.ReplicaState
    dirs = directory_ids or {}

    def rs(x: m.DescribeQuorumReplica) -> Any:
        return RS(replica_id=x.replica_id, replica_directory_id=dirs.get(x.replica_id),
                  log_end_offset=x.log_end_offset, last_fetch_timestamp=x.last_fetch_timestamp,
                  last_caught_up_timestamp=x.last_caught_up_timestamp)

    N = cls.Node
    return cls(error_code=r.error_code, error_message=r.error_message, topics=[
        T(topic_name=t.topic_name, partitions=[
            P(partition_index=p.partition_index, error_code=p.error_code, error_message=p.error_message,
              leader_id=p.leader_id, leader_epoch=p.leader_epoch, high_watermark=p.high_watermark,
              current_voters=[rs(v) for v in p.current_voters], observers=[rs(o) for o in p.observers])
            for p in t.partitions]) for t in r.topics],
        nodes=[N(node_id=i, listeners=[N.Listener(name="CONTROLLER", host=h, port=port)]) for i, h, port in nodes])


def describe_response_from_wire(r: Any) -> m.DescribeQuorumResponse:
    def rs(x: Any) -> m.DescribeQuorumReplica:
        return m.DescribeQuorumReplica(x.replica_id, x.log_end_offset, x.last_fetch_timestamp, x.last_caught_up_timestamp)
    return m.DescribeQuorumResponse(r.error_code, tuple(
        m.DescribeQuorumTopicResponse(t.topic_name, tuple(
            m.DescribeQuorumPartitionResponse(p.partition_index, p.error_code, p.leader_id, p.leader_epoch,
                                              p.high_watermark, tuple(rs(v) for v in p.current_voters),
                                              tuple(rs(o) for o in p.observers), p.error_message or None)
            for p in t.partitions)) for t in r.topics), r.error_message or None)


# --- dispatch ----------------------------------------------------------------------------------------

def request_to_wire(body: m.Request, fetch_version: int = w.FETCH_VERSION) -> tuple[int, int, Any]:
    """(api key, version, wire object) for an outbound request of the core."""
    if isinstance(body, m.FetchRequest):
        return w.FETCH, fetch_version, fetch_request_to_wire(body, fetch_version)
    if isinstance(body, m.VoteRequest):
        return w.VOTE, w.VOTE_VERSION, vote_request_to_wire(body)
    if isinstance(body, m.BeginQuorumEpochRequest):
        return w.BEGIN_QUORUM_EPOCH, w.EPOCH_VERSION, begin_request_to_wire(body)
    if isinstance(body, m.EndQuorumEpochRequest):
        return w.END_QUORUM_EPOCH, w.EPOCH_VERSION, end_request_to_wire(body)
    if isinstance(body, m.DescribeQuorumRequest):
        return w.DESCRIBE_QUORUM, 2, describe_request_to_wire(body)
    raise TypeError(f"not a request: {type(body).__name__}")


def request_from_wire(api_key: int, version: int, body: Any, names: TopicNames) -> m.Request:
    if api_key == w.FETCH:
        return fetch_request_from_wire(body, version, names)
    if api_key == w.VOTE:
        return vote_request_from_wire(body)
    if api_key == w.BEGIN_QUORUM_EPOCH:
        return begin_request_from_wire(body)
    if api_key == w.END_QUORUM_EPOCH:
        return end_request_from_wire(body)
    if api_key == w.DESCRIBE_QUORUM:
        return describe_request_from_wire(body)
    raise ValueError(f"api key {api_key} is not a quorum request")


def response_to_wire(body: m.Response, version: int) -> Any:
    if isinstance(body, m.FetchResponse):
        return fetch_response_to_wire(body, version)
    if isinstance(body, m.VoteResponse):
        return vote_response_to_wire(body)
    if isinstance(body, m.BeginQuorumEpochResponse):
        return _epoch_response_to_wire(w.BeginQuorumEpochResponse, body)
    if isinstance(body, m.EndQuorumEpochResponse):
        return _epoch_response_to_wire(w.EndQuorumEpochResponse, body)
    if isinstance(body, m.DescribeQuorumResponse):
        return describe_response_to_wire(body)
    raise TypeError(f"not a response: {type(body).__name__}")


def response_from_wire(api_key: int, version: int, body: Any, names: TopicNames) -> m.Response:
    if api_key == w.FETCH:
        return fetch_response_from_wire(body, version, names)
    if api_key == w.VOTE:
        return vote_response_from_wire(body)
    if api_key == w.BEGIN_QUORUM_EPOCH:
        return _epoch_response_from_wire(m.BeginQuorumEpochResponse, body)
    if api_key == w.END_QUORUM_EPOCH:
        return _epoch_response_from_wire(m.EndQuorumEpochResponse, body)
    if api_key == w.DESCRIBE_QUORUM:
        return describe_response_from_wire(body)
    raise ValueError(f"api key {api_key} is not a quorum response")
