"""The lean Fetch v17 codec against kafka-python: on generated messages it writes the same
bytes as kafka-python's classes after `translate`, reads them back to the same core
messages, and hands anything else to the general path (`Unsupported`)."""
from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quorum.raft import messages as m
from quorum.raft.log import LogRecord
from quorum.wire import apis as w
from quorum.wire import fetch_codec as fc
from quorum.wire import translate as t
from quorum.wire.codec import decode_request, decode_response, encode_request, encode_response

NAMES = t.TopicNames(["__cluster_metadata", "other-quorum"])
topics = st.sampled_from(["__cluster_metadata", "other-quorum"])
i32 = st.integers(-1, 2**31 - 1)
i64 = st.integers(-1, 2**63 - 1)
cluster_ids = st.one_of(st.none(), st.text(max_size=30))

fetch_partitions = st.builds(m.FetchPartition, st.integers(0, 5), i32, i64, i32, i64, i32)
fetch_requests = st.builds(
    m.FetchRequest, cluster_ids, i32, i32,
    st.lists(st.builds(m.FetchTopic, topics, st.lists(fetch_partitions, max_size=3).map(tuple)),
             max_size=2).map(tuple),
    i32, i32, i64)
directory_ids = st.one_of(st.none(), st.just(uuid.UUID(int=0)), st.uuids())


@st.composite
def record_runs(draw):
    """Records as a log holds them: consecutive offsets, epochs never going down."""
    n = draw(st.integers(0, 4))
    base = draw(st.integers(0, 10**9))
    epoch = draw(st.integers(0, 50))
    return tuple(LogRecord(base + i, epoch, draw(st.binary(max_size=40)), draw(st.integers(0, 2**41)), "data")
                 for i in range(n))


partition_data = st.builds(
    m.FetchPartitionData, st.integers(0, 5), st.sampled_from([0, 1, 6, 74, 75]), i64,
    st.builds(m.LeaderIdAndEpoch, i32, i32),
    st.one_of(st.none(), st.builds(m.EpochEndOffset, st.integers(0, 2**31 - 1), i64)),
    record_runs(), i64)
fetch_responses = st.builds(
    m.FetchResponse, st.sampled_from([0, 1, 58]),
    st.lists(st.builds(m.FetchableTopicResponse, topics, st.lists(partition_data, max_size=2).map(tuple)),
             max_size=2).map(tuple),
    st.integers(0, 1000))


def general_request_bytes(r: m.FetchRequest, cid: int, client_id: str, directory: uuid.UUID | None) -> bytes:
    _, version, body = t.request_to_wire(r, fetch_version=fc.VERSION)
    if directory is not None:
        for topic in body.topics:
            for p in topic.partitions:
                p.replica_directory_id = directory
    return encode_request(body, version, cid, client_id)


@settings(max_examples=300, deadline=None)
@given(fetch_requests, directory_ids, st.integers(0, 2**31 - 1), st.text(max_size=20))
def test_requests_match_kafka_python_both_ways(req, directory, cid, client_id):
    general = general_request_bytes(req, cid, client_id, directory)
    assert fc.encode_request(req, cid, client_id, directory) == general
    decoded = decode_request(general[4:])
    expected = t.request_from_wire(w.FETCH, fc.VERSION, decoded.body, NAMES)
    sent_directory = directory if directory is not None and any(
        tp.partitions for tp in req.topics) else None
    assert fc.decode_request(general[4:], NAMES) == (expected, client_id, sent_directory)


@settings(max_examples=300, deadline=None)
@given(fetch_responses, st.integers(0, 2**31 - 1))
def test_responses_match_kafka_python_both_ways(resp, cid):
    request = decode_request(general_request_bytes(m.FetchRequest("c", 1, 0, ()), cid, "x", None)[4:])
    general = encode_response(request, t.response_to_wire(resp, fc.VERSION))
    assert fc.encode_response(resp, cid) == general
    expected = t.response_from_wire(w.FETCH, fc.VERSION, decode_response(request.api, fc.VERSION, general[4:]),
                                    NAMES)
    assert fc.decode_response(general[4:], NAMES) == expected


def test_other_shapes_take_the_general_path():
    req = m.FetchRequest("c", 1, 500, (m.FetchTopic("__cluster_metadata", (m.FetchPartition(0, 1, 0, 0),)),))
    # another version
    _, _, body = t.request_to_wire(req, fetch_version=16)
    with pytest.raises(fc.Unsupported):
        fc.decode_request(encode_request(body, 16, 1, "x")[4:], NAMES)
    # a fetch session, as a consumer would open
    _, _, body = t.request_to_wire(req)
    body.session_epoch = 0
    with pytest.raises(fc.Unsupported):
        fc.decode_request(encode_request(body, 17, 1, "x")[4:], NAMES)
    # a topic id this node does not serve
    with pytest.raises(fc.Unsupported):
        fc.decode_request(fc.encode_request(req, 1, "x", None)[4:], t.TopicNames(["other-quorum"]))
    # cut short, or with bytes after the end
    raw = fc.encode_request(req, 1, "x", None)[4:]
    for bad in (raw[:-3], raw + b"\x00"):
        with pytest.raises(fc.Unsupported):
            fc.decode_request(bad, NAMES)
