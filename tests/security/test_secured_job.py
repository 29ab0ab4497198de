"""The streaming job on the secured Kafka: Spark's connector reads the events topic and the
health producer writes the health topic under the job's own principal (READ on the one, WRITE on
the other), both configured with the properties file Kafka's tools take."""
from __future__ import annotations

import json
import logging
import time
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from prometheus_tools import wait_for
from quorum.kafka_client import kafka_client_properties
from quorum.synthetic import Fault, SyntheticConfig, publish
from streaming.config import JobConfig
from streaming.fleet_size import recent_quorums
from streaming.job import new_checkpoint_partitions, start_job

from .conftest import EVENTS, HEALTH, assert_no_secret

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def health_events(kafka, topic: str) -> list[dict]:
    """Every event on the health topic so far, read by the test harness's admin."""
    consumer = Consumer({**kafka.admin_client_config(), "group.id": f"t-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "log_level": 0})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out = []
        while True:
            msg = consumer.poll(2.0)
            if msg is None:
                return out
            if not msg.error():
                out.append(json.loads(msg.value()))
    finally:
        consumer.close()


def test_the_job_reads_and_writes_a_secured_kafka_under_its_own_principal(spark, kafka, files, tmp_path, caplog):
    events_topic = f"{EVENTS}-job-{uuid.uuid4().hex[:6]}"
    kafka.create_topic(events_topic, 2)
    kafka.grant("node", "WRITE", "TOPIC", events_topic)
    kafka.grant("job", "READ", "TOPIC", events_topic)
    start_ms = int(time.time() * 1000)
    synthetic = SyntheticConfig(clusters=1, voters=3, observers=0, seed=5, start_ms=start_ms,
                                faults=(Fault("stall", start_ms=5000, duration_ms=15_000, cluster=0, replica=3),))
    node_producer = kafka_client_properties.librdkafka_config(kafka.properties("node"), "the test's publisher")
    publish(synthetic, kafka.bootstrap, events_topic, duration_ms=30_000, speed=0, producer_config=node_producer)

    cfg = JobConfig.from_dict({
        "source": {"bootstrap_servers": kafka.bootstrap, "topic": events_topic, "starting_offsets": "earliest",
                   "command_config": str(files["job"])},
        "job": {"checkpoint_location": str(tmp_path / "checkpoint"), "trigger_interval_ms": 500},
        "dead_letters": {"path": str(tmp_path / "dead")},
        "health": {"stall_after_ms": 4000, "tick_ms": 500},
        "sink": {"prometheus": {"mode": "off"},
                 "kafka": {"enabled": True, "bootstrap_servers": kafka.bootstrap, "topic": HEALTH,
                           "command_config": str(files["job"])}},
    })
    cfg.check_files()
    caplog.set_level(logging.INFO, "streaming.job")
    # the new checkpoint's state partitions, from the quorums counted under the job's principal
    assert new_checkpoint_partitions(cfg, "local[2]") == 1
    assert f"the events topic {events_topic} has records of 1 quorum(s)" in caplog.text
    job = start_job(spark, cfg)
    try:
        def stalled():
            return [e for e in health_events(kafka, HEALTH) if e.get("event") == "transition"
                    and e.get("cluster_id") == "cluster-0" and e.get("replica_id") == 3 and e.get("status") == "stalled"]
        wait_for(stalled, 120, "the stalled replica's transition on the secured health topic")
    finally:
        job.stop()
    plans = [q.lastProgress for q in spark.streams.active]  # stopped: none left running
    assert plans == []
    assert_no_secret(kafka, caplog.text, json.dumps(cfg.shown()))


def test_a_source_principal_without_read_fails_the_query_saying_which_acl_it_needs(spark, kafka, files, tmp_path, caplog):
    from streaming.source import refusal
    events_topic = f"{EVENTS}-denied-{uuid.uuid4().hex[:6]}"
    kafka.create_topic(events_topic, 1)
    cfg = JobConfig.from_dict({
        "source": {"bootstrap_servers": kafka.bootstrap, "topic": events_topic, "command_config": str(files["nobody"])},
        "job": {"checkpoint_location": str(tmp_path / "checkpoint"), "trigger_interval_ms": 500},
        "dead_letters": {"enabled": False},
        "health": {"tick_ms": 500},
        "sink": {"prometheus": {"mode": "off"}},
    })
    # counting the fleet is refused too: `auto` keeps the cores, and the log says why
    assert recent_quorums(cfg.source, 10, budget_s=5) is None
    assert "TOPIC_AUTHORIZATION_FAILED" in caplog.text
    job = start_job(spark, cfg)
    try:
        wait_for(lambda: not job.health_query.isActive, 120, "the query to fail")
        failure = str(job.health_query.exception())
    finally:
        job.stop()
    assert refusal(failure, events_topic, "nobody") == \
        f"authorization failed: User:nobody needs READ on the topic {events_topic}", failure[:2000]
    assert_no_secret(kafka, failure + caplog.text)
