"""The node's listener facing bad clients: oversized frames, garbage, unknown APIs and
versions close the connection (ApiVersions in an unknown version gets its error answer);
the node keeps serving everyone else. Runs a real single-voter node in-process."""
from __future__ import annotations

import asyncio
import struct

from quorum.local_kafka.loopback_ports import free_port
from quorum.node.config import from_mapping
from quorum.node.node import QuorumNode
from quorum.wire import apis as w
from quorum.wire.codec import encode_request


def single_voter(tmp_path, **extra):
    port = free_port()
    return from_mapping({"node.id": 1, "cluster.id": "c", "controller.quorum.voters": f"1@127.0.0.1:{port}",
                         "listener": f"127.0.0.1:{port}", "data.dir": str(tmp_path / "d"),
                         "socket.request.max.bytes": 4096, **extra})


async def exchange(port: int, data: bytes, read: bool = True) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(65536), 5) if read else b""
    finally:
        writer.close()


def api_versions_request(version: int, cid: int = 9) -> bytes:
    return encode_request(w.ApiVersionsRequest(client_software_name="t", client_software_version="1"), version,
                          cid, "probe")


def test_bad_input_closes_the_connection_and_the_node_keeps_serving(tmp_path):
    cfg = single_voter(tmp_path)

    async def go():
        node = QuorumNode(cfg, seed=1)
        await node.start()
        port = cfg.listener.port
        try:
            # a frame far above socket.request.max.bytes: closed before its body is read
            assert await exchange(port, struct.pack(">i", 1 << 30) + b"x" * 100) == b""
            # garbage after a valid-looking header
            assert await exchange(port, struct.pack(">i", 20) + struct.pack(">hhi", w.VOTE, 0, 1) + b"\xff" * 12) == b""
            # unknown api key, unsupported version of a known api
            assert await exchange(port, struct.pack(">i", 10) + struct.pack(">hhi", 999, 0, 1) + b"\x00\x00") == b""
            assert await exchange(port, struct.pack(">i", 10) + struct.pack(">hhi", w.FETCH, 2, 1) + b"\x00\x00") == b""
            assert node.server.rejected == 4
            # ApiVersions in a version from the future: UNSUPPORTED_VERSION with our ranges
            raw = struct.pack(">hhi", w.API_VERSIONS, 77, 5) + b"\x00\x05probe\x00"
            answer = await exchange(port, struct.pack(">i", len(raw)) + raw)
            resp = w.ApiVersionsResponse.decode(answer[4:], version=0, header=True)
            assert resp.error_code == 35 and resp.header.correlation_id == 5
            # and a well-behaved client is still served
            answer = await exchange(port, api_versions_request(3))
            ok = w.ApiVersionsResponse.decode(answer[4:], version=3, header=True)
            assert ok.error_code == 0 and {k.api_key for k in ok.api_keys} >= {1, 52, 53, 54, 55}
            assert node.core.is_leader or node.core.state_name in ("candidate", "prospective", "unattached")
        finally:
            await node.shutdown()
    asyncio.run(go())


def test_single_voter_elects_itself_and_commits_appends(tmp_path):
    cfg = single_voter(tmp_path, **{"controller.quorum.election.timeout.ms": 50})

    async def go():
        node = QuorumNode(cfg, seed=2)
        await node.start()
        try:
            for _ in range(200):
                if node.core.is_leader:
                    break
                await asyncio.sleep(0.02)
            first, last = await asyncio.wait_for(node.append([b"a", b"b", b"c"]), 5)
            assert last == first + 2 and node.core.high_watermark > last
        finally:
            await node.shutdown()
    asyncio.run(go())
