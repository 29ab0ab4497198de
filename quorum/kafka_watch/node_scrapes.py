"""Every node's own view of one cluster, scraped from its JMX exporter endpoint while the
round's DescribeQuorum runs (the records: quorum.kafka_watch.kafka_node_metrics), each endpoint
on a connection of its own kept alive between rounds (metrics_connection).

One endpoint that hangs delays no other node's view: a round waits for its scrapes at most
WAIT_FRACTION of the timeout, and a scrape still running then is a silent node this round (its
answer, if it comes within the timeout, is published with the next round); a node whose scrape
still runs is not asked again until it ends."""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Iterable

from quorum import events
from quorum.http_client_config import NO_CLIENT_CONFIG, HttpClientConfig
from quorum.kafka_watch.kafka_node_metrics import WAIT_FRACTION, metrics_record, refused
from quorum.kafka_watch.metrics_connection import MetricsConnection


@dataclass
class Scrapes:
    """One round of scrapes, begun while DescribeQuorum runs."""
    started: float
    tasks: dict[int, asyncio.Task]


class NodeScrapes:
    """The scrapes of one cluster's nodes; used on one event loop."""

    def __init__(self, endpoints: dict[int, str], timeout_ms: int, client: HttpClientConfig = NO_CLIENT_CONFIG):
        self.endpoints = dict(endpoints)
        self.timeout_s = timeout_ms / 1000
        self._conns = {node: MetricsConnection(url, client) for node, url in self.endpoints.items()}
        self._running: dict[int, asyncio.Task] = {}  # node -> a scrape begun in an earlier round

    def begin(self) -> Scrapes:
        """Start the scrapes (they run while the caller polls DescribeQuorum)."""
        tasks = {node: self._running.pop(node, None) or asyncio.ensure_future(self._scrape(conn))
                 for node, conn in self._conns.items()}
        return Scrapes(time.monotonic(), tasks)

    async def _scrape(self, conn: MetricsConnection) -> tuple[str, int]:
        text = await conn.get(self.timeout_s)
        return text, int(time.time() * 1000)  # the time the values are from

    async def finish(self, scrapes: Scrapes, cluster_id: str, voter_set: Iterable[int], last: bool = False
                     ) -> tuple[list[events.Metrics], dict[int, str], list[int]]:
        """(records, errors by node, the nodes whose endpoint refused the connection). The `last`
        round of a collector that stops waits for every scrape's own timeout."""
        voters = tuple(voter_set)
        wait_s = self.timeout_s if last else WAIT_FRACTION * self.timeout_s
        left = scrapes.started + wait_s - time.monotonic()
        if left > 0:
            await asyncio.wait(list(scrapes.tasks.values()), timeout=left)
        records, errors, refusing = [], {}, []
        for node, task in scrapes.tasks.items():
            if not task.done():
                self._running[node] = task
                errors[node] = f"no answer within {wait_s * 1000:.0f} ms"
                continue
            try:
                text, answered_ms = task.result()
                records.append(metrics_record(text, cluster_id, node, answered_ms, voters))
            except (asyncio.TimeoutError, TimeoutError):
                errors[node] = f"no answer within {self.timeout_s * 1000:.0f} ms"
            except Exception as e:  # noqa: BLE001 - a node that does not answer is evidence, not a crash
                errors[node] = f"{type(e).__name__}: {e}"
                if refused(e):
                    refusing.append(node)
        return records, errors, sorted(refusing)

    def close(self) -> None:
        for task in self._running.values():
            task.cancel()
        for conn in self._conns.values():
            conn.close()
