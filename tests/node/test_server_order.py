"""Responses on one connection go back in request order, whoever completes them and when:
a long-polled Fetch answered by the Raft loop holds back the ApiVersions answer sent after
it; a Produce on the same connection is answered once committed; a client that half-closes
after its requests still gets every answer. Runs a real single-voter node in-process."""
from __future__ import annotations

import asyncio
import struct

from quorum.node.node import QuorumNode
from quorum.raft import messages as m
from quorum.storage.record_batches import build_batch
from quorum.wire import apis as w
from quorum.wire import fetch_codec
from quorum.wire.codec import encode_request

from .test_server_hostile import api_versions_request, single_voter

OBSERVER = 7


async def _leader(cfg) -> QuorumNode:
    node = QuorumNode(cfg, seed=3)
    await node.start()
    deadline = asyncio.get_running_loop().time() + 10
    while not node.core.is_leader:
        assert asyncio.get_running_loop().time() < deadline, "no leader within 10 s"
        await asyncio.sleep(0.01)
    return node


def _parked_fetch(node: QuorumNode, cid: int, max_wait_ms: int) -> bytes:
    end = node.log.end_offset()
    req = m.FetchRequest("c", OBSERVER, max_wait_ms, (m.FetchTopic(node.config.topic, (
        m.FetchPartition(0, node.core.epoch, end, node.log.last_epoch()),)),))
    return fetch_codec.encode_request(req, cid, "observer", None)


def _produce(cid: int, topic: str) -> bytes:
    req = w.SUPPORTED[w.PRODUCE].request
    T = req.TopicProduceData
    body = req(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[T(name=topic, partition_data=[
        T.PartitionProduceData(index=0, records=build_batch(0, 0, [(0, None, b"v")]))])])
    return encode_request(body, 8, cid, "producer")


async def _read_frames(reader: asyncio.StreamReader, n: int) -> list[int]:
    """The correlation ids of the next n response frames."""
    out = []
    for _ in range(n):
        (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))
        payload = await reader.readexactly(size)
        out.append(struct.unpack_from(">i", payload)[0])
    return out


def test_answers_keep_request_order_behind_a_long_polled_fetch(tmp_path):
    cfg = single_voter(tmp_path, **{"controller.quorum.election.timeout.ms": 50, "socket.request.max.bytes": 1 << 20})

    async def go():
        node = await _leader(cfg)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", cfg.listener.port)
            writer.write(_parked_fetch(node, 0, 300))   # the observer learns the high watermark
            assert await _read_frames(reader, 1) == [0]
            t0 = asyncio.get_running_loop().time()
            writer.write(_parked_fetch(node, 1, 300) + api_versions_request(3, cid=2))
            assert await _read_frames(reader, 2) == [1, 2]
            assert asyncio.get_running_loop().time() - t0 >= 0.25   # the fetch was held for its long poll
            # a fetch parked, then a produce: the append wakes the fetch, both answered in order
            writer.write(_parked_fetch(node, 3, 5000) + _produce(4, cfg.topic))
            assert await _read_frames(reader, 2) == [3, 4]
            writer.write(_parked_fetch(node, 40, 300))   # the new high watermark
            assert await _read_frames(reader, 1) == [40]
            # half-closed after two requests: both answers still come
            writer.write(_parked_fetch(node, 5, 200) + api_versions_request(3, cid=6))
            writer.write_eof()
            assert await _read_frames(reader, 2) == [5, 6]
            writer.close()
        finally:
            await node.shutdown()
    asyncio.run(go())
