"""The monitor's Kafka clients on a Kafka secured as production clusters are: SASL_SSL with
SCRAM-SHA-512 over TLS (a JKS truststore made by keytool), mutual TLS, StandardAuthorizer ACLs,
each part under a principal of its own with only the ACLs docs/deployment.md lists for it. Every
client takes the same file Kafka's own tools take; every refusal is named, never a `timeout`, and
no secret appears in any output."""
from __future__ import annotations

import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from kafka_tools import METADATA_QUORUM, kafka_tool, status_fields, table

from .conftest import EVENTS, assert_no_secret

BIN = Path(sys.executable).parent


def quorum(*args: str, timeout_s: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "quorum"), *args], capture_output=True, text=True, timeout=timeout_s)


def test_quorum_describe_takes_the_file_kafka_metadata_quorum_takes_and_says_what_it_says(kafka, files):
    theirs = kafka_tool(METADATA_QUORUM, "--bootstrap-server", kafka.bootstrap, "--command-config",
                        str(files["collector"]), "describe", "--status")
    assert theirs.returncode == 0, theirs.stdout + theirs.stderr
    for which in ("collector", "plain-pkcs12"):
        mine = quorum("describe", "--bootstrap-server", kafka.bootstrap, "--command-config", str(files[which]),
                      "--status")
        assert mine.returncode == 0, mine.stderr
        ours, kafkas = status_fields(mine.stdout), status_fields(theirs.stdout)
        assert {k: ours[k] for k in ("ClusterId", "LeaderId", "LeaderEpoch", "CurrentVoters")} == \
            {k: kafkas[k] for k in ("ClusterId", "LeaderId", "LeaderEpoch", "CurrentVoters")}
        assert_no_secret(kafka, mine.stdout, mine.stderr)


def test_mutual_tls_with_a_jks_keystore_and_a_pem_truststore(kafka, files):
    mine = quorum("describe", "--bootstrap-server", kafka.mtls_bootstrap, "--command-config", str(files["mtls"]),
                  "--replication")
    assert mine.returncode == 0, mine.stderr
    theirs = kafka_tool(METADATA_QUORUM, "--bootstrap-server", kafka.mtls_bootstrap, "--command-config",
                        str(files["mtls"]), "describe", "--replication")
    assert theirs.returncode == 0, theirs.stdout + theirs.stderr
    assert [row[:2] + row[-1:] for row in table(mine.stdout)] == [row[:2] + row[-1:] for row in table(theirs.stdout)]


@pytest.mark.parametrize("which, bootstrap, expected", [
    ("wrong-password", None, "authentication_failed (error code 58): authentication failed as User:collector"),
    ("nobody", None, "CLUSTER_AUTHORIZATION_FAILED (error code 31): authorization failed: User:nobody needs "
                     "DESCRIBE on the CLUSTER"),
    ("untrusted", None, "tls_failed: TLS handshake failed"),
    ("collector", "no-such-host.invalid:9092", "unknown_host"),
    ("mtls", "sasl", "tls_failed"),  # a TLS client on a SASL_PLAINTEXT listener
])
def test_a_refusal_is_named_with_what_to_fix_never_a_timeout(kafka, files, which, bootstrap, expected):
    server = {None: kafka.bootstrap, "sasl": kafka.sasl_plaintext_bootstrap}.get(bootstrap, bootstrap)
    started = time.monotonic()
    out = quorum("describe", "--bootstrap-server", server, "--command-config", str(files[which]), "--status",
                 "--timeout-ms", "5000")
    assert out.returncode == 1 and expected in out.stderr, out.stderr
    assert "timeout" not in out.stderr and time.monotonic() - started < 30
    assert_no_secret(kafka, out.stdout, out.stderr)


def test_an_unusable_property_is_refused_at_start_naming_key_and_client(kafka, files, tmp_path):
    bad = tmp_path / "gssapi.properties"
    bad.write_text("security.protocol=SASL_SSL\n")
    out = quorum("describe", "--bootstrap-server", kafka.bootstrap, "--command-config", str(bad), "--status")
    assert out.returncode == 2 and "sasl.mechanism: GSSAPI is not supported by quorum describe's admin client" \
        in out.stderr, out.stderr


def tail(kafka, files, topic: str, count: int, user: str = "job") -> subprocess.CompletedProcess:
    return quorum("tail", "--bootstrap-server", kafka.bootstrap, "--topic", topic, "--from-beginning",
                  "--max", str(count), "--command-config", str(files[user]), timeout_s=60)


def events_topic(kafka, writer: str | None = "collector") -> str:
    """A new events topic that `writer` may write and the job (the tests' reader) read."""
    topic = f"{EVENTS}-{uuid.uuid4().hex[:6]}"
    kafka.create_topic(topic, 1)
    if writer:
        kafka.grant(writer, "WRITE", "TOPIC", topic)
    kafka.grant("job", "READ", "TOPIC", topic)
    return topic


def test_the_collector_watches_and_publishes_on_a_secured_kafka_under_its_own_principal(kafka, files):
    topic = events_topic(kafka)
    out = quorum("collect", "--bootstrap-server", kafka.bootstrap, "--command-config", str(files["collector"]),
                 "--events-bootstrap-server", kafka.bootstrap, "--events-topic", topic,
                 "--events-command-config", str(files["collector"]), "--count", "3", "--interval-ms", "500")
    assert out.returncode == 0, out.stderr
    read = tail(kafka, files, topic, 3)
    assert read.returncode == 0, read.stderr
    assert read.stdout.count(" snapshot leader 1 ") == 3, read.stdout
    assert_no_secret(kafka, out.stdout, out.stderr, read.stdout, read.stderr)


def test_a_collector_refused_every_poll_publishes_why_and_exits_non_zero(kafka, files):
    topic = events_topic(kafka)
    out = quorum("collect", "--bootstrap-server", kafka.bootstrap, "--command-config", str(files["nobody"]),
                 "--events-bootstrap-server", kafka.bootstrap, "--events-topic", topic,
                 "--events-command-config", str(files["collector"]), "--count", "2", "--interval-ms", "500",
                 "--cluster-id", kafka.cluster_id)
    assert out.returncode == 1, out.stderr
    assert "User:nobody needs DESCRIBE on the CLUSTER" in out.stderr, out.stderr
    assert "every one of the 2 poll(s) failed to reach the quorum" in out.stderr, out.stderr
    read = tail(kafka, files, topic, 2)
    assert read.stdout.count("pollerr  CLUSTER_AUTHORIZATION_FAILED (code 31)") == 2, read.stdout + read.stderr
    assert_no_secret(kafka, out.stdout, out.stderr, read.stdout, read.stderr)


def test_refused_publishers_and_readers_say_which_acl_they_lack(kafka, files):
    topic = events_topic(kafka, writer=None)
    read = tail(kafka, files, topic, 1, user="nobody")
    assert read.returncode == 1 and "TOPIC_AUTHORIZATION_FAILED: authorization failed: User:nobody needs READ on " \
        f"the topic {topic}" in read.stderr, read.stderr
    read = tail(kafka, files, topic, 1, user="wrong-password")
    assert read.returncode == 1 and "authentication failed as User:collector" in read.stderr, read.stderr
    out = quorum("collect", "--bootstrap-server", kafka.bootstrap, "--command-config", str(files["collector"]),
                 "--events-bootstrap-server", kafka.bootstrap, "--events-topic", topic,
                 "--events-command-config", str(files["wrong-password"]), "--count", "2", "--interval-ms", "500")
    assert re.search(r"record\(s\) could not be published to the events topic \S+: authentication failed as "
                     r"User:collector", out.stderr), out.stderr
    out = quorum("collect", "--bootstrap-server", kafka.bootstrap, "--command-config", str(files["collector"]),
                 "--events-bootstrap-server", kafka.bootstrap, "--events-topic", topic,
                 "--events-command-config", str(files["nobody"]), "--count", "4", "--interval-ms", "500")
    assert f"authorization failed: User:nobody needs WRITE on the topic {topic}" in out.stderr, out.stderr
    assert_no_secret(kafka, read.stdout, read.stderr, out.stdout, out.stderr)


def test_the_projects_node_publishes_with_kafkas_properties_under_its_own_principal(kafka, files, tmp_path):
    from quorum.testing.local_cluster import Cluster
    topic = events_topic(kafka, writer="node")
    cluster = Cluster(tmp_path, voters=1, observers=0, events_bootstrap=kafka.bootstrap, events_topic=topic,
                      settings={"events.command.config": str(files["node"])})
    try:
        cluster.start()
        cluster.wait_leader()
        read = tail(kafka, files, topic, 30)  # the first records may come before the node leads
        assert read.returncode == 0 and " metrics  n1 leader " in read.stdout, read.stdout + read.stderr
        assert not read.stderr, read.stderr
        assert_no_secret(kafka, cluster.log_text(1), read.stdout, read.stderr)
    finally:
        cluster.stop_all()


def test_kafkas_own_tools_refuse_what_the_monitor_refuses(kafka, files):
    """The reference: Kafka's tool, with the same files, refuses the same principals."""
    out = kafka_tool(METADATA_QUORUM, "--bootstrap-server", kafka.bootstrap, "--command-config",
                     str(files["nobody"]), "describe", "--status")
    assert out.returncode != 0 and "ClusterAuthorizationException" in out.stdout + out.stderr
