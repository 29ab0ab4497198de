"""The node's own requests to its peers, as part of `QuorumNode` (node.py): the core's Vote,
BeginQuorumEpoch, EndQuorumEpoch and Fetch requests go out on peer connections (a follower's
Fetch in the lean v17 codec) and their answers come back through the inbox, a fetch's after
any replication throttle."""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from typing import Any

from quorum.kafka_client.wire_connection import Codec, PeerUnavailable
from quorum.raft import messages as m
from quorum.wire import apis as w
from quorum.wire import fetch_codec, translate

log = logging.getLogger("quorum.node.node")   # its lines are the node's


class PeerRequests:
    """QuorumNode's requests to its peers, mixed into it: `self` is the node."""

    def _send_request(self, msg: m.Message) -> None:
        if isinstance(msg.body, m.FetchRequest) and w.FETCH_VERSION == fetch_codec.VERSION:
            api_key, version = w.FETCH, fetch_codec.VERSION
            codec: Codec = _LeanFetch(msg.body, self.directory_id, self.names)
        else:
            codec = Codec(*translate.request_to_wire(msg.body))
            api_key, version = codec.api_key, codec.version

        def answered(resp: Any, error: BaseException | None) -> None:
            if error is not None:   # the core's own deadline handles the silence
                if not isinstance(error, PeerUnavailable):
                    log.warning("node %d: request to %d failed: %r", self.config.node_id, msg.destination, error)
                return
            try:
                core_resp = resp if isinstance(codec, _LeanFetch) else translate.response_from_wire(
                    api_key, version, resp, self.names)
            except Exception as e:
                log.warning("node %d: request to %d failed: %r", self.config.node_id, msg.destination, e)
                return
            if isinstance(core_resp, m.FetchResponse) and self.faults.throttle_records_per_s > 0:
                self._spawn(self._post_throttled(msg, core_resp), "throttle")
            else:
                self._post_answer(msg, core_resp)

        self.peers.send(msg.destination, codec, self.config.request_timeout_ms / 1000, answered)

    def _post_answer(self, request: m.Message, core_resp: m.Response) -> None:
        self._post(("msg", m.Message(request.destination, self.config.node_id, request.correlation_id, core_resp)))

    async def _post_throttled(self, request: m.Message, resp: m.FetchResponse) -> None:
        self._post_answer(request, await self._throttled(resp))

    async def _throttled(self, resp: m.FetchResponse) -> m.FetchResponse:
        """The fetched records a follower under a replication throttle keeps (the rest it fetches
        again later), after the throttle's wait."""
        parts = [p for t in resp.responses for p in t.partitions]
        offered = sum(len(p.records) for p in parts)
        if offered == 0:
            return resp
        kept, wait_s = self.faults.take_records(offered, time.monotonic())
        if wait_s > 0:
            await asyncio.sleep(wait_s)
        if kept == offered:
            return resp
        topics = []
        for t in resp.responses:
            trimmed = []
            for p in t.partitions:
                trimmed.append(dataclasses.replace(p, records=p.records[:kept]))
                kept -= len(trimmed[-1].records)
            topics.append(dataclasses.replace(t, partitions=tuple(trimmed)))
        return dataclasses.replace(resp, responses=tuple(topics))


class _LeanFetch(Codec):
    """A follower's Fetch in the lean v17 codec: the core's request to bytes, the answer
    straight to the core's response."""

    def __init__(self, request: m.FetchRequest, directory_id: Any, names: translate.TopicNames) -> None:
        super().__init__(w.FETCH, fetch_codec.VERSION, request)
        self.directory_id, self.names = directory_id, names

    def encode(self, correlation_id: int, client_id: str) -> bytes:
        return fetch_codec.encode_request(self.body, correlation_id, client_id, self.directory_id)

    def decode(self, payload: bytes) -> m.FetchResponse:
        return fetch_codec.read_response(payload, self.names)
