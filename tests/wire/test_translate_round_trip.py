"""Every core message survives core -> wire object -> bytes -> wire object -> core, in
every version the node speaks."""
from __future__ import annotations

import pytest

from quorum.raft import messages as m
from quorum.raft.log import LogRecord
from quorum.wire import apis as w
from quorum.wire import translate as t
from quorum.wire.codec import decode_request, decode_response, encode_request, encode_response

TOPIC = "__cluster_metadata"
NAMES = t.TopicNames([TOPIC, "other-quorum"])


def through_bytes_request(body, version):
    api_key, _, wire = t.request_to_wire(body, fetch_version=version)
    raw = encode_request(wire, version, correlation_id=41, client_id="node-1")
    req = decode_request(raw[4:])
    assert (req.api.key, req.version, req.correlation_id, req.client_id) == (api_key, version, 41, "node-1")
    return req, t.request_from_wire(api_key, version, req.body, NAMES)


def through_bytes_response(req, body):
    raw = encode_response(req, t.response_to_wire(body, req.version))
    back = decode_response(req.api, req.version, raw[4:])
    assert back.header.correlation_id == 41
    return t.response_from_wire(req.api.key, req.version, back, NAMES)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_vote_round_trip(version):
    pre_vote = version >= 2
    req = m.VoteRequest("cluster-a", (m.VoteTopicRequest(TOPIC, (
        m.VotePartitionRequest(0, 7, 2, 6, 120, pre_vote),)),), voter_id=3 if version >= 1 else -1)
    wire_req, back = through_bytes_request(req, version)
    assert back == req
    resp = m.VoteResponse(0, (m.VoteTopicResponse(TOPIC, (m.VotePartitionResponse(0, 0, -1, 7, True),)),))
    assert through_bytes_response(wire_req, resp) == resp


def test_vote_without_cluster_id_is_null_on_the_wire():
    req = m.VoteRequest(None, (m.VoteTopicRequest(TOPIC, (m.VotePartitionRequest(0, 1, 1, 0, 0),)),))
    _, back = through_bytes_request(req, 2)
    assert back.cluster_id is None


def test_begin_and_end_quorum_epoch_round_trip():
    begin = m.BeginQuorumEpochRequest("c", (m.BeginQuorumEpochTopicRequest(TOPIC, (
        m.BeginQuorumEpochPartitionRequest(0, 2, 9),)),))
    wreq, back = through_bytes_request(begin, 0)
    assert back == begin
    resp = m.BeginQuorumEpochResponse(0, (m.EpochTopicResponse(TOPIC, (m.EpochPartitionResponse(0, 74, 3, 10),)),))
    assert through_bytes_response(wreq, resp) == resp
    end = m.EndQuorumEpochRequest("c", (m.EndQuorumEpochTopicRequest(TOPIC, (
        m.EndQuorumEpochPartitionRequest(0, 2, 9, (3, 1)),)),))
    wreq, back = through_bytes_request(end, 0)
    assert back == end
    eresp = m.EndQuorumEpochResponse(0, (m.EpochTopicResponse(TOPIC, (m.EpochPartitionResponse(0, 0, -1, 9),)),))
    assert through_bytes_response(wreq, eresp) == eresp


@pytest.mark.parametrize("version", [12, 13, 14, 15, 16, 17])
@pytest.mark.parametrize("topic", [TOPIC, "other-quorum"])
def test_fetch_round_trip_with_records_and_divergence(version, topic):
    req = m.FetchRequest("c", 3, 500, (m.FetchTopic(topic, (m.FetchPartition(0, 4, 17, 3),)),))
    wreq, back = through_bytes_request(req, version)
    assert back == req
    records = (LogRecord(17, 4, b"", 1000, "leader_change"), LogRecord(18, 4, b"x" * 50, 1001),
               LogRecord(19, 4, b"", 1002, "noop"), LogRecord(20, 4, b"y", 1003))
    resp = m.FetchResponse(0, (m.FetchableTopicResponse(topic, (
        m.FetchPartitionData(0, 0, 18, m.LeaderIdAndEpoch(1, 4), None, records),)),))
    assert through_bytes_response(wreq, resp) == resp
    diverging = m.FetchResponse(0, (m.FetchableTopicResponse(topic, (
        m.FetchPartitionData(0, 0, 18, m.LeaderIdAndEpoch(1, 4), m.EpochEndOffset(2, 11)),)),))
    assert through_bytes_response(wreq, diverging) == diverging


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_quorum_round_trip(version):
    req = m.DescribeQuorumRequest((m.DescribeQuorumTopicRequest(TOPIC, (m.DescribeQuorumPartitionRequest(0),)),))
    wreq, back = through_bytes_request(req, version)
    assert back == req
    voters = (m.DescribeQuorumReplica(1, 40, 1000, 1000), m.DescribeQuorumReplica(2, 38, 990, 980))
    resp = m.DescribeQuorumResponse(0, (m.DescribeQuorumTopicResponse(TOPIC, (
        m.DescribeQuorumPartitionResponse(0, 0, 1, 5, 38, voters, (m.DescribeQuorumReplica(9, 30, 900, 800),)),)),))
    got = through_bytes_response(wreq, resp)
    if version == 0:  # v0 has no timestamps: they read back as the schema default, -1
        voters = tuple(m.DescribeQuorumReplica(v.replica_id, v.log_end_offset, -1, -1) for v in voters)
        assert got.topics[0].partitions[0].current_voters == voters
    else:
        assert got == resp


def test_every_supported_api_is_a_kafka_python_message_class():
    from kafka.protocol.api_message import ApiMessage
    for api in w.SUPPORTED.values():
        assert issubclass(api.request, ApiMessage) and api.request.API_KEY == api.key
        assert issubclass(api.response, ApiMessage) and api.response.API_KEY == api.key
