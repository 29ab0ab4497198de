"""DescribeQuorum straight from the controllers (`--bootstrap-controller`, KIP-919), so that the
collector's path to the quorum runs through no broker.

Every poll asks each known controller at once, each on a connection of its own kept between
polls: the leader answers with the quorum, the others with NOT_LEADER_OR_FOLLOWER, and the first
quorum answer ends the poll. A controller that hangs delays nothing (its question simply stays
unanswered until the timeout), one that is down refuses at once. The controllers named on the
command line are asked, and every voter's controller endpoint the answers name (DescribeQuorum
v2's `nodes`), so a controller added later is asked too. The DescribeQuorum version is agreed
with each controller once (ApiVersions): v2 from Kafka 3.9, v1 before.

A secured controller listener is spoken to as Kafka's tools speak to it: the client properties
of `--command-config`, read by kafka_client_properties (TLS with the truststore's certificates,
a client key for mutual TLS, a SASL login with PLAIN or SCRAM: kafka_client.wire_login). A
refused login or an untrusted certificate is named (authentication_failed, tls_failed), never a
timeout; an authorization failure is Kafka's own answer (CLUSTER_AUTHORIZATION_FAILED: the
principal needs DESCRIBE on the CLUSTER). The cluster id comes from DescribeCluster, which
Kafka's controllers answer only to a principal with ALTER on the CLUSTER: without it the
poller names the refusal (`cluster_id_error`) and `--cluster-id` gives the id instead.
"""
from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from quorum.kafka_client import kafka_failures
from quorum.kafka_client.wire_login import WireLogin, secured
from quorum.kafka_watch.poll_outcome import PollOutcome
from quorum.kafka_watch.quorum_info import DescribeError, kafka_error_name, quorum_info
from quorum.node.peer_client import PeerConnection, PeerUnavailable
from quorum.wire.apis import API_VERSIONS, DESCRIBE_CLUSTER, DESCRIBE_QUORUM, SUPPORTED

MAX_FRAME_BYTES = 1 << 20
CLIENT_ID = "quorum-collector"
CONTROLLER_ENDPOINT_TYPE = 2  # DescribeCluster v1's EndpointType: the controllers (KIP-919)


def _endpoint(text: str) -> tuple[str, int]:
    host, _, port = text.strip().rpartition(":")
    return host.strip("[]"), int(port)


class ControllerQuorumPoller:
    """The same contract as brokers_poller.QuorumPoller: `poll()` never raises and never outlasts
    `timeout_ms`; `close()` ends its connections."""

    def __init__(self, bootstrap_controllers: str, *, timeout_ms: int, client_config: dict[str, Any] | None = None,
                 topic: str = "__cluster_metadata", partition: int = 0, want_cluster_id: bool = True):
        """`client_config`: kafka-python's keyword arguments for the client properties
        (kafka_client_properties.kafka_python_config); none for a PLAINTEXT listener."""
        self.bootstrap = bootstrap_controllers
        self.client_config = dict(client_config or {})
        self.client_id = self.client_config.get("client_id", CLIENT_ID)
        self._login = WireLogin(self.client_config, self.client_id) if secured(self.client_config) else None
        self.cluster_id_error: str | None = None  # why the controllers gave no cluster id
        self.timeout_ms = timeout_ms
        self.topic = topic
        self.partition = partition
        self.want_cluster_id = want_cluster_id
        self._given = [_endpoint(e) for e in bootstrap_controllers.split(",") if e.strip()]
        self._learned: dict[int, tuple[str, int]] = {}  # voter id -> its controller endpoint
        self._versions: dict[tuple[str, int], int] = {}  # endpoint -> DescribeQuorum version agreed
        self._conns: dict[tuple[str, int], PeerConnection] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="controller-poller", daemon=True)
        self._thread.start()

    def poll(self):
        start = time.monotonic()
        future = asyncio.run_coroutine_threadsafe(self._poll(), self._loop)
        try:
            node_id, info, cluster_id = future.result(self.timeout_ms / 1000 + 0.5)
        except DescribeError as e:
            return PollOutcome(int((time.monotonic() - start) * 1000), getattr(e, "answered_by", -1),
                               error_code=e.error_code, error=e.error or "bad_answer", leader_id=e.leader_id,
                               leader_epoch=e.leader_epoch)
        except Exception as e:  # noqa: BLE001 - the cluster is the thing being watched: its failures are data
            future.cancel()
            code, name = _failure(e)
            return PollOutcome(int((time.monotonic() - start) * 1000), error=name, error_code=code, detail=str(e))
        return PollOutcome(int((time.monotonic() - start) * 1000), node_id, info=info, cluster_id=cluster_id)

    def warm_up(self, timeout_s: float) -> str | None:
        """Agree the DescribeQuorum version with every controller before the first poll, so
        that no poll's timeout pays for it; the cluster id when asked for."""
        async def agree_all() -> str | None:
            deadline = time.monotonic() + timeout_s
            endpoints = self._endpoints()
            results = await asyncio.gather(*(self._agree(self._connection(e), deadline) for e in endpoints),
                                           return_exceptions=True)
            for endpoint, version in zip(endpoints, results):
                if isinstance(version, int):
                    self._versions[endpoint] = version
            return await self._cluster_id(-1, deadline) if self.want_cluster_id else None
        try:
            return asyncio.run_coroutine_threadsafe(agree_all(), self._loop).result(timeout_s + 1)
        except Exception:  # noqa: BLE001 - the polls publish what fails
            return None

    def close(self) -> None:
        async def close_all() -> None:
            for conn in self._conns.values():
                conn.close()
        try:
            asyncio.run_coroutine_threadsafe(close_all(), self._loop).result(2)
        except Exception:  # noqa: BLE001 - closing a connection that broke already
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(2)

    def _endpoints(self) -> list[tuple[str, int]]:
        seen = dict.fromkeys(self._given + sorted(self._learned.values()))
        return list(seen)

    async def _poll(self) -> tuple[int, Any, str | None]:
        deadline = time.monotonic() + self.timeout_ms / 1000
        asks = {asyncio.ensure_future(self._ask(e, deadline)): e for e in self._endpoints()}
        error_answer: DescribeError | None = None
        failures: list[BaseException] = []
        try:
            for done in asyncio.as_completed(list(asks), timeout=max(0.0, deadline - time.monotonic())):
                try:
                    info = await done
                except DescribeError as e:
                    error_answer = error_answer or e
                    continue
                except (PeerUnavailable, OSError, asyncio.TimeoutError) as e:
                    failures.append(e)
                    continue
                self._learn(info)
                cluster_id = await self._cluster_id(info.leader_id, deadline) if self.want_cluster_id else None
                return info.leader_id, info, cluster_id
        except asyncio.TimeoutError:
            pass
        finally:
            for task in asks:
                task.cancel()
        if error_answer is not None:  # a controller answered: there is no leader it knows of
            raise error_answer
        refusal = next((f for f in failures if kafka_failures.name_of(f)), None)
        if refusal is not None:  # the collector's own credentials or trust: named, never a timeout
            raise refusal
        if failures and all(_refused(f) for f in failures) and len(failures) == len(asks):
            raise ConnectionRefusedError("every controller refused the connection")
        raise TimeoutError("no controller answered")

    async def _ask(self, endpoint: tuple[str, int], deadline: float):
        conn = self._connection(endpoint)
        version = self._versions.get(endpoint)
        if version is None:
            version = self._versions[endpoint] = await self._agree(conn, deadline)
        cls = SUPPORTED[DESCRIBE_QUORUM].request
        topic = cls.TopicData
        body = cls(topics=[topic(topic_name=self.topic, partitions=[topic.PartitionData(partition_index=self.partition)])])
        answer = await conn.request(DESCRIBE_QUORUM, version, body, max(0.01, deadline - time.monotonic()))
        return quorum_info(answer.to_dict(), self.topic, self.partition)

    async def _agree(self, conn: PeerConnection, deadline: float) -> int:
        """The highest DescribeQuorum version both speak, from the controller's ApiVersions."""
        cls = SUPPORTED[API_VERSIONS].request
        answer = await conn.request(API_VERSIONS, 0, cls(), max(0.01, deadline - time.monotonic()))
        ours = SUPPORTED[DESCRIBE_QUORUM]
        for key in answer.to_dict().get("api_keys", []):
            if key.get("api_key") == DESCRIBE_QUORUM:
                return min(ours.max_version, key.get("max_version", 0))
        raise DescribeError("the controller does not answer DescribeQuorum", -1, "unsupported_version")

    async def _cluster_id(self, leader_id: int, deadline: float) -> str | None:
        """DescribeCluster v1 for the controllers (KIP-919), asked of the leader's endpoint."""
        endpoint = self._learned.get(leader_id) or self._given[0]
        cls = SUPPORTED[DESCRIBE_CLUSTER].request
        try:
            body = cls(include_cluster_authorized_operations=False, endpoint_type=CONTROLLER_ENDPOINT_TYPE)
            answer = (await self._connection(endpoint).request(DESCRIBE_CLUSTER, 1, body,
                                                               max(0.01, deadline - time.monotonic()))).to_dict()
            code = answer.get("error_code", 0)
            self.cluster_id_error = kafka_error_name(code) if code else None
            return answer.get("cluster_id") or None
        except Exception:  # noqa: BLE001 - asked again next poll
            return None

    def _connection(self, endpoint: tuple[str, int]) -> PeerConnection:
        conn = self._conns.get(endpoint)
        if conn is None:
            conn = self._conns[endpoint] = PeerConnection(-1, endpoint[0], endpoint[1], self.client_id,
                                                          MAX_FRAME_BYTES, self._login.open if self._login else None)
        return conn

    def _learn(self, info) -> None:
        """Each voter's controller endpoint, as the answer names it (v2)."""
        voters = {v.replica_id for v in info.voters}
        for node_id, listeners in info.nodes.items():
            if node_id in voters and listeners:
                self._learned[node_id] = (listeners[0].host, listeners[0].port)
        for gone in set(self._learned) - voters:
            del self._learned[gone]


def cluster_id_refusal(error: str, principal: str | None) -> str:
    """What to do when the controllers refuse the cluster id (DescribeCluster)."""
    who = f"User:{principal}" if principal else "the monitor's principal"
    return (f"the controllers give no cluster id (DescribeCluster: {error}): Kafka's controllers answer it only "
            f"to a principal with ALTER on the CLUSTER, which {who} need not have")


def _refused(e: BaseException) -> bool:
    return isinstance(e, ConnectionRefusedError) or "refused" in str(e).lower() or "errno 111" in str(e).lower()


def _failure(e: BaseException) -> tuple[int, str]:
    """(Kafka's error code or -1, the short name) of a poll that got no answer."""
    named = kafka_failures.name_of(e)
    if named is not None:
        cause = e.__cause__ or e
        errno = getattr(cause, "errno", -1)
        return (errno if type(cause).__module__ == "kafka.errors" and isinstance(errno, int) else -1), named
    if isinstance(e, ConnectionRefusedError):
        return -1, "connection_refused"
    if isinstance(e, (TimeoutError, asyncio.TimeoutError)):
        return -1, "timeout"
    if isinstance(e, OSError):
        return -1, "connection_error"
    return -1, "client_error"



