"""An operator's tools while the broker listed first hangs (SIGSTOP: it accepts connections and
answers nothing), on combined nodes, where every node is a broker: `quorum describe`, a
collector started then, and `quorum tail` each answer from another broker of the list, within a
bound well inside their timeouts, and none reports a timeout while another broker answers.

The frozen node is neither the quorum's leader (its brokers would forward DescribeQuorum to it)
nor the leader of the probe topic's partition, which the tail reads (no broker could serve it): a bootstrap server, nothing more. The collector publishes to the
tests' own events Kafka."""
from __future__ import annotations

import logging
import subprocess
import sys
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from quorum import events
from quorum.kafka_watch import collector
from quorum.kafka_watch.bootstrap_race import MAX_HEDGE_S

from tests.kafka_watch.test_collector import read_keyed
from tests.kafka_watch.test_hung_bootstrap_node import DESCRIBE_TIMEOUT_MS, describe_answered

pytestmark = [pytest.mark.slow,
              pytest.mark.kafka_shape(combined=True, reason="a bootstrap list of brokers, the first one hanging")]

TAIL_WITHIN_S = 5.0  # half of the tail's own 10 s metadata timeout (its process's start included)
PROBE_TOPIC = "hung-first-probe"


def probe_records(cluster_id: str, n: int) -> list[events.Record]:
    return [events.QuorumPollError(cluster_id=cluster_id, topic="__cluster_metadata", partition=0,
                                   time_ms=int(time.time() * 1000), source="probe", poll_interval_ms=1000, error="timeout",
                                   error_code=-1,
                                   latency_ms=i, answered_by=-1, leader_id=-1, leader_epoch=-1) for i in range(n)]


@pytest.fixture(scope="module")
def hung_first(kafka_cluster):
    """(the frozen node, every broker with it first, a broker that answers); the probe topic
    starts with three records. The node is continued at the end."""
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap})
    admin.create_topics([NewTopic(PROBE_TOPIC, 1, 1)])[PROBE_TOPIC].result(30)
    partition_leader = kafka_cluster.wait_for(
        lambda: max(admin.list_topics(PROBE_TOPIC, timeout=5).topics[PROBE_TOPIC].partitions[0].leader, 0), 30,
        "the probe topic's leader")
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap})
    for record in probe_records(kafka_cluster.cluster_id, 3):
        producer.produce(PROBE_TOPIC, events.encode(record))
    assert producer.flush(30) == 0
    offsets_topic_made(kafka_cluster.bootstrap)
    frozen = next(i for i in kafka_cluster.broker_ids() if i not in (kafka_cluster.leader(), partition_leader))
    others = [i for i in kafka_cluster.broker_ids() if i != frozen]
    kafka_cluster.freeze(frozen)
    try:
        yield frozen, ",".join(kafka_cluster.endpoint(i) for i in [frozen] + others), kafka_cluster.endpoint(others[0])
    finally:
        kafka_cluster.resume(frozen)


def offsets_topic_made(bootstrap: str) -> None:
    """A group's offset committed: Kafka creates __consumer_offsets on a group's first use, as a
    real cluster has it already, and not while one of its brokers is frozen."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "hung-first-offsets", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(PROBE_TOPIC, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 30
        while (msg := consumer.poll(0.5)) is None or msg.error():
            assert time.monotonic() < deadline, "no probe record read"
        consumer.commit(msg, asynchronous=False)
    finally:
        consumer.close()


@pytest.mark.parametrize("what", ["--replication", "--status"])
def test_describe_answers_from_another_broker(kafka_cluster, hung_first, what, capsys):
    frozen, bootstrap, _ = hung_first
    out, took = describe_answered(bootstrap, what, capsys, f"Kafka {kafka_cluster.kafka_version}'s broker {frozen}")
    if what == "--replication":
        assert {int(line.split()[0]) for line in out.splitlines()[1:]} >= set(kafka_cluster.voter_ids()), out
    else:
        assert f"ClusterId:              {kafka_cluster.cluster_id}" in out, out
    assert took < MAX_HEDGE_S + 3.0 < DESCRIBE_TIMEOUT_MS / 1000 / 2


def test_a_collector_started_then_publishes_its_first_snapshot_within_an_interval_and_a_timeout(
        kafka_cluster, hung_first, broker, topic_factory, caplog):
    import argparse
    frozen, bootstrap, _ = hung_first
    topic = topic_factory(1)  # on the tests' own events Kafka: the frozen cluster only watched
    parser = argparse.ArgumentParser()
    collector.add_arguments(parser)
    args = parser.parse_args(["--bootstrap-server", bootstrap, "--events-bootstrap-server", broker.bootstrap,
                              "--events-topic", topic, "--count", "3"])
    with caplog.at_level(logging.INFO, logger="quorum.kafka_watch.collector"):
        assert collector.run(args) == 0
    started_ms = next(r.created for r in caplog.records if r.getMessage().startswith("polling DescribeQuorum")) * 1000
    got = [r for _, r in read_keyed(broker.bootstrap, topic, 3)]
    first_after_ms = got[0].time_ms - started_ms
    print(f"{kafka_cluster.kafka_version}: first snapshot {first_after_ms:.0f} ms after the collector started "
          f"polling, broker {frozen} frozen and first")
    assert [r.TYPE for r in got] == ["quorum_snapshot"] * 3, got
    assert first_after_ms <= args.interval_ms + args.interval_ms  # the timeout is the interval by default
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


def test_tail_reads_through_another_broker(kafka_cluster, hung_first):
    frozen, bootstrap, _ = hung_first
    start = time.monotonic()
    # its own process, so that a tail that never ends fails the test instead of holding the suite
    tail = subprocess.run([sys.executable, "-m", "quorum.cli", "tail", "--bootstrap-server", bootstrap, "--topic",
                           PROBE_TOPIC, "--from-beginning", "--max", "3"], capture_output=True, text=True,
                          timeout=TAIL_WITHIN_S * 6)
    took = time.monotonic() - start
    print(f"{kafka_cluster.kafka_version}: quorum tail, broker {frozen} frozen and first: {took:.2f} s "
          f"(its process's start included)")
    assert tail.returncode == 0 and not tail.stderr, tail.stderr
    assert len([line for line in tail.stdout.splitlines() if " pollerr  timeout " in line]) == 3, tail.stdout
    assert took < TAIL_WITHIN_S
