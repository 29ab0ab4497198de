"""One watched cluster inside a collector: its rounds at a fixed cadence, each giving exactly one
poll record (and, with node metrics, every answering node's `metrics` record), published as
they come. A coroutine of its own on the collector's event loop, so a cluster that hangs,
refuses or cannot be resolved delays no other cluster's records."""
from __future__ import annotations

import asyncio
import logging
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable

from quorum import events
from quorum.http_client_config import NO_CLIENT_CONFIG, HttpClientConfig
from quorum.kafka_client import kafka_failures
from quorum.kafka_watch.cluster_poller import ClusterPoller
from quorum.kafka_watch.controller_poller import cluster_id_refusal
from quorum.kafka_watch.fleet_file import WatchedCluster
from quorum.kafka_watch.node_scrapes import NodeScrapes
from quorum.kafka_watch.poll_outcome import PollOutcome
from quorum.kafka_watch.poll_records import record_of

log = logging.getLogger("quorum.kafka_watch.collector")

WARM_UP_S = 10.0
# a fleet's rounds start in this many slots of the interval: spread enough that a second's work
# does not come in one burst, few enough that the event loop still wakes for many rounds at once
# (each wake-up costs; a slot per cluster took 45 % more CPU at 500 clusters)
SPREAD_SLOTS = 4  # how long a cluster whose id is not known is tried before its first poll


@dataclass(frozen=True)
class ClusterClients:
    """A cluster's clients' settings, read from its files."""
    watched: dict[str, Any] = field(default_factory=dict)  # kafka-python-style settings (wire_login reads them)
    principal: str | None = None                           # for the explanations of refusals
    node_metrics: HttpClientConfig = NO_CLIENT_CONFIG


@dataclass
class Poll:
    """What one round gave: the DescribeQuorum outcome, the records to publish (none while no
    cluster id is known to key them by), and the nodes whose metrics endpoint did not answer."""
    outcome: PollOutcome
    records: list[events.Record]
    silent_nodes: dict[int, str]


class ClusterRound:
    """One round of one cluster: DescribeQuorum and, with node metrics, every node's own view,
    scraped while DescribeQuorum runs. The nodes' records carry the voter set of the last answer
    (raft-metrics gives only its size); the poll's record names the nodes whose metrics endpoint
    refused the connection (their process is gone: evidence the job uses at once)."""

    def __init__(self, cluster: WatchedCluster, clients: ClusterClients):
        self.cluster = cluster
        self.cluster_id = cluster.cluster_id
        self.poller = ClusterPoller(brokers=cluster.bootstrap_server, controllers=cluster.bootstrap_controller,
                                    timeout_ms=cluster.timeout_ms, client_config=clients.watched,
                                    want_cluster_id=not cluster.cluster_id, name=cluster.name)
        self.scrapes = NodeScrapes(dict(cluster.node_metrics), cluster.timeout_ms, clients.node_metrics) \
            if cluster.node_metrics else None
        self.voters: tuple[int, ...] = ()

    async def warm_up(self) -> None:
        """Connect before the first round (and learn the cluster's id, when not given)."""
        timeout_s = WARM_UP_S if not self.cluster_id else self.cluster.timeout_ms / 1000
        self._learn_id(await self.poller.warm_up(timeout_s))

    async def poll(self, last: bool = False) -> Poll:
        """One round; the `last` one (of `--count`) waits for every endpoint's answer."""
        scrapes = self.scrapes.begin() if self.scrapes else None
        outcome = await self.poller.poll()
        self._learn_id(outcome.cluster_id)
        if outcome.info is not None:
            self.voters = tuple(v.replica_id for v in outcome.info.voters)
        now_ms = int(time.time() * 1000)  # the answer's time, before the round waits for the endpoints
        metrics: list[events.Record] = []
        silent: dict[int, str] = {}
        refusing: list[int] = []
        if scrapes is not None:
            metrics, silent, refusing = await self.scrapes.finish(scrapes, self.cluster_id or "", self.voters, last)
        if not self.cluster_id:
            return Poll(outcome, [], silent)
        record = record_of(outcome, self.cluster_id, self.poller.bootstrap, now_ms, self.cluster.interval_ms,
                           refused_nodes=refusing)
        return Poll(outcome, [record] + metrics, silent)

    def _learn_id(self, cluster_id: str | None) -> None:
        if cluster_id and not self.cluster_id:
            self.cluster_id = cluster_id
            self.poller.want_cluster_id = False

    def close(self) -> None:
        self.poller.close()
        if self.scrapes:
            self.scrapes.close()


class ChangeLog:
    """Logs each change of a cluster's polls' outcome and of its nodes' metrics endpoints, once each."""

    def __init__(self, name: str, path: str, principal: str | None):
        self.name, self.path, self.principal = name, path, principal
        self.last_error: str | None = None
        self.silent_nodes: set[int] = set()

    def outcome(self, outcome: PollOutcome) -> None:
        if outcome.info is None and outcome.error != self.last_error:
            explained = kafka_failures.explain(outcome.error, self.principal)
            log.warning("%sDescribeQuorum on %s: %s (error code %d, %d ms)%s", self._who(), self.path, outcome.error,
                        outcome.error_code, outcome.latency_ms, f": {explained}" if explained != outcome.error else "")
        elif outcome.info is not None and self.last_error is not None:
            log.info("%sDescribeQuorum on %s answers again (leader %d)", self._who(), self.path, outcome.info.leader_id)
        self.last_error = None if outcome.info is not None else outcome.error

    def metrics_endpoints(self, silent: dict[int, str]) -> None:
        for node in silent.keys() - self.silent_nodes:
            log.warning("%snode %d's metrics endpoint: %s", self._who(), node, silent[node])
        for node in self.silent_nodes - silent.keys():
            log.info("%snode %d's metrics endpoint answers again", self._who(), node)
        self.silent_nodes = set(silent)

    def _who(self) -> str:
        return f"{self.name}: " if self.name != self.path else ""


class ClusterWatch:
    """A cluster's rounds until cancelled or `count` rounds; `publish` takes each record."""

    def __init__(self, cluster: WatchedCluster, clients: ClusterClients, publish: Callable[[events.Record], None],
                 count: int = 0, spread: bool = False):
        """`spread`: start the rounds at an offset within the interval that the cluster's name
        gives, so that a fleet's clusters are not all polled at the same instant (as Prometheus
        spreads its scrape loops): the event loop's work comes evenly, not in a burst a second."""
        self.cluster = cluster
        self.round = ClusterRound(cluster, clients)
        self.publish = publish
        self.count = count
        self.changes = ChangeLog(cluster.name, cluster.path, clients.principal)
        self.principal = clients.principal
        self.polls = self.answered = 0
        self.last_record_at: float | None = None  # monotonic time of the last record published
        self.started_at = time.monotonic()
        slot = zlib.crc32(cluster.name.encode()) % SPREAD_SLOTS
        self.offset_s = slot / SPREAD_SLOTS * cluster.interval_ms / 1000 if spread else 0.0

    @property
    def answering(self) -> bool:
        return self.changes.last_error is None and self.polls > 0

    def late_s(self, now: float) -> float:
        """How far behind its cadence the cluster's records are (0: on time)."""
        since = now - (self.last_record_at or self.started_at + self.offset_s)
        return max(0.0, since - 2 * self.cluster.interval_ms / 1000)

    async def run(self) -> None:
        try:
            await self.round.warm_up()
            if not self.round.cluster_id:
                log.info("%s: cluster id not known yet (asked at every poll until one answers)", self.cluster.name)
                if self.round.poller.cluster_id_error:
                    log.warning("%s: %s; give --cluster-id", self.cluster.name,
                                cluster_id_refusal(self.round.poller.cluster_id_error, self.principal))
            elif not self.cluster.cluster_id:
                log.info("cluster id %s", self.round.cluster_id)
            interval_s = self.cluster.interval_ms / 1000
            next_poll = time.monotonic() + self.offset_s
            while self.count <= 0 or self.polls < self.count:
                await asyncio.sleep(max(0.0, next_poll - time.monotonic()))
                # fixed cadence; a late round is not followed by a burst of catch-up rounds
                next_poll = max(next_poll + interval_s, time.monotonic())
                result = await self.round.poll(last=0 < self.count == self.polls + 1)
                self._took(result)
        finally:
            self.round.close()

    def _took(self, result: Poll) -> None:
        outcome = result.outcome
        self.polls += 1
        # an error answer of the quorum's own (NOT_LEADER_OR_FOLLOWER: no leader) is an answer;
        # no answer, or a refusal of the collector's credentials, is a failed poll
        self.answered += outcome.info is not None or (outcome.error_code >= 0
                                                      and outcome.error not in kafka_failures.COLLECTOR_SIDE)
        self.changes.outcome(outcome)
        for record in result.records:
            self.publish(record)
        if result.records:
            self.last_record_at = time.monotonic()
        self.changes.metrics_endpoints(result.silent_nodes)
