"""Each Apache Kafka node's own view of its KRaft quorum, read from the Prometheus JMX exporter
endpoint Kafka shops already run beside every node (rules: deploy/kafka-jmx-exporter.yml), and
turned into the contract's `metrics` records: raft-metrics' current-state, current-leader,
current-epoch, log-end-offset and high-watermark, and KIP-835's LastAppliedRecordOffset,
LastAppliedRecordTimestamp, LastAppliedRecordLagMs and LastCommittedRecordOffset.

With these beside DescribeQuorum, the job tells for a Kafka quorum what it tells for the
project's nodes: a voter that answers and campaigns is cut off (`partitioned`), one whose
endpoint answers nothing is `down`. An endpoint that does not answer gives no record: silence is
the evidence.

An agent served over HTTPS with basic auth (its `httpServer.ssl` and
`httpServer.authentication.basic` settings) is read with a Prometheus HTTP client config file
(quorum/http_client_config.py): its CA, its credentials. A refused password or certificate is
that node's error (`HTTPError: HTTP Error 401: Unauthorized`, `... CERTIFICATE_VERIFY_FAILED ...`).
"""
from __future__ import annotations

import math
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Iterable

from prometheus_client.parser import text_string_to_metric_families

from quorum import events
from quorum.http_client_config import NO_CLIENT_CONFIG, HttpClientConfig

RAFT = "kafka_server_raft_metrics_"
# the raft-metrics gauges metrics_record reads (current_state: one series, the state a label)
RAFT_GAUGES = ("current_state", "current_epoch", "current_leader", "log_end_offset", "high_watermark")
WAIT_FRACTION = 0.5  # of the poll's timeout: how long a round waits for the nodes' scrapes
WANTED = (RAFT, "kafka_controller_kafkacontroller_value", "kafka_server_broker_metadata_metrics_")
# Kafka 4.x names a voter that voted in the current epoch `unattached-voted` (older releases:
# `voted`) and a pre-vote campaigner `prospective` (KIP-996).
KAFKA_STATES = {"leader": "leader", "follower": "follower", "candidate": "candidate", "prospective": "prospective",
                "prospective-voted": "prospective", "unattached": "unattached", "unattached-voted": "voted",
                "voted": "voted", "resigned": "resigned", "observer": "observer"}
# KIP-835: controllers publish these as KafkaController gauges, brokers as broker-metadata-metrics
APPLIED = {
    "last_applied_offset": ('kafka_controller_kafkacontroller_value{name="LastAppliedRecordOffset"}',
                            "kafka_server_broker_metadata_metrics_last_applied_record_offset"),
    "last_applied_timestamp_ms": ('kafka_controller_kafkacontroller_value{name="LastAppliedRecordTimestamp"}',
                                  "kafka_server_broker_metadata_metrics_last_applied_record_timestamp"),
    "last_applied_lag_ms": ('kafka_controller_kafkacontroller_value{name="LastAppliedRecordLagMs"}',
                            "kafka_server_broker_metadata_metrics_last_applied_record_lag_ms"),
    "last_committed_offset": ('kafka_controller_kafkacontroller_value{name="LastCommittedRecordOffset"}',),
}


class NodeMetricsError(ValueError):
    """An endpoint answered, but without a KRaft node's raft-metrics."""


def samples(text: str) -> dict[str, float]:
    """The exposition's samples by name and labels (`name{label="value"}`), for the names used here."""
    out: dict[str, float] = {}
    # a node serves thousands of series; parse only the few read here
    wanted = "\n".join(line for line in text.splitlines() if line.startswith(WANTED))
    for family in text_string_to_metric_families(wanted):
        for s in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return out


def _number(values: dict[str, float], *names: str) -> int:
    for name in names:
        value = values.get(name)
        if value is not None and not math.isnan(value):
            return int(value)
    return -1


def metrics_record(text: str, cluster_id: str, node_id: int, now_ms: int, voter_set: Iterable[int],
                   topic: str = "__cluster_metadata", partition: int = 0) -> events.Metrics:
    """The `metrics` record of one scrape of node `node_id`. `voter_set` is the voter set the
    caller last saw in force (raft-metrics gives only its size); `now_ms` the scrape's time."""
    values = samples(text)
    states = [key.split('state="', 1)[1].rstrip('"}') for key, v in values.items()
              if key.startswith(RAFT + "current_state{") and v == 1]
    if not states or f"{RAFT}current_epoch" not in values:
        raise NodeMetricsError(f"node {node_id}: no raft-metrics in the answer (is it a KRaft node, with "
                               f"deploy/kafka-jmx-exporter.yml's rules?)")
    state = KAFKA_STATES.get(states[0])
    if state is None:
        raise NodeMetricsError(f"node {node_id}: unknown current-state {states[0]!r}")
    applied = {field: _number(values, *names) for field, names in APPLIED.items()}
    if applied["last_committed_offset"] >= 0 and applied["last_applied_offset"] > applied["last_committed_offset"]:
        applied["last_committed_offset"] = -1  # two gauges read at two instants; the record must be consistent
    return events.Metrics(cluster_id=cluster_id, topic=topic, partition=partition, time_ms=now_ms, node_id=node_id,
                          state=state, leader_id=max(_number(values, f"{RAFT}current_leader"), -1),
                          epoch=max(_number(values, f"{RAFT}current_epoch"), 0),
                          log_end_offset=max(_number(values, f"{RAFT}log_end_offset"), 0),
                          high_watermark=max(_number(values, f"{RAFT}high_watermark"), -1),
                          voter_set=tuple(sorted(voter_set)), **applied)


def scrape(url: str, timeout_s: float, client: HttpClientConfig = NO_CLIENT_CONFIG) -> str:
    """One GET of an endpoint, with `client`'s TLS context and credentials."""
    with client.open(url, timeout_s) as answer:
        return answer.read().decode()


def timed_scrape(url: str, timeout_s: float, client: HttpClientConfig = NO_CLIENT_CONFIG) -> tuple[str, int]:
    """A scrape and the wall-clock time its answer was read: the time its values are from."""
    text = scrape(url, timeout_s, client)
    return text, int(time.time() * 1000)


def refused(error: BaseException) -> bool:
    """The endpoint refused the connection: nothing listens there, its process is gone (a node
    that hangs still accepts connections, and answers nothing)."""
    reason = getattr(error, "reason", error)
    return isinstance(reason, ConnectionRefusedError)


@dataclass
class Scrapes:
    """One round of scrapes, begun while DescribeQuorum runs."""
    started: float
    futures: dict[int, Future]


class NodeMetricsReader:
    """Scrapes every node's endpoint at once, each within `timeout_ms`; returns the records of
    the nodes that answered, and the errors of those that did not.

    One endpoint that hangs delays no other node's view: a round waits for its scrapes at most
    WAIT_FRACTION of the timeout, and a scrape still running then is a silent node this round
    (its answer, if it comes within the timeout, is published with the next round); a node whose
    scrape still runs is not asked again until it ends. `client`: the TLS context and
    credentials of every scrape (one file for all nodes: `load_http_client_config`)."""

    def __init__(self, endpoints: dict[int, str], timeout_ms: int, client: HttpClientConfig = NO_CLIENT_CONFIG):
        self.endpoints = dict(endpoints)
        self.timeout_s = timeout_ms / 1000
        self.client = client
        # two workers a node: a hung scrape holds one until its timeout
        self._pool = ThreadPoolExecutor(max_workers=max(1, 2 * len(self.endpoints)), thread_name_prefix="node-metrics")
        self._running: dict[int, tuple[Future, float]] = {}  # node -> a scrape begun in an earlier round

    def begin(self) -> Scrapes:
        """Start the scrapes (they run while the caller polls DescribeQuorum)."""
        futures = {}
        for node, url in self.endpoints.items():
            carried = self._running.pop(node, None)
            futures[node] = carried[0] if carried else self._pool.submit(timed_scrape, url, self.timeout_s, self.client)
        return Scrapes(time.monotonic(), futures)

    def finish(self, scrapes: Scrapes, cluster_id: str, voter_set: Iterable[int], last: bool = False
               ) -> tuple[list[events.Metrics], dict[int, str], list[int]]:
        """(records, errors by node, the nodes whose endpoint refused the connection); each record
        is stamped with the time its scrape's answer came. The `last` round of a collector that
        stops waits for every scrape's own timeout: there is no next round to carry one to."""
        voters = tuple(voter_set)
        wait_s = self.timeout_s if last else WAIT_FRACTION * self.timeout_s
        wait([f for f in scrapes.futures.values()], timeout=max(0.0, scrapes.started + wait_s - time.monotonic()))
        records, errors, refusing = [], {}, []
        for node, future in scrapes.futures.items():
            if not future.done():
                self._running[node] = (future, scrapes.started)
                errors[node] = f"no answer within {wait_s * 1000:.0f} ms"
                continue
            try:
                text, answered_ms = future.result()
                records.append(metrics_record(text, cluster_id, node, answered_ms, voters))
            except Exception as e:  # noqa: BLE001 - a node that does not answer is evidence, not a crash
                errors[node] = f"{type(e).__name__}: {e}"
                if refused(e):
                    refusing.append(node)
        return records, errors, sorted(refusing)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def parse_endpoint(text: str) -> tuple[int, str]:
    """`ID=URL` of the --node-metrics option."""
    node, sep, url = text.partition("=")
    if not sep or not node.strip().isdigit() or not url.startswith(("http://", "https://")):
        raise ValueError(f"expected NODE_ID=http://HOST:PORT/metrics, got {text!r}")
    return int(node), url
