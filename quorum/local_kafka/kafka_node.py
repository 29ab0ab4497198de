"""One process of a local Kafka cluster (kafka_cluster.py): its role, ports, data directory and
process, and the JMX exporter agent that serves its metrics."""
from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from quorum import jvm
from quorum.local_kafka.kafka_broker import random_cluster_id

JMX_EXPORTER_RULES = jvm.REPOSITORY / "deploy" / "kafka-jmx-exporter.yml"
CONTROLLER_HEAP = "256m"
BROKER_HEAP = "512m"


def random_directory_id() -> str:
    """A directory id as Kafka writes it: the same form as a cluster id."""
    return random_cluster_id()


def jmx_exporter_agent(host: str, port: int) -> str:
    """The JVM option that attaches the JMX exporter, with the project's Kafka rules."""
    return f"-javaagent:{jvm.jars(jvm.JMX_EXPORTER)[0]}={host}:{port}:{JMX_EXPORTER_RULES}"


@dataclass
class KafkaNode:
    """One process of the cluster: a controller, a broker, or both (combined)."""
    node_id: int
    role: str  # "controller", "broker" or "combined"
    port: int  # its client (PLAINTEXT) listener; a dedicated controller's CONTROLLER listener
    data_dir: Path
    controller_port: int | None = None  # its CONTROLLER listener (a dedicated controller's is `port`)
    directory_id: str = field(default_factory=random_directory_id)
    metrics_port: int | None = None  # the JMX exporter agent's HTTP port, when attached
    proc: subprocess.Popen | None = None
    log_file: object = None

    @property
    def is_controller(self) -> bool:
        return self.role in ("controller", "combined")

    @property
    def is_broker(self) -> bool:
        return self.role in ("broker", "combined")

    @property
    def process_roles(self) -> str:
        return "broker,controller" if self.role == "combined" else self.role

    @property
    def log_path(self) -> Path:
        return self.data_dir / "kafka.log"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None
