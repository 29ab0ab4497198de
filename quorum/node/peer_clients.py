"""The node's connections to the other voters: one wire connection per (peer, lane), Fetch on a
lane of its own (see quorum.kafka_client.wire_connection), with the node's fault injection applied
to every request and answer."""
from __future__ import annotations

import asyncio
from typing import Any

from quorum.kafka_client.wire_connection import Callback, Codec, PeerConnection, PeerUnavailable, settle
from quorum.node.faults import Faults
from quorum.wire.apis import FETCH


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

    def send(self, peer: int, codec: Codec, timeout_s: float, callback: Callback) -> None:
        """Send a request to `peer`; `callback` gets the answer or PeerUnavailable, once."""
        if peer not in self.peers:
            callback(None, PeerUnavailable(f"node {peer} is not a voter this node knows the address of"))
            return
        # A cut link: the request (or its answer) vanishes. Nothing reaches the core, whose own
        # request deadline then expires exactly as for a real partition.
        if self.faults.drops_outbound(peer):
            callback(None, PeerUnavailable(f"node {peer}: link cut by fault injection"))
            return
        lane = "fetch" if codec.api_key == FETCH else "control"
        conn = self._conns.get((peer, lane))
        if conn is None:
            host, port = self.peers[peer]
            conn = PeerConnection(peer, host, port, f"quorum-node-{self.node_id}", self.max_frame_bytes)
            self._conns[(peer, lane)] = conn

        def answered(response: Any, error: BaseException | None) -> None:
            if error is None and self.faults.drops_inbound(peer):
                response, error = None, PeerUnavailable(f"node {peer}: link cut by fault injection")
            callback(response, error)

        conn.send(codec, timeout_s, answered)

    async def request(self, peer: int, api_key: int, version: int, body: Any, timeout_s: float) -> Any:
        fut = asyncio.get_running_loop().create_future()
        self.send(peer, Codec(api_key, version, body), timeout_s, settle(fut))
        return await fut

    def close(self) -> None:
        for c in self._conns.values():
            c.close()
        self._conns.clear()
