"""The clusters one collector watches: `quorum collect --fleet FILE`, a YAML file with one entry
per Kafka cluster (docs/deployment.md, "Watching a fleet"):

    interval_ms: 1000            # every cluster's, unless its entry says otherwise
    timeout_ms: 1000
    clusters:
      - cluster_id: payments-prod
        bootstrap_server: kafka-1:9092,kafka-2:9092,kafka-3:9092   # or bootstrap_controller
        command_config: payments.properties   # Kafka's client properties for this cluster
        node_metrics:                         # each node's JMX exporter endpoint
          1: http://kafka-1:7071/metrics
        node_metrics_config: jmx-client.yml   # their Prometheus HTTP client config
        interval_ms: 1000                     # optional, this cluster's own
        timeout_ms: 800

Relative paths are read from the file's directory. Every entry is checked as the single-cluster
flags are (the interval against the job's threshold, the timeout against the interval, the
properties and HTTP client files read), and a file with any fault is refused whole, naming the
entry and the key: a collector that re-reads it (SIGHUP) keeps its fleet. `--shard K/N` keeps the
clusters whose id's stable hash (CRC-32) is K modulo N: N replicas split a fleet with no overlap
and no gap."""
from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from quorum.config_file import ConfigFileError, checked_keys, file_value, load_yaml_file, string_value
from quorum.kafka_watch.kafka_node_metrics import parse_endpoint
from quorum.kafka_watch.poll_interval import check_poll_interval
from quorum.kafka_watch.quorum_links import endpoints

TOP_KEYS = ("interval_ms", "timeout_ms", "clusters")
CLUSTER_KEYS = ("cluster_id", "bootstrap_server", "bootstrap_controller", "command_config", "node_metrics",
                "node_metrics_config", "interval_ms", "timeout_ms")


@dataclass(frozen=True)
class WatchedCluster:
    """One cluster to watch, as its entry (or the single-cluster flags) says. Equal entries are
    the same watch: a reload leaves it running."""
    cluster_id: str | None            # None: asked from the cluster (the single-cluster flags only)
    bootstrap_server: str | None
    bootstrap_controller: str | None
    interval_ms: int
    timeout_ms: int
    command_config: str | None = None
    node_metrics: tuple[tuple[int, str], ...] = ()
    node_metrics_config: str | None = None

    @property
    def name(self) -> str:
        """How the log names it."""
        return self.cluster_id or self.path

    @property
    def path(self) -> str:
        if self.bootstrap_controller:
            return f"controllers {self.bootstrap_controller}"
        return self.bootstrap_server or ""


def check_cluster(c: WatchedCluster, unreachable_after_ms: int) -> str | None:
    """Why this cluster's settings cannot work, or None."""
    problem = check_poll_interval(c.interval_ms, unreachable_after_ms)
    if problem:
        return f"interval {c.interval_ms} ms with the job's unreachable threshold {unreachable_after_ms} ms: {problem}"
    if c.timeout_ms <= 0:
        return f"the timeout must be positive (got {c.timeout_ms} ms)"
    if c.timeout_ms > c.interval_ms:
        return (f"the timeout {c.timeout_ms} ms is longer than the interval {c.interval_ms} ms: a poll that hangs "
                f"would hold back the next record; use a timeout of {c.interval_ms} ms or less")
    if c.node_metrics_config and not c.node_metrics:
        return "node_metrics_config applies to node_metrics endpoints, and none is given"
    return check_endpoints(c)


def check_endpoints(c: WatchedCluster) -> str | None:
    """Why the cluster's bootstrap list names no node to ask, or None."""
    try:
        if not endpoints(c.bootstrap_server or c.bootstrap_controller or ""):
            return "no HOST:PORT to ask: give the cluster's brokers or controllers"
    except ValueError as e:
        return str(e)
    return None


def load_fleet(path: str | Path, unreachable_after_ms: int, default_interval_ms: int) -> list[WatchedCluster]:
    """The file's clusters, checked; ConfigFileError names the file, the entry and the key."""
    return load_yaml_file(path, lambda data, p: _fleet(data, p.parent, unreachable_after_ms, default_interval_ms))


def _fleet(data: Any, base: Path, unreachable_after_ms: int, default_interval_ms: int) -> list[WatchedCluster]:
    top = checked_keys(data, "", TOP_KEYS)
    interval = _int(top, "interval_ms", "the file", default_interval_ms)
    timeout = _int(top, "timeout_ms", "the file", interval)
    entries = top.get("clusters")
    if not isinstance(entries, list) or not entries:
        raise ConfigFileError("clusters: expected a list of one entry per cluster")
    fleet, seen = [], set()
    for i, entry in enumerate(entries):
        where = f"clusters[{i}]"
        cluster = _cluster(checked_keys(entry, where, CLUSTER_KEYS), where, base, interval, timeout)
        if cluster.cluster_id in seen:
            raise ConfigFileError(f"{where}.cluster_id: {cluster.cluster_id} is listed twice")
        seen.add(cluster.cluster_id)
        problem = check_cluster(cluster, unreachable_after_ms)
        if problem:
            raise ConfigFileError(f"{where} ({cluster.cluster_id}): {problem}")
        fleet.append(cluster)
    return fleet


def _cluster(e: Mapping[str, Any], where: str, base: Path, interval: int, timeout: int) -> WatchedCluster:
    cluster_id = e.get("cluster_id")
    if not isinstance(cluster_id, str) or not cluster_id:
        raise ConfigFileError(f"{where}.cluster_id: every cluster needs its id (a string)")
    where = f"{where} ({cluster_id})"
    brokers, controllers = string_value(e, "bootstrap_server", where), string_value(e, "bootstrap_controller", where)
    if (brokers is None) == (controllers is None):
        raise ConfigFileError(f"{where}: give bootstrap_server or bootstrap_controller (one of them)")
    metrics = e.get("node_metrics") or {}
    if not isinstance(metrics, Mapping):
        raise ConfigFileError(f"{where}.node_metrics: expected a mapping of node id to URL")
    try:
        node_metrics = tuple(sorted(parse_endpoint(f"{node}={url}") for node, url in metrics.items()))
    except ValueError as err:
        raise ConfigFileError(f"{where}.node_metrics: {err}") from None
    own_interval = _int(e, "interval_ms", where, interval)
    return WatchedCluster(cluster_id, brokers, controllers, own_interval,
                          _int(e, "timeout_ms", where, min(timeout, own_interval)),
                          _path(e, "command_config", where, base), node_metrics,
                          _path(e, "node_metrics_config", where, base))


def _int(section: Mapping[str, Any], key: str, where: str, default: int) -> int:
    value = section.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigFileError(f"{where}.{key}: expected a whole number of milliseconds")
    return value


def _path(section: Mapping[str, Any], key: str, where: str, base: Path) -> str | None:
    path = file_value(section, key, where, base)
    return str(path) if path else None


def parse_shard(text: str) -> tuple[int, int]:
    """`K/N` of --shard: this replica's index K (from 0) of N."""
    k, sep, n = text.partition("/")
    if not sep or not k.strip().isdigit() or not n.strip().isdigit() or not 0 <= int(k) < int(n):
        raise ValueError(f"expected K/N with 0 <= K < N (this replica's index of N), got {text!r}")
    return int(k), int(n)


def shard_of(cluster_id: str, shards: int) -> int:
    """The shard a cluster belongs to: a hash that every replica, every run, computes alike."""
    return zlib.crc32(cluster_id.encode()) % shards


def in_shard(fleet: list[WatchedCluster], shard: tuple[int, int] | None) -> list[WatchedCluster]:
    if shard is None:
        return list(fleet)
    k, n = shard
    return [c for c in fleet if shard_of(c.cluster_id or "", n) == k]
