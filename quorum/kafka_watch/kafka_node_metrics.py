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
from typing import Iterable

from prometheus_client.parser import text_string_to_metric_families

from quorum import events

RAFT = "kafka_server_raft_metrics_"
# the raft-metrics gauges metrics_record reads (current_state: one series, the state a label)
RAFT_GAUGES = ("current_state", "current_epoch", "current_leader", "log_end_offset", "high_watermark")
WAIT_FRACTION = 0.5  # of the poll's timeout: how long a round waits for the nodes' scrapes (node_scrapes)
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


def refused(error: BaseException) -> bool:
    """The endpoint refused the connection: nothing listens there, its process is gone (a node
    that hangs still accepts connections, and answers nothing)."""
    reason = getattr(error, "reason", error)
    return isinstance(reason, ConnectionRefusedError)


def parse_endpoint(text: str) -> tuple[int, str]:
    """`ID=URL` of the --node-metrics option."""
    node, sep, url = text.partition("=")
    if not sep or not node.strip().isdigit() or not url.startswith(("http://", "https://")):
        raise ValueError(f"expected NODE_ID=http://HOST:PORT/metrics, got {text!r}")
    return int(node), url
