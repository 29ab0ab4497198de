"""A Kafka node secured as production clusters are: TLS, SASL users, ACLs under
StandardAuthorizer. For `deploy/run-local --secure` and the tests.

Listeners (all on loopback):
- SECURE: SASL_SSL with SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN; the inter-broker listener,
  the node itself logging in as the super user `admin`.
- MTLS: SSL with client certificates required (the principal is the certificate's subject).
- SASL_PLAIN: SASL_PLAINTEXT with PLAIN and SCRAM (no TLS).
- CONTROLLER: SASL_SSL with the same mechanisms, where `--bootstrap-controller` clients ask
  (KIP-919). The node's own broker logs in to it as `admin` with PLAIN
  (`sasl.mechanism.controller.protocol`): PLAIN's users are in the listener's JAAS config,
  while SCRAM's live in the metadata log the controller serves.

A node is broker and controller at once (`role` "combined"), or one of a secured cluster whose
controller runs apart (secured_cluster.py): `role` "controller" has the CONTROLLER listener
alone, `role` "broker" the three client listeners and the controller of `controller`.

Each user is made at format time (`kafka-storage format --add-scram`, KIP-900) with a random
password, and has no ACL until granted one; `properties(user)` is the client properties file a
user of that principal writes, in Kafka's own names.
"""
from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

from quorum.kafka_client import kafka_client_properties
from quorum.local_kafka.kafka_broker import BrokerError, KafkaBroker, write_properties
from quorum.local_kafka.local_certificates import Certificates, make as make_certificates
from quorum.local_kafka.loopback_ports import free_port

ADMIN = "admin"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def jaas(module: str, user: str, password: str) -> str:
    return f'{module} required username="{user}" password="{password}";'


ROLES = ("combined", "controller", "broker")
MECHANISMS = "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN"


class SecuredKafka(KafkaBroker):
    """One Kafka node with TLS, SASL and ACLs; `users` are the principals to create besides
    `admin` (each gets a random password). A `role` "broker" node takes its users, passwords and
    certificates from `controller`, whose quorum it joins."""

    def __init__(self, users: tuple[str, ...] = (), certificates: Certificates | None = None,
                 role: str = "combined", controller: "SecuredKafka | None" = None, **kwargs):
        if role not in ROLES or (role == "broker") != (controller is not None):
            raise ValueError(f"role {role!r}: one of {ROLES}; a broker, and only a broker, takes its controller")
        if controller is not None:
            kwargs.setdefault("cluster_id", controller.cluster_id)
        super().__init__(**kwargs)
        self.role, self.controller = role, controller
        if controller is not None:
            self.node_id = controller.node_id + 1
            certificates, self.passwords = controller.certificates, controller.passwords
        else:
            self.passwords = {u: secrets.token_urlsafe(15) for u in (ADMIN, *users)}
        self.certificates = certificates or make_certificates(self.data_dir / "tls")
        self.mtls_port = free_port(self.host)
        self.sasl_plaintext_port = free_port(self.host)

    @property
    def mtls_bootstrap(self) -> str:
        return f"{self.host}:{self.mtls_port}"

    @property
    def sasl_plaintext_bootstrap(self) -> str:
        return f"{self.host}:{self.sasl_plaintext_port}"

    @property
    def controller_bootstrap(self) -> str:
        """The CONTROLLER listener that `--bootstrap-controller` takes."""
        node = self.controller or self
        return f"{node.host}:{node.controller_port}"

    def server_properties(self) -> dict[str, str]:
        c = self.certificates
        props = super().server_properties()
        for key in ("advertised.listeners", "inter.broker.listener.name"):
            props.pop(key)
        props.update({
            "listener.security.protocol.map": "SECURE:SASL_SSL,MTLS:SSL,SASL_PLAIN:SASL_PLAINTEXT,CONTROLLER:SASL_SSL",
            "sasl.enabled.mechanisms": MECHANISMS,
            "sasl.mechanism.controller.protocol": "PLAIN",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": f"User:{ADMIN}",
            "allow.everyone.if.no.acl.found": "false",
            "ssl.keystore.location": str(c.server_keystore),
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.password": c.password,
            "ssl.key.password": c.password,
            "ssl.truststore.location": str(c.truststore("JKS")),
            "ssl.truststore.password": c.password,
            "listener.name.mtls.ssl.client.auth": "required",
            **self._listeners(),
        })
        for listener in ("secure", "sasl_plain", "controller"):
            props.update(self._jaas(listener))
        return props

    def _listeners(self) -> dict[str, str]:
        h = self.host
        clients = f"SECURE://{h}:{self.port},MTLS://{h}:{self.mtls_port},SASL_PLAIN://{h}:{self.sasl_plaintext_port}"
        controller = f"CONTROLLER://{h}:{self.controller_port}"
        if self.role == "controller":
            return {"process.roles": "controller", "listeners": controller}
        brokers = {"advertised.listeners": clients, "inter.broker.listener.name": "SECURE",
                   "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"}
        if self.role == "broker":
            return {"process.roles": "broker", "listeners": clients,
                    "controller.quorum.bootstrap.servers": self.controller_bootstrap, **brokers}
        return {"listeners": f"{clients},{controller}", **brokers}

    def _jaas(self, listener: str) -> dict[str, str]:
        """The listener's login modules: the node's own login as `admin`, and PLAIN's users."""
        admin_password = self.passwords[ADMIN]
        users = "".join(f' user_{u}="{p}"' for u, p in self.passwords.items())
        prefix = f"listener.name.{listener}"
        return {f"{prefix}.scram-sha-512.sasl.jaas.config": jaas(SCRAM, ADMIN, admin_password),
                f"{prefix}.scram-sha-256.sasl.jaas.config": jaas(SCRAM, ADMIN, admin_password),
                f"{prefix}.plain.sasl.jaas.config":
                    f'{PLAIN} required username="{ADMIN}" password="{admin_password}"{users};'}

    def _launch(self, timeout_s: float) -> None:
        # server.properties holds the stores' and the admin's passwords: its owner's alone
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir.chmod(0o700)
        super()._launch(timeout_s)

    def _await_ready(self, timeout_s: float) -> None:
        if self.role != "controller":
            return super()._await_ready(timeout_s)
        # a controller alone serves no metadata: ready when it takes the admin's login
        from quorum.kafka_client.kafka_login_probe import LoginProbeError, login_failure
        config = kafka_client_properties.kafka_python_config(self.properties(ADMIN, mechanism="PLAIN"),
                                                             "the test harness's admin")
        deadline = time.monotonic() + timeout_s
        failure: object = None
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise BrokerError(f"Kafka exited with code {self._proc.returncode} while starting{self._log_hint()}")
            try:
                failure = login_failure(self.controller_bootstrap, config, 1.0)
            except LoginProbeError as e:
                failure = e
            if failure is None:
                return
            time.sleep(0.1)
        raise BrokerError(f"Kafka's controller on {self.controller_bootstrap} took no login within "
                          f"{timeout_s:.0f}s: {failure}{self._log_hint()}")

    def format_arguments(self) -> list[str]:
        if self.role == "broker":  # its controller's metadata holds the users
            return ["--no-initial-controllers"]
        args = ["--standalone"]
        for user, password in self.passwords.items():
            for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
                args += ["--add-scram", f"{mechanism}=[name={user},password={password}]"]
        return args

    def properties(self, user: str, mechanism: str = "SCRAM-SHA-512", truststore: str = "JKS",
                   password: str | None = None) -> dict[str, str]:
        """A client's properties for `user` on the SECURE or the CONTROLLER listener (SASL_SSL)."""
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
        """librdkafka settings of the admin (a controller alone has no broker to ask: its broker's)."""
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
