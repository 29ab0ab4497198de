"""`deploy/run-local --secure`: the stack's Kafka secured as production clusters are (TLS, SCRAM
users, StandardAuthorizer ACLs: quorum/local_kafka/secured_kafka.py), each part of the monitor under its own
principal with only the ACLs docs/deployment.md lists, configured with Kafka's own client
properties files.

The files land in RUN_DIR/credentials (only its owner may read it): one `PRINCIPAL.properties`
per part, `admin.properties` for Kafka's own tools, and the TLS stores.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from quorum.local_kafka.local_certificates import make as make_certificates
from quorum.local_kafka.secured_kafka import ADMIN, SecuredKafka

PRINCIPALS = ("collector", "job", "node")


@dataclass(frozen=True)
class Credentials:
    directory: Path

    def properties(self, principal: str) -> Path:
        return self.directory / f"{principal}.properties"


def start(run_dir: Path, port: int, log_path: Path, events_topic: str, health_topic: str, partitions: int
          ) -> tuple[SecuredKafka, Credentials]:
    """The secured broker with its topics and ACLs, and every principal's properties file."""
    directory = run_dir / "credentials"
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    kafka = SecuredKafka(users=PRINCIPALS, certificates=make_certificates(directory / "tls"), port=port,
                         data_dir=run_dir / "kafka", log_path=log_path).start()
    kafka.create_topic(events_topic, partitions)
    kafka.create_topic(health_topic, 1)
    # docs/deployment.md, "The ACLs each part needs"
    kafka.grant("collector", "DESCRIBE", "CLUSTER")
    for principal in ("collector", "node"):
        kafka.grant(principal, "WRITE", "TOPIC", events_topic)
    kafka.grant("job", "READ", "TOPIC", events_topic)
    kafka.grant("job", "WRITE", "TOPIC", health_topic)
    credentials = Credentials(directory)
    for principal in (*PRINCIPALS, ADMIN):
        kafka.write_properties(credentials.properties(principal), kafka.properties(principal))
    return kafka, credentials
