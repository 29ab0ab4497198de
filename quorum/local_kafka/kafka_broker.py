"""Start and stop Apache Kafka on loopback: one node that is broker and controller at once
(KRaft, formatted `--standalone`), from the jars deploy/setup.sh fetches (quorum.jvm).

Used by the local launcher, the test fixtures and the benchmarks. The node keeps its data,
its configuration and its log in one directory (a temporary one unless given).
"""
from __future__ import annotations

import base64
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from quorum import jvm
from quorum.local_kafka import kafka_logging
from quorum.local_kafka.loopback_ports import free_port

DEFAULT_START_TIMEOUT_S = 90.0
DEFAULT_HEAP = "768m"
NODE_ID = 1

# Kafka's own defaults assume three brokers and a quiet machine: one node has no replicas to
# wait for, and tests want a consumer group to form without the three-second rebalance delay.
SINGLE_NODE_SETTINGS = {
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "num.partitions": "1",
    # two cores are shared with everything else the stack runs
    "num.network.threads": "2",
    "num.io.threads": "2",
    "background.threads": "2",
    "num.recovery.threads.per.data.dir": "1",
}

class BrokerError(RuntimeError):
    pass


def java_command(heap: str, log_config: Path, version: str | None = None) -> list[str]:
    """The JVM and its options for one Kafka process (a node or StorageTool) of Kafka `version`
    (None: the pinned default), its jars on the class path, its log set up by `log_config`
    (kafka_logging.write_config's file for the same version)."""
    return [jvm.java(), f"-Xmx{heap}", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true",
            kafka_logging.jvm_option(log_config, version), "-cp", jvm.kafka_classpath(version)]


def write_properties(path: Path, properties: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
    return path


def terminate(proc: subprocess.Popen | None, timeout_s: float) -> None:
    """SIGTERM (Kafka shuts down in order), SIGKILL after `timeout_s`; a stopped (SIGSTOP) process
    is continued first, or it would never see the SIGTERM."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGCONT)
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def random_cluster_id() -> str:
    """A cluster id in Kafka's form: a random UUID, base64url without padding. Like Kafka's
    Uuid.randomUuid, never one that starts with '-', which StorageTool's command line would take
    for an option (one start in 64 would fail)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def ensure_topic(bootstrap: str, name: str, partitions: int = 1, timeout_s: float = 30.0,
                 config: dict[str, str] | None = None, client_config: dict | None = None) -> None:
    """Create a topic if it does not exist and wait until its metadata shows every partition
    (`client_config`: librdkafka settings of a secured cluster's admin)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **(client_config or {})})
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1,
                                            config=config or {})])
    try:
        futures[name].result(timeout=timeout_s)
    except KafkaException as e:
        # a principal that may write the topic need not be allowed to create it: then it must exist
        if e.args[0].name() not in ("TOPIC_ALREADY_EXISTS", "TOPIC_AUTHORIZATION_FAILED",
                                    "CLUSTER_AUTHORIZATION_FAILED"):
            raise BrokerError(f"cannot create topic {name!r} on {bootstrap}: {e}") from None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        md = admin.list_topics(topic=name, timeout=5).topics.get(name)
        if md is not None and md.error is None and len(md.partitions) >= partitions \
                and all(p.leader >= 0 for p in md.partitions.values()):
            return
        time.sleep(0.05)
    raise BrokerError(f"topic {name!r} did not appear on {bootstrap} within {timeout_s:.0f}s")


class KafkaBroker:
    """One Apache Kafka node (broker + controller) on loopback ports; a context manager."""

    node_id = NODE_ID

    def __init__(self, port: int | None = None, host: str = "127.0.0.1",
                 data_dir: str | os.PathLike | None = None, log_path: str | os.PathLike | None = None,
                 heap: str = DEFAULT_HEAP, settings: dict[str, str] | None = None,
                 cluster_id: str | None = None):
        self.host = host
        self.port = port or free_port(host)
        self.controller_port = free_port(host)
        self.cluster_id = cluster_id or random_cluster_id()
        self.heap = heap
        self.settings = dict(settings or {})
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="kafka-"))
        self.log_path = Path(log_path) if log_path else self.data_dir / "kafka.log"
        self._proc: subprocess.Popen | None = None
        self._log_file = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def server_properties(self) -> dict[str, str]:
        listeners = f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}"
        return {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.bootstrap.servers": f"{self.host}:{self.controller_port}",
            "listeners": listeners,
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.data_dir / "data"),
            **SINGLE_NODE_SETTINGS,
            **self.settings,
        }

    def start(self, timeout_s: float = DEFAULT_START_TIMEOUT_S) -> "KafkaBroker":
        """Format the data directory (once), start the node and wait until it serves; a start
        that fails stops whatever it started and keeps its directory, log included."""
        try:
            self._launch(timeout_s)
        except BaseException:
            self.stop(keep_files=True)
            raise
        return self

    def _launch(self, timeout_s: float) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = write_properties(self.data_dir / "server.properties", self.server_properties())
        log4j = kafka_logging.write_config(self.data_dir)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_file = open(self.log_path, "ab")
        base = java_command(self.heap, log4j)
        # format once: a data directory that holds a node already keeps it
        if not (self.data_dir / "data" / "meta.properties").exists():
            fmt = subprocess.run(base + ["kafka.tools.StorageTool", "format", *self.format_arguments(),
                                         "--cluster-id", self.cluster_id, "--config", str(config)],
                                 stdout=self._log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            if fmt.returncode != 0:
                raise BrokerError(f"formatting Kafka's storage failed (exit {fmt.returncode}){self._log_hint()}")
        self._proc = subprocess.Popen(base + ["kafka.Kafka", str(config)], stdout=self._log_file,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        self._await_ready(timeout_s)

    def _await_ready(self, timeout_s: float) -> None:
        """Ready when a metadata request lists this node as a broker (registered and unfenced)."""
        deadline = time.monotonic() + timeout_s
        # log_level 0: the refused connections while the JVM boots are expected, not news.
        admin = AdminClient({**self.admin_client_config(), "log_level": 0})
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise BrokerError(f"Kafka exited with code {self._proc.returncode} while starting{self._log_hint()}")
            try:
                if self.node_id in admin.list_topics(timeout=1).brokers:
                    return
            except KafkaException as e:
                last_error = e
            time.sleep(0.1)
        raise BrokerError(f"Kafka on {self.bootstrap} did not answer within {timeout_s:.0f}s: {last_error}"
                          f"{self._log_hint()}")

    def _log_hint(self) -> str:
        return f" (log: {self.log_path})"

    def format_arguments(self) -> list[str]:
        """StorageTool format's options besides the cluster id and the config."""
        return ["--standalone"]

    def admin_client_config(self) -> dict:
        """librdkafka settings of an admin of this node (a secured node's super user)."""
        return {"bootstrap.servers": self.bootstrap}

    def create_topic(self, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> str:
        admin = self.admin_client_config()
        ensure_topic(admin["bootstrap.servers"], name, partitions, config=config, client_config=admin)
        return name

    def stop(self, timeout_s: float = 30.0, keep_files: bool = False) -> None:
        """SIGTERM (Kafka shuts down in order), SIGKILL after `timeout_s`; then the temporary
        directory, if this object made it, is removed unless `keep_files`."""
        proc, self._proc = self._proc, None
        terminate(proc, timeout_s)
        self._close_log()
        if self._own_dir and not keep_files:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def _close_log(self) -> None:
        if self._log_file:
            self._log_file.close()
            self._log_file = None

    def __enter__(self) -> "KafkaBroker":
        return self.start() if self._proc is None else self

    def __exit__(self, *exc) -> None:
        self.stop()
