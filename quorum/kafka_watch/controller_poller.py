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
from typing import Any

from quorum.kafka_watch.cluster_poller import ClusterPoller
from quorum.kafka_watch.poll_outcome import PollOutcome


class BlockingPoller:
    """The collector's poller (cluster_poller.ClusterPoller) for callers on plain threads, with
    the contract of brokers_poller.QuorumPoller: `poll()` never raises and never outlasts
    `timeout_ms`; `close()` ends its connections. Give `brokers` or `controllers`."""

    def __init__(self, *, brokers: str | None = None, controllers: str | None = None, timeout_ms: int,
                 client_config: dict[str, Any] | None = None, topic: str = "__cluster_metadata", partition: int = 0,
                 want_cluster_id: bool = True):
        """`client_config`: kafka-python's keyword arguments for the client properties
        (kafka_client_properties.kafka_python_config); none for a PLAINTEXT listener."""
        self.client_config = dict(client_config or {})
        self.timeout_ms = timeout_ms
        self._poller = ClusterPoller(brokers=brokers, controllers=controllers, timeout_ms=timeout_ms,
                                     client_config=self.client_config, topic=topic, partition=partition,
                                     want_cluster_id=want_cluster_id)
        self.bootstrap = self._poller.bootstrap
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="controller-poller", daemon=True)
        self._thread.start()

    @property
    def want_cluster_id(self) -> bool:
        return self._poller.want_cluster_id

    @want_cluster_id.setter
    def want_cluster_id(self, value: bool) -> None:
        self._poller.want_cluster_id = value

    @property
    def cluster_id_error(self) -> str | None:
        """Why the controllers gave no cluster id."""
        return self._poller.cluster_id_error

    def poll(self) -> PollOutcome:
        return asyncio.run_coroutine_threadsafe(self._poller.poll(), self._loop).result()

    def warm_up(self, timeout_s: float) -> str | None:
        """Agree the DescribeQuorum version before the first poll; the cluster id when asked for."""
        return asyncio.run_coroutine_threadsafe(self._poller.warm_up(timeout_s), self._loop).result()

    def close(self) -> None:
        async def close() -> None:
            self._poller.close()
        try:
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(2)
        except Exception:  # noqa: BLE001 - closing a connection that broke already
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(2)


class ControllerQuorumPoller(BlockingPoller):
    """The controllers' path (`--bootstrap-controller`) for callers on plain threads."""

    def __init__(self, bootstrap_controllers: str, **kw):
        super().__init__(controllers=bootstrap_controllers, **kw)


def cluster_id_refusal(error: str, principal: str | None) -> str:
    """What to do when the controllers refuse the cluster id (DescribeCluster)."""
    who = f"User:{principal}" if principal else "the monitor's principal"
    return (f"the controllers give no cluster id (DescribeCluster: {error}): Kafka's controllers answer it only "
            f"to a principal with ALTER on the CLUSTER, which {who} need not have")
