"""A project node inside a real Apache Kafka KRaft quorum: the cluster (three controllers with a
dynamic voter set, one broker) and the node process, which takes an id no Kafka node uses."""
from __future__ import annotations

import threading
from typing import Callable, Iterable

import pytest

from quorum.local_kafka.kafka_cluster import KafkaCluster
from quorum.testing.local_cluster import Cluster

PROJECT_NODE_ID = 100


@pytest.fixture(scope="package")
def kafka_cluster(tmp_path_factory):
    with KafkaCluster(base_dir=tmp_path_factory.mktemp("kafka-cluster")) as cluster:
        yield cluster


def start_project_observer(kafka_cluster: KafkaCluster, root) -> Cluster:
    """A `quorum node` configured as Kafka configures an observer of the metadata quorum: the
    cluster's id, the controllers as voters, the `__cluster_metadata` topic. It publishes its
    records to the cluster's own broker, as a node would to the monitor's Kafka."""
    controllers = ",".join(f"{i}@{kafka_cluster.endpoint(i)}" for i in kafka_cluster.controller_ids())
    node = Cluster(root, voters=0, observers=1, first_id=PROJECT_NODE_ID, cluster_id=kafka_cluster.cluster_id,
                   events_bootstrap=kafka_cluster.bootstrap, events_topic="quorum-events",
                   settings={"controller.quorum.voters": controllers, "quorum.topic": "__cluster_metadata"})
    node.start()
    return node


@pytest.fixture
def project_observer(kafka_cluster, tmp_path):
    node = start_project_observer(kafka_cluster, tmp_path)
    try:
        yield node
    finally:
        node.stop_all()


class HighWatermarkSampler:
    """Every node's high watermark, sampled every 100 ms on a thread of its own while a test runs,
    one series per process (`probe(node_id)` gives (pid, high watermark), or None when the node
    does not answer): a restarted process starts a new series, since Kafka keeps no high
    watermark across restarts."""

    def __init__(self, node_ids: Iterable[int], probe: Callable[[int], tuple[int, int] | None]):
        self.node_ids, self.probe = tuple(node_ids), probe
        self.series: dict[tuple[int, int], list[int]] = {}   # (node, pid) -> samples
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "HighWatermarkSampler":
        self._sample()  # a first sample now: a test that ends at once still has one to judge
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self._sample()

    def _sample(self) -> None:
        for node_id in self.node_ids:
            got = self.probe(node_id)
            if got is not None and got[0] is not None and got[1] >= 0:
                self.series.setdefault((node_id, got[0]), []).append(got[1])

    def assert_never_back(self) -> None:
        assert self.series, "no high watermark was sampled"
        for (node_id, pid), values in self.series.items():
            backwards = [(a, b) for a, b in zip(values, values[1:]) if b < a]
            assert not backwards, f"node {node_id} (pid {pid}): high watermark moved back {backwards[:3]}"
