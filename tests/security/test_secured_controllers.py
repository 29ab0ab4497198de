"""The controllers' path on a secured Kafka: `--bootstrap-controller` with `--command-config` on a
CONTROLLER listener that is SASL_SSL (SCRAM or PLAIN, JKS or PKCS12 truststore), as
`kafka-metadata-quorum --bootstrap-controller --command-config` takes it; refusals named, fast;
and a collector whose brokers all hang (a secured cluster's only broker frozen) publishing the
controllers' answers."""
from __future__ import annotations

import subprocess
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from kafka_tools import METADATA_QUORUM, kafka_tool, status_fields
from quorum import events
from quorum.kafka_client import kafka_client_properties
from quorum.local_kafka.secured_cluster import SecuredCluster

from .conftest import assert_no_secret
from .test_secured_kafka import BIN, events_topic, quorum, tail

SAME = ("ClusterId", "LeaderId", "LeaderEpoch", "CurrentVoters")
INTERVAL_MS = 500
REFUSAL_TIMEOUT_MS = 5000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, local_certificates):
    """A secured cluster with its controller apart, so that its only broker can hang alone."""
    with SecuredCluster(tmp_path_factory.mktemp("secured-cluster"), users=("collector",),
                        certificates=local_certificates) as c:
        c.broker.grant("collector", "DESCRIBE", "CLUSTER")
        yield c


def test_describe_through_the_secured_controllers_prints_what_the_brokers_and_kafkas_tool_print(kafka, files):
    admin = str(kafka.data_dir / "admin.properties")
    theirs = kafka_tool(METADATA_QUORUM, "--bootstrap-controller", kafka.controller_bootstrap, "--command-config",
                        admin, "describe", "--status")
    assert theirs.returncode == 0, theirs.stdout + theirs.stderr
    brokers = quorum("describe", "--bootstrap-server", kafka.bootstrap, "--command-config", admin, "--status")
    mine = quorum("describe", "--bootstrap-controller", kafka.controller_bootstrap, "--command-config", admin,
                  "--status")
    assert mine.returncode == 0 and brokers.returncode == 0, mine.stderr + brokers.stderr
    assert {k: status_fields(mine.stdout)[k] for k in SAME} == {k: status_fields(theirs.stdout)[k] for k in SAME} \
        == {k: status_fields(brokers.stdout)[k] for k in SAME}
    for which in ("collector", "plain-pkcs12"):  # SCRAM-SHA-512 with JKS, PLAIN with PKCS12: DESCRIBE alone
        started = time.monotonic()
        least = quorum("describe", "--bootstrap-controller", kafka.controller_bootstrap, "--command-config",
                       str(files[which]), "--status")
        elapsed = time.monotonic() - started
        assert least.returncode == 0, least.stderr
        assert {k: status_fields(least.stdout)[k] for k in SAME[1:]} == {k: status_fields(mine.stdout)[k]
                                                                        for k in SAME[1:]}
        # the cluster id is DescribeCluster's, which a controller answers only with ALTER on the CLUSTER
        assert "DescribeCluster: CLUSTER_AUTHORIZATION_FAILED" in least.stderr and "User:collector" in least.stderr
        assert elapsed < 5, f"{which}: {elapsed:.1f} s"
        assert_no_secret(kafka, least.stdout, least.stderr)


def test_kafkas_tool_needs_alter_on_the_cluster_to_ask_the_controllers(kafka, files):
    """The reference: Kafka's admin client learns the controllers with DescribeCluster, refused
    without ALTER on the CLUSTER, where DescribeQuorum needs DESCRIBE."""
    out = kafka_tool(METADATA_QUORUM, "--bootstrap-controller", kafka.controller_bootstrap, "--command-config",
                     str(files["collector"]), "describe", "--status")
    assert out.returncode != 0 and "needs ALTER permission" in out.stdout + out.stderr, out.stdout + out.stderr


@pytest.mark.parametrize("which, expected", [
    ("wrong-password", "authentication_failed (error code 58): authentication failed as User:collector"),
    ("untrusted", "tls_failed: TLS handshake failed"),
    ("nobody", "CLUSTER_AUTHORIZATION_FAILED (error code 31): authorization failed: User:nobody needs "
               "DESCRIBE on the CLUSTER"),
])
def test_a_refusal_by_the_controllers_is_named_at_once(kafka, files, which, expected):
    started = time.monotonic()
    out = quorum("describe", "--bootstrap-controller", kafka.controller_bootstrap, "--command-config",
                 str(files[which]), "--status", "--timeout-ms", str(REFUSAL_TIMEOUT_MS))
    elapsed = time.monotonic() - started
    assert out.returncode == 1 and expected in out.stderr, out.stderr
    assert "timeout" not in out.stderr
    assert elapsed < REFUSAL_TIMEOUT_MS / 1000 / 2, f"{elapsed:.1f} s: the refusal waited for the timeout"
    assert_no_secret(kafka, out.stdout, out.stderr)


def test_the_collector_polls_the_secured_controllers(kafka, files):
    topic = events_topic(kafka)
    collect = ("collect", "--bootstrap-controller", kafka.controller_bootstrap, "--command-config",
               str(files["collector"]), "--events-bootstrap-server", kafka.bootstrap, "--events-topic", topic,
               "--events-command-config", str(files["collector"]), "--interval-ms", str(INTERVAL_MS))
    out = quorum(*collect, "--count", "3", "--cluster-id", kafka.cluster_id)
    assert out.returncode == 0, out.stderr
    read = tail(kafka, files, topic, 3)
    assert read.returncode == 0, read.stderr
    assert read.stdout.count(" snapshot leader 1 ") == 3 and read.stdout.count(" by n1 ") == 3, read.stdout
    # without ALTER on the CLUSTER the controllers keep the cluster id to themselves: the log says so
    unnamed = quorum(*collect, "--count", "1")
    assert "DescribeCluster: CLUSTER_AUTHORIZATION_FAILED" in unnamed.stderr and "give --cluster-id" in unnamed.stderr
    assert_no_secret(kafka, out.stdout, out.stderr, read.stdout, read.stderr, unnamed.stderr)


class EventsReader:
    """The records of an events topic, read as the job reads them."""

    def __init__(self, kafka, files, topic: str):
        props = kafka_client_properties.merged(str(files["job"]), {})
        self.consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": f"test-{topic}", "log_level": 0,
                                  "enable.auto.commit": False,
                                  **kafka_client_properties.librdkafka_config(props, "the test's reader")})
        self.consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        self.records: list = []

    def until(self, condition, timeout_s: float, what: str):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if condition(self.records):
                return self.records
            msg = self.consumer.poll(0.2)
            if msg is not None and not msg.error():
                self.records.append(events.decode(msg.value()))
        raise AssertionError(f"no {what} within {timeout_s:.0f} s: {self.records}")

    def close(self) -> None:
        self.consumer.close()


def test_with_every_broker_frozen_the_collector_publishes_the_secured_controllers_answers(cluster, kafka, files,
                                                                                           tmp_path):
    topic = events_topic(kafka)
    own = cluster.broker.write_properties(tmp_path / "collector.properties", cluster.properties("collector"))
    polls = 24
    collector = subprocess.Popen(
        [str(BIN / "quorum"), "collect", "--bootstrap-server", cluster.bootstrap, "--command-config", str(own),
         "--cluster-id", cluster.cluster_id, "--events-bootstrap-server", kafka.bootstrap, "--events-topic", topic,
         "--events-command-config", str(files["collector"]), "--count", str(polls), "--interval-ms", str(INTERVAL_MS)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    reader = EventsReader(kafka, files, topic)
    broker = cluster.broker.node_id
    try:
        # a first answer through the broker names the controllers' endpoints
        reader.until(lambda rs: any(isinstance(r, events.QuorumSnapshot) and r.answered_by == broker for r in rs),
                     30, "snapshot through the broker")
        frozen_ms = int(time.time() * 1000)
        cluster.freeze_broker()
        try:
            started = time.monotonic()
            asked = quorum("describe", "--bootstrap-controller", cluster.controller_bootstrap, "--command-config",
                           str(own), "--replication")
            describe_s = time.monotonic() - started
            _, err = collector.communicate(timeout=polls * INTERVAL_MS / 1000 + 30)
            records = reader.until(lambda rs: len(rs) >= polls, 10, f"{polls} records")
        finally:
            cluster.resume_broker()
    finally:
        reader.close()
        if collector.poll() is None:
            collector.kill()
    assert asked.returncode == 0 and describe_s < 5, f"{describe_s:.1f} s: {asked.stderr}"
    after = [r for r in records if r.time_ms > frozen_ms]
    by_controller = [r for r in after if isinstance(r, events.QuorumSnapshot) and r.answered_by == 1]
    print(f"\nbroker frozen: {len(after)} polls, {len(by_controller)} answered by the controller, first "
          f"{by_controller[0].time_ms - frozen_ms if by_controller else -1} ms after the freeze; describe "
          f"--bootstrap-controller {describe_s:.2f} s")
    assert collector.returncode == 0, err
    assert "asking the controllers" in err and cluster.controller_bootstrap in err, err
    # the poll under way when the broker froze times out; from the next but one the controller answers
    assert by_controller and by_controller[0].time_ms - frozen_ms < 3 * INTERVAL_MS + 1000, after
    assert all(isinstance(r, events.QuorumSnapshot) for r in after[-8:]), after[-8:]
    assert sum(isinstance(r, events.QuorumPollError) for r in after) <= 3, after
    assert_no_secret(kafka, err)
