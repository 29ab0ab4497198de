"""`quorum describe` against a real Apache Kafka KRaft quorum, the session's broker+controller
node, prints what Kafka's own `kafka-metadata-quorum describe` prints (tests/kafka_tools.py says
how closely); tests/kafka_quorum does the same against three controllers and a broker."""
from __future__ import annotations

from kafka_tools import assert_describe_replication_matches, assert_describe_status_matches


def test_status_matches_kafkas_tool(broker):
    assert_describe_status_matches(broker.bootstrap)


def test_replication_matches_kafkas_tool(broker):
    assert_describe_replication_matches(broker.bootstrap)
