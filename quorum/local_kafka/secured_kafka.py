"""A Kafka node secured as production clusters are: TLS, SASL users, ACLs under
StandardAuthorizer. For `deploy/run-local --secure` and the tests.

Listeners (all on loopback):
- SECURE: SASL_SSL with SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN; the inter-broker listener,
  the node itself logging in as the super user `admin`.
- MTLS: SSL with client certificates required (the principal is the certificate's subject).
- SASL_PLAIN: SASL_PLAINTEXT with PLAIN and SCRAM (no TLS).
- CONTROLLER: PLAINTEXT, for the node's own controller.

Each user is made at format time (`kafka-storage format --add-scram`, KIP-900) with a random
password, and has no ACL until granted one; `properties(user)` is the client properties file a
user of that principal writes, in Kafka's own names.
"""
from __future__ import annotations

import os
import secrets
from pathlib import Path

from quorum.kafka_client import kafka_client_properties
from quorum.local_kafka.kafka_broker import KafkaBroker, write_properties
from quorum.local_kafka.local_certificates import Certificates, make as make_certificates
from quorum.local_kafka.loopback_ports import free_port

ADMIN = "admin"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def jaas(module: str, user: str, password: str) -> str:
    return f'{module} required username="{user}" password="{password}";'


class SecuredKafka(KafkaBroker):
    """One Kafka node (broker + controller) with TLS, SASL and ACLs; `users` are the principals
    to create besides `admin` (each gets a random password)."""

    def __init__(self, users: tuple[str, ...] = (), certificates: Certificates | None = None, **kwargs):
        super().__init__(**kwargs)
        self.certificates = certificates or make_certificates(self.data_dir / "tls")
        self.passwords = {u: secrets.token_urlsafe(15) for u in (ADMIN, *users)}
        self.mtls_port = free_port(self.host)
        self.sasl_plaintext_port = free_port(self.host)

    @property
    def mtls_bootstrap(self) -> str:
        return f"{self.host}:{self.mtls_port}"

    @property
    def sasl_plaintext_bootstrap(self) -> str:
        return f"{self.host}:{self.sasl_plaintext_port}"

    def server_properties(self) -> dict[str, str]:
        h, c = self.host, self.certificates
        users = "".join(f' user_{u}="{p}"' for u, p in self.passwords.items())
        admin_password = self.passwords[ADMIN]
        props = super().server_properties()
        props.update({
            "listeners": f"SECURE://{h}:{self.port},MTLS://{h}:{self.mtls_port},"
                         f"SASL_PLAIN://{h}:{self.sasl_plaintext_port},CONTROLLER://{h}:{self.controller_port}",
            "advertised.listeners": f"SECURE://{h}:{self.port},MTLS://{h}:{self.mtls_port},"
                                    f"SASL_PLAIN://{h}:{self.sasl_plaintext_port}",
            "listener.security.protocol.map": "SECURE:SASL_SSL,MTLS:SSL,SASL_PLAIN:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "SECURE",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            # the controller listener is PLAINTEXT (ANONYMOUS): the node's own broker talks to it
            "super.users": f"User:{ADMIN};User:ANONYMOUS",
            "allow.everyone.if.no.acl.found": "false",
            "ssl.keystore.location": str(c.server_keystore),
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.password": c.password,
            "ssl.key.password": c.password,
            "ssl.truststore.location": str(c.truststore("JKS")),
            "ssl.truststore.password": c.password,
            "listener.name.mtls.ssl.client.auth": "required",
        })
        for listener in ("secure", "sasl_plain"):
            props[f"listener.name.{listener}.scram-sha-512.sasl.jaas.config"] = jaas(SCRAM, ADMIN, admin_password)
            props[f"listener.name.{listener}.scram-sha-256.sasl.jaas.config"] = jaas(SCRAM, ADMIN, admin_password)
            props[f"listener.name.{listener}.plain.sasl.jaas.config"] = \
                f'{PLAIN} required username="{ADMIN}" password="{admin_password}"{users};'
        return props

    def _launch(self, timeout_s: float) -> None:
        # server.properties holds the stores' and the admin's passwords: its owner's alone
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir.chmod(0o700)
        super()._launch(timeout_s)

    def format_arguments(self) -> list[str]:
        args = ["--standalone"]
        for user, password in self.passwords.items():
            for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
                args += ["--add-scram", f"{mechanism}=[name={user},password={password}]"]
        return args

    def properties(self, user: str, mechanism: str = "SCRAM-SHA-512", truststore: str = "JKS",
                   password: str | None = None) -> dict[str, str]:
        """A client's properties for `user` on the SECURE listener (SASL_SSL)."""
        module = PLAIN if mechanism == "PLAIN" else SCRAM
        c = self.certificates
        props = {"security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
                 "sasl.jaas.config": jaas(module, user, password if password is not None else self.passwords[user]),
                 "ssl.truststore.location": str(c.truststore(truststore)), "ssl.truststore.type": truststore}
        if truststore != "PEM":
            props["ssl.truststore.password"] = c.password
        return props

    def write_properties(self, path: str | os.PathLike, props: dict[str, str]) -> Path:
        """`props` as a properties file only its owner may read."""
        path = Path(path)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.close(fd)
        return write_properties(path, props)

    def admin_client_config(self) -> dict:
        return {"bootstrap.servers": self.bootstrap,
                **kafka_client_properties.librdkafka_config(self.properties(ADMIN), "the test harness's admin")}

    def grant(self, principal: str, operation: str, resource_type: str, name: str = "kafka-cluster",
              pattern: str = "LITERAL") -> None:
        """An ALLOW ACL: `grant("collector", "DESCRIBE", "CLUSTER")`, `grant("job", "READ", "TOPIC", "quorum-events")`."""
        from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                           ResourcePatternType, ResourceType)
        admin = AdminClient({**self.admin_client_config(), "log_level": 0})
        kind = "BROKER" if resource_type == "CLUSTER" else resource_type  # librdkafka's name for it
        binding = AclBinding(ResourceType[kind], name, ResourcePatternType[pattern], f"User:{principal}", "*",
                             AclOperation[operation], AclPermissionType.ALLOW)
        for future in admin.create_acls([binding]).values():
            future.result(timeout=30)
