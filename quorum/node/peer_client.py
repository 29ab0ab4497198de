"""Outbound Kafka-protocol connections to the other voters.

One `PeerConnection` per (peer, lane): Fetch gets its own lane because the leader holds a
fetch up to its long-poll time and responses on one connection come back in order, so a
Vote or DescribeQuorum must not queue behind it. A connection is opened on first use,
re-opened after any failure, and every request has a deadline; a request that cannot be
answered resolves its future with an exception and the caller moves on.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any

from quorum.node.faults import Faults
from quorum.wire.apis import FETCH, SUPPORTED
from quorum.wire.codec import WireError, decode_response, encode_request, read_frame, response_correlation_id

log = logging.getLogger(__name__)


class PeerUnavailable(ConnectionError):
    pass


class PeerConnection:
    def __init__(self, peer_id: int, host: str, port: int, client_id: str, max_frame_bytes: int):
        self.peer_id = peer_id
        self.host, self.port = host, port
        self.client_id = client_id
        self.max_frame_bytes = max_frame_bytes
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task | None = None
        self._inflight: dict[int, tuple[int, int, asyncio.Future]] = {}
        self._correlation = itertools.count(1)
        self._connect_lock = asyncio.Lock()

    async def _ensure_connected(self, timeout_s: float) -> asyncio.StreamWriter:
        async with self._connect_lock:
            if self._writer is not None and not self._writer.is_closing():
                return self._writer
            reader, writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port), timeout_s)
            self._writer = writer
            self._reader_task = asyncio.create_task(self._read_loop(reader, writer))
            return writer

    async def request(self, api_key: int, version: int, body: Any, timeout_s: float) -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        try:
            writer = await self._ensure_connected(timeout_s)
        except (OSError, asyncio.TimeoutError) as e:
            raise PeerUnavailable(f"cannot connect to node {self.peer_id} at {self.host}:{self.port}: {e}") from None
        cid = next(self._correlation)
        fut = loop.create_future()
        self._inflight[cid] = (api_key, version, fut)
        try:
            writer.write(encode_request(body, version, cid, self.client_id))
            remaining = max(deadline - loop.time(), 0.001)
            return await asyncio.wait_for(fut, remaining)
        except asyncio.TimeoutError:
            raise PeerUnavailable(f"node {self.peer_id}: no answer within {timeout_s:.1f}s") from None
        except (OSError, ConnectionError) as e:
            self.close()
            raise PeerUnavailable(f"node {self.peer_id}: {e}") from None
        finally:
            self._inflight.pop(cid, None)

    async def _read_loop(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        error: Exception = ConnectionResetError("connection closed")
        try:
            while True:
                payload = await read_frame(reader, self.max_frame_bytes)
                if payload is None:
                    break
                cid = response_correlation_id(payload)
                entry = self._inflight.get(cid)
                if entry is None:
                    continue  # the caller gave up on it
                api_key, version, fut = entry
                if not fut.done():
                    try:
                        fut.set_result(decode_response(SUPPORTED[api_key], version, payload))
                    except WireError as e:
                        fut.set_exception(e)
        except (OSError, WireError, asyncio.IncompleteReadError) as e:
            error = e
        except asyncio.CancelledError:
            pass
        finally:
            if self._writer is writer:
                self._writer = None
            writer.close()
            for _, _, fut in list(self._inflight.values()):
                if not fut.done():
                    fut.set_exception(PeerUnavailable(f"node {self.peer_id}: {error}"))

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._reader_task is not None:
            self._reader_task.cancel()


class PeerClients:
    """Connections to every voter this node may talk to, with fault injection applied."""

    def __init__(self, node_id: int, peers: dict[int, tuple[str, int]], faults: Faults, max_frame_bytes: int):
        self.node_id = node_id
        self.peers = peers
        self.faults = faults
        self._conns: dict[tuple[int, str], PeerConnection] = {}
        self.max_frame_bytes = max_frame_bytes

    def knows(self, peer: int) -> bool:
        return peer in self.peers

    async def request(self, peer: int, api_key: int, version: int, body: Any, timeout_s: float) -> Any:
        if peer not in self.peers:
            raise PeerUnavailable(f"node {peer} is not a voter this node knows the address of")
        # A cut link: the request (or its answer) vanishes. Nothing reaches the core, whose own
        # request deadline then expires exactly as for a real partition.
        if self.faults.drops_outbound(peer):
            raise PeerUnavailable(f"node {peer}: link cut by fault injection")
        lane = "fetch" if api_key == FETCH else "control"
        conn = self._conns.get((peer, lane))
        if conn is None:
            host, port = self.peers[peer]
            conn = PeerConnection(peer, host, port, f"quorum-node-{self.node_id}", self.max_frame_bytes)
            self._conns[(peer, lane)] = conn
        response = await conn.request(api_key, version, body, timeout_s)
        if self.faults.drops_inbound(peer):
            raise PeerUnavailable(f"node {peer}: link cut by fault injection")
        return response

    def close(self) -> None:
        for c in self._conns.values():
            c.close()
        self._conns.clear()
