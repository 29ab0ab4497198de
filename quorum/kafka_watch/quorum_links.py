"""A watched cluster's nodes as the collector speaks to them: one kept-alive connection per
node on the project's asyncio wire client (quorum.kafka_client.wire_connection), logged in as the client
properties say (kafka_client.wire_login: TLS, SASL), and the DescribeQuorum version agreed with
each node once (ApiVersions: v2 from Kafka 3.9, v1 before).

A node that hangs keeps its connection: its requests expire at their deadline and the next
ones go out on the same connection; one that goes away is connected to again at the next ask."""
from __future__ import annotations

import asyncio
import struct
import time
from typing import Any

from quorum.kafka_client.wire_connection import Codec, PeerConnection
from quorum.kafka_client.wire_login import WireLogin, secured
from quorum.kafka_watch.quorum_info import DescribeError, QuorumInfo, answer_fields, quorum_info
from quorum.wire.apis import API_VERSIONS, DESCRIBE_CLUSTER, DESCRIBE_QUORUM, SUPPORTED

MAX_FRAME_BYTES = 1 << 20
CONTROLLER_ENDPOINT_TYPE = 2  # DescribeCluster v1's EndpointType: the controllers (KIP-919)

Endpoint = tuple[str, int]


def endpoint(text: str) -> Endpoint:
    """host:port (an IPv6 host in brackets) as (host, port)."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {text.strip()!r}")
    return host.strip("[]"), int(port)


def endpoints(text: str) -> list[Endpoint]:
    """The comma-separated host:port list of a bootstrap option."""
    return [endpoint(e) for e in text.split(",") if e.strip()]


def remaining(deadline: float) -> float:
    return max(0.01, deadline - time.monotonic())


class _Encoded(Codec):
    """A request that is the same every poll, encoded once: each send patches in its
    correlation id (the framed header: size, api key, api version, correlation id)."""

    def __init__(self, api_key: int, version: int, body: Any, client_id: str):
        super().__init__(api_key, version, body)
        self._frame = bytearray(super().encode(0, client_id))

    def encode(self, correlation_id: int, client_id: str) -> bytes:
        _CORRELATION.pack_into(self._frame, 8, correlation_id)
        return bytes(self._frame)


_CORRELATION = struct.Struct(">i")


class QuorumLinks:
    """The connections to one cluster's nodes; every call is made on the event loop that runs
    the cluster's polls."""

    def __init__(self, client_config: dict[str, Any] | None, client_id: str, topic: str = "__cluster_metadata",
                 partition: int = 0):
        config = dict(client_config or {})
        self.client_id = config.get("client_id", client_id)
        self.topic, self.partition = topic, partition
        self._login = WireLogin(config, self.client_id) if secured(config) else None
        self._versions: dict[Endpoint, int] = {}  # endpoint -> DescribeQuorum version agreed
        self._conns: dict[Endpoint, PeerConnection] = {}
        self._describe_codecs: dict[int, _Encoded] = {}  # version -> the request, encoded once

    def ask_describe(self, at: Endpoint, deadline: float) -> asyncio.Future:
        """The quorum as the node at `at` describes it, as a future (an error answer: DescribeError).
        Once the version is agreed, the request goes out at once and its answer is read in the
        connection's own callback: no task per poll."""
        version = self._versions.get(at)
        if version is None:
            return asyncio.ensure_future(self._agree_then_describe(at, deadline))
        fut = asyncio.get_running_loop().create_future()

        def answered(response: Any, error: BaseException | None) -> None:
            if fut.done():
                return  # the poll gave up on it
            if error is not None:
                fut.set_exception(error)
                return
            try:
                fut.set_result(quorum_info(answer_fields(response), self.topic, self.partition))
            except Exception as e:  # noqa: BLE001 - DescribeError: an answer, given to the poll as such
                fut.set_exception(e)
        self.connection(at).send(self._describe_codec(version), remaining(deadline), answered)
        return fut

    async def _agree_then_describe(self, at: Endpoint, deadline: float) -> QuorumInfo:
        self._versions[at] = await self.agree(at, deadline)
        return await self.ask_describe(at, deadline)

    def _describe_codec(self, version: int) -> "_Encoded":
        codec = self._describe_codecs.get(version)
        if codec is None:
            cls = SUPPORTED[DESCRIBE_QUORUM].request
            topic = cls.TopicData
            body = cls(topics=[topic(topic_name=self.topic,
                                     partitions=[topic.PartitionData(partition_index=self.partition)])])
            codec = self._describe_codecs[version] = _Encoded(DESCRIBE_QUORUM, version, body, self.client_id)
        return codec

    async def agree(self, at: Endpoint, deadline: float) -> int:
        """The highest DescribeQuorum version both speak, from the node's ApiVersions."""
        cls = SUPPORTED[API_VERSIONS].request
        answer = await self.connection(at).request(API_VERSIONS, 0, cls(), remaining(deadline))
        ours = SUPPORTED[DESCRIBE_QUORUM]
        for key in answer.to_dict().get("api_keys", []):
            if key.get("api_key") == DESCRIBE_QUORUM:
                return min(ours.max_version, key.get("max_version", 0))
        raise DescribeError("the node does not answer DescribeQuorum", -1, "unsupported_version")

    async def describe_cluster(self, at: Endpoint, deadline: float, controllers: bool) -> dict[str, Any]:
        """DescribeCluster's answer: v0 of a broker, v1 asking a controller for the controllers."""
        cls = SUPPORTED[DESCRIBE_CLUSTER].request
        if controllers:
            body, version = cls(include_cluster_authorized_operations=False,
                                endpoint_type=CONTROLLER_ENDPOINT_TYPE), 1
        else:
            body, version = cls(include_cluster_authorized_operations=False), 0
        return (await self.connection(at).request(DESCRIBE_CLUSTER, version, body, remaining(deadline))).to_dict()

    def connection(self, at: Endpoint) -> PeerConnection:
        conn = self._conns.get(at)
        if conn is None:
            conn = self._conns[at] = PeerConnection(-1, at[0], at[1], self.client_id, MAX_FRAME_BYTES,
                                                    self._login.open if self._login else None)
        return conn

    def forget(self, keep: set[Endpoint]) -> None:
        """Closes the connections to nodes no longer asked."""
        for at in set(self._conns) - keep:
            self._conns.pop(at).close()
            self._versions.pop(at, None)

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
