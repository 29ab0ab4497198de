"""Shared fixtures: one Apache Kafka broker per session, a fresh topic per test, one Spark session,
one test certificate authority."""
from __future__ import annotations

import uuid

import pytest

from quorum.local_kafka.kafka_broker import KafkaBroker
from tls_files import TestCA


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    with KafkaBroker(log_path=tmp_path_factory.mktemp("broker") / "kafka.log") as b:
        yield b


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


@pytest.fixture(scope="session")
def test_ca(tmp_path_factory) -> TestCA:
    """A CA made for this session (openssl); `test_ca.issue(name)` signs a leaf for 127.0.0.1."""
    return TestCA(tmp_path_factory.mktemp("tls"))
