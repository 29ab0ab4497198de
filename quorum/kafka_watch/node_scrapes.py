"""Every node's own view of one cluster, scraped from its JMX exporter endpoint while the
round's DescribeQuorum runs (the records: quorum.kafka_watch.kafka_node_metrics), each endpoint
on a connection of its own kept alive between rounds (metrics_connection).

One endpoint that hangs delays no other node's view: a round waits for its scrapes at most
WAIT_FRACTION of the timeout, and a scrape still running then is a silent node this round (its
answer, if it comes within the timeout, is published with the next round); a node whose scrape
still runs is not asked again until it ends. A scrape older than the timeout is given up at the
next round's start, which names it unanswered within the timeout: the rounds bound the scrapes,
so that a scrape costs no timer of its own."""
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
    answers: dict[int, asyncio.Future]  # node -> its scrape (body, the time it was read in ms)
    since: dict[int, float]              # node -> when its scrape began (an earlier round's, carried over)
    expired: list[int]                   # nodes whose scrape ran out its timeout before this round


class NodeScrapes:
    """The scrapes of one cluster's nodes; used on one event loop."""

    def __init__(self, endpoints: dict[int, str], timeout_ms: int, client: HttpClientConfig = NO_CLIENT_CONFIG):
        self.endpoints = dict(endpoints)
        self.timeout_s = timeout_ms / 1000
        self._conns = {node: MetricsConnection(url, client) for node, url in self.endpoints.items()}
        # node -> a scrape begun in an earlier round, and when
        self._running: dict[int, tuple[asyncio.Future, float]] = {}

    def begin(self) -> Scrapes:
        """Start the scrapes (they run while the caller polls DescribeQuorum)."""
        now = time.monotonic()
        answers: dict[int, asyncio.Future] = {}
        since: dict[int, float] = {}
        expired: list[int] = []
        for node, conn in self._conns.items():
            carried = self._running.pop(node, None)
            if carried is None:
                answers[node], since[node] = conn.begin(), now
            elif carried[0].done() or carried[1] + self.timeout_s > now:
                answers[node], since[node] = carried
            else:
                self._give_up(node, carried[0])
                expired.append(node)
        return Scrapes(now, answers, since, expired)

    async def finish(self, scrapes: Scrapes, cluster_id: str, voter_set: Iterable[int], last: bool = False
                     ) -> tuple[list[events.Metrics], dict[int, str], list[int]]:
        """(records, errors by node, the nodes whose endpoint refused the connection). The `last`
        round of a collector that stops waits for every scrape's own timeout."""
        voters = tuple(voter_set)
        wait_s = self.timeout_s if last else WAIT_FRACTION * self.timeout_s
        left = scrapes.started + wait_s - time.monotonic()
        if left > 0 and not all(answer.done() for answer in scrapes.answers.values()):
            await asyncio.wait(list(scrapes.answers.values()), timeout=left)
        records, errors, refusing = [], {}, []
        for node in scrapes.expired:
            errors[node] = f"no answer within {self.timeout_s * 1000:.0f} ms"
        for node, answer in scrapes.answers.items():
            if not answer.done():
                self._running[node] = (answer, scrapes.since[node])
                errors[node] = f"no answer within {wait_s * 1000:.0f} ms"
                continue
            try:
                text, answered_ms = answer.result()
                records.append(metrics_record(text, cluster_id, node, answered_ms, voters))
            except Exception as e:  # noqa: BLE001 - a node that does not answer is evidence, not a crash
                errors[node] = f"{type(e).__name__}: {e}"
                if refused(e):
                    refusing.append(node)
        return records, errors, sorted(refusing)

    def _give_up(self, node: int, answer: asyncio.Future) -> None:
        if answer.done() and not answer.cancelled():
            answer.exception()  # read, so that no warning says it was not
        answer.cancel()
        self._conns[node].close()  # a late answer would be read as the next scrape's

    def close(self) -> None:
        for node, (answer, _) in self._running.items():
            self._give_up(node, answer)
        self._running.clear()
        for conn in self._conns.values():
            conn.close()
