"""A project node inside a real Apache Kafka KRaft quorum: the cluster (three controllers with a
dynamic voter set, one broker) and the node process, which takes an id no Kafka node uses."""
from __future__ import annotations

import pytest

from quorum.kafka_cluster import KafkaCluster
from quorum.node.local_cluster import Cluster

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
