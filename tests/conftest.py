"""Shared fixtures: one Apache Kafka broker per session, a fresh topic per test, one Spark session,
and (started by the first test that asks) one real KRaft cluster of three controllers and a broker."""
from __future__ import annotations

import os
import uuid

import pytest

from quorum.kafka_broker import KafkaBroker
from quorum.kafka_cluster import KafkaCluster


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    with KafkaBroker(log_path=tmp_path_factory.mktemp("broker") / "kafka.log") as b:
        yield b


@pytest.fixture(scope="session")
def kafka_cluster(tmp_path_factory):
    """Three controllers and a broker, each node in a cgroup of its own (for tests/packet_filter.py)
    and serving its metrics through the Prometheus JMX exporter agent.
    Tests that fault it leave it as they found it: every node running, every voter fetching."""
    from packet_filter import cgroup2_root
    cgroups = cgroup2_root() / f"quorum-test-{os.getpid()}"
    with KafkaCluster(base_dir=tmp_path_factory.mktemp("kafka-cluster"), cgroup_parent=cgroups,
                      jmx_exporter=True) as cluster:
        yield cluster
    cgroups.rmdir()


@pytest.fixture
def topic_factory(broker):
    def make(partitions: int = 4, prefix: str = "events") -> str:
        return broker.create_topic(f"{prefix}-{uuid.uuid4().hex[:10]}", partitions)
    return make


@pytest.fixture
def topic(topic_factory) -> str:
    return topic_factory()


@pytest.fixture(scope="session")
def spark():
    from streaming.spark_session import build_spark
    session = build_spark(master="local[2]", app_name="quorum-health-tests", shuffle_partitions=2)
    yield session
    session.stop()
