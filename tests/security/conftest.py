"""The security suites' fixtures: one set of certificates and stores, and one secured Kafka
with a principal per part of the monitor, per session."""
from __future__ import annotations

from pathlib import Path

import pytest

from kafka_tools import kafka_tool
from quorum.local_kafka.local_certificates import Certificates, make
from quorum.local_kafka.secured_kafka import ADMIN, SecuredKafka

USERS = ("collector", "job", "node", "nobody")
DOC = Path(__file__).resolve().parents[2] / "docs" / "deployment.md"
ACL_COMMAND = "org.apache.kafka.tools.AclCommand"


def documented_acl_commands() -> list[list[str]]:
    """The `kafka-acls` commands of docs/deployment.md's "The ACLs each part needs", as arguments."""
    text = DOC.read_text()
    section = text[text.index("### The ACLs each part needs"):]
    section = section[:section.index("\n### ", 1)]
    commands = [line.split()[1:] for line in section.splitlines() if line.startswith("kafka-acls ")]
    assert len(commands) >= 4, "docs/deployment.md lost its kafka-acls commands"
    return commands

EVENTS = "quorum-events"
HEALTH = "quorum-health"


@pytest.fixture(scope="session")
def local_certificates(tmp_path_factory) -> Certificates:
    return make(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="session")
def kafka(tmp_path_factory, local_certificates):
    with SecuredKafka(users=USERS, certificates=local_certificates,
                      log_path=tmp_path_factory.mktemp("secured") / "kafka.log") as k:
        k.create_topic(EVENTS, 2)
        k.create_topic(HEALTH, 1)
        # least privilege: exactly docs/deployment.md's commands, run by Kafka's own kafka-acls
        admin = k.write_properties(k.data_dir / "admin.properties", k.properties(ADMIN))
        for args in documented_acl_commands():
            args = [{"BROKER:9093": k.bootstrap, "admin.properties": str(admin)}.get(a, a) for a in args]
            done = kafka_tool(ACL_COMMAND, *args)
            assert done.returncode == 0, done.stdout + done.stderr
        k.grant("CN=monitor-client", "DESCRIBE", "CLUSTER")  # the mutual-TLS principal
        yield k


@pytest.fixture(scope="session")
def files(kafka, tmp_path_factory) -> dict[str, Path]:
    """Each principal's properties file, and the broken ones."""
    d = tmp_path_factory.mktemp("properties")
    c = kafka.certificates
    out = {user: kafka.write_properties(d / f"{user}.properties", kafka.properties(user)) for user in USERS}
    out["wrong-password"] = kafka.write_properties(d / "wrong.properties",
                                                   kafka.properties("collector", password="not-the-password"))
    out["untrusted"] = kafka.write_properties(d / "untrusted.properties", {
        **kafka.properties("collector"), "ssl.truststore.location": str(c.other_ca_truststore())})
    out["plain-pkcs12"] = kafka.write_properties(d / "plain.properties",
                                                 kafka.properties("collector", mechanism="PLAIN", truststore="PKCS12"))
    out["mtls"] = kafka.write_properties(d / "mtls.properties", {
        "security.protocol": "SSL", "ssl.truststore.location": str(c.truststore("PEM")), "ssl.truststore.type": "PEM",
        "ssl.keystore.location": str(c.client_keystore("JKS")), "ssl.keystore.password": c.password,
        "ssl.key.password": c.password})
    return out


def secrets_of(kafka) -> list[str]:
    return [*kafka.passwords.values(), kafka.certificates.password]


def assert_no_secret(kafka, *texts: str) -> None:
    for text in texts:
        for secret in secrets_of(kafka):
            assert secret not in text
