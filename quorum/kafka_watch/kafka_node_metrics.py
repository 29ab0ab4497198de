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
import re
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
    """The exposition's samples by name and labels (`name{label="value"}`, the labels sorted),
    for the names used here. A node serves thousands of series and a collector reads every node
    of a fleet every second: the few lines read here are parsed by hand, and a line this cannot
    read plainly (escaped label values) by prometheus_client's parser."""
    return _samples(_WANTED_LINE, text)


def record_samples(text: str) -> dict[str, float]:
    """samples() of the series metrics_record reads, and no other (nine of a node's forty-odd
    raft-metrics and KafkaController series)."""
    return _samples(_RECORD_LINE, text)


def _samples(lines: re.Pattern, text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    # the regex engine finds the lines (a pattern that begins with a newline is searched for as a
    # literal: five times faster than one tried at every character), not a Python loop
    for match in lines.finditer("\n" + text):
        line = match.group()[1:].rstrip("\r")
        key, value = _sample(line)
        if key is None:
            out.update(_parsed(line))
        else:
            out[key] = value
    return out


_WANTED_LINE = re.compile("\n(?:" + "|".join(map(re.escape, WANTED)) + ")[^\n]*")
_RECORD_LINE = re.compile("\n(?:" + "|".join(
    [re.escape(RAFT + gauge) + "[{ \t]" for gauge in RAFT_GAUGES]
    + [re.escape(name) + "[{ \t]" for names in APPLIED.values() for name in names if "{" not in name]
    + ['kafka_controller_kafkacontroller_value\\{[^\n]*name="(?:' + "|".join(
        name.split('"')[1] for names in APPLIED.values() for name in names if "{" in name) + ')"']) + ")[^\n]*")
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)="([^"\\]*)"\s*(?:,|$)')


def _sample(line: str) -> tuple[str | None, float]:
    """(key, value) of a plain sample line; (None, nan) for one to leave to the full parser."""
    try:
        if "{" in line:
            name, _, rest = line.partition("{")
            labels, _, tail = rest.rpartition("}")
            if "\\" in labels:
                return None, math.nan
            one = labels.rstrip(",")
            if "," not in one and " " not in one and one.count('"') == 2:  # one label: nothing to sort
                return f"{name}{{{one}}}", float(tail.split()[0])
            pairs = _LABEL.findall(labels)
            if ",".join(f'{k}="{v}"' for k, v in pairs) != labels.strip().rstrip(",").replace(", ", ","):
                return None, math.nan
            text = ",".join(f'{k}="{v}"' for k, v in sorted(pairs))
            key = f"{name.strip()}{{{text}}}" if text else name.strip()
            return key, float(tail.split()[0])
        name, value = line.split()[:2]
        return name, float(value)
    except (ValueError, IndexError):
        return None, math.nan


def _parsed(line: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(line):
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
    values = record_samples(text)
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
