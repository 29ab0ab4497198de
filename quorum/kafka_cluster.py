"""A real Apache Kafka KRaft cluster on loopback: dedicated controllers (three by default),
formatted with `--initial-controllers` so that the voter set is dynamic (KIP-853) as Kafka 4.x
makes it, and brokers (one by default), which follow the quorum as observers. With
`other_voters` (voters outside the cluster: a project node's id and port) the quorum is static
instead (`controller.quorum.voters`, kraft.version 0) and they are among its voters.

Each node has its own ports, data directory and log under one base directory. Faults are the
real ones: a node is frozen (SIGSTOP), killed (SIGKILL), stopped in order or restarted from its
data. With `cgroup_parent` each node runs in a cgroup of its own from its first instruction, so
kernel packet-filter rules can tell its traffic apart (see tests/packet_filter.py).

  with KafkaCluster() as cluster:
      cluster.bootstrap              # the brokers, for clients and `quorum collect`
      cluster.bootstrap_controllers  # the controllers, for `kafka-metadata-quorum --bootstrap-controller`
      cluster.leader()
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from quorum import jvm
from quorum.cgroup import preexec_joining
from quorum.describe_tool import DescribeError, QuorumInfo, fetch_quorum, quorum_info
from quorum.kafka_broker import (LOG4J2_PROPERTIES, SINGLE_NODE_SETTINGS, BrokerError, java_command,
                                 random_cluster_id, terminate, write_properties)
from quorum.loopback_ports import free_port
from quorum.node.peer_client import describe_quorum_directly

DEFAULT_START_TIMEOUT_S = 120.0
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
    """One process of the cluster: a controller or a broker."""
    node_id: int
    role: str  # "controller" or "broker"
    port: int
    data_dir: Path
    directory_id: str = field(default_factory=random_directory_id)
    metrics_port: int | None = None  # the JMX exporter agent's HTTP port, when attached
    proc: subprocess.Popen | None = None
    log_file: object = None

    @property
    def log_path(self) -> Path:
        return self.data_dir / "kafka.log"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class KafkaCluster:
    """Controllers 1..N (voters at the start) and brokers N+1.. on loopback; a context manager."""

    def __init__(self, controllers: int = 3, brokers: int = 1, base_dir: str | os.PathLike | None = None,
                 host: str = "127.0.0.1", cluster_id: str | None = None, cgroup_parent: Path | None = None,
                 controller_heap: str = CONTROLLER_HEAP, broker_heap: str = BROKER_HEAP,
                 settings: dict[str, str] | None = None, jmx_exporter: bool = False,
                 other_voters: dict[int, int] | None = None):
        """`jmx_exporter`: attach the Prometheus JMX exporter agent to every node, serving
        Kafka's metrics (raft-metrics among them) at `metrics_url(node_id)`. `other_voters`: id ->
        loopback port of voters that are not Kafka nodes; the quorum is then static."""
        self.host = host
        self.other_voters = dict(other_voters or {})
        self.jmx_exporter = jmx_exporter
        self.cluster_id = cluster_id or random_cluster_id()
        self._own_dir = base_dir is None
        self.base_dir = Path(base_dir) if base_dir else Path(tempfile.mkdtemp(prefix="kafka-cluster-"))
        self.cgroup_parent = cgroup_parent
        self.heap = {"controller": controller_heap, "broker": broker_heap}
        self.settings = dict(settings or {})
        self.nodes: dict[int, KafkaNode] = {}
        for i in range(1, controllers + 1):
            self._add_node(i, "controller")
        for i in range(controllers + 1, controllers + brokers + 1):
            self._add_node(i, "broker")
        self.initial_controllers = self.controller_ids()

    def _add_node(self, node_id: int, role: str) -> KafkaNode:
        node = KafkaNode(node_id, role, free_port(self.host), self.base_dir / f"{role}-{node_id}",
                         metrics_port=free_port(self.host) if self.jmx_exporter else None)
        self.nodes[node_id] = node
        return node

    # --- addresses --------------------------------------------------------------------------------

    def controller_ids(self) -> list[int]:
        return sorted(i for i, n in self.nodes.items() if n.role == "controller")

    def broker_ids(self) -> list[int]:
        return sorted(i for i, n in self.nodes.items() if n.role == "broker")

    def endpoint(self, node_id: int) -> str:
        return f"{self.host}:{self.nodes[node_id].port}"

    def metrics_url(self, node_id: int) -> str:
        return f"http://{self.host}:{self.nodes[node_id].metrics_port}/metrics"

    @property
    def bootstrap(self) -> str:
        return ",".join(self.endpoint(i) for i in self.broker_ids())

    @property
    def static_voters(self) -> str:
        """`controller.quorum.voters` of a static quorum: the controllers and the other voters."""
        ports = {**{i: self.nodes[i].port for i in self.initial_controllers}, **self.other_voters}
        return ",".join(f"{i}@{self.host}:{ports[i]}" for i in sorted(ports))

    def voter_ids(self) -> list[int]:
        return sorted([*self.initial_controllers, *self.other_voters])

    @property
    def bootstrap_controllers(self) -> str:
        return ",".join(self.endpoint(i) for i in self.controller_ids())

    def properties(self, node: KafkaNode) -> dict[str, str]:
        # static: the voters, fixed; dynamic: the controllers a node starts from, the voter set
        # itself living in the metadata log
        quorum = {"controller.quorum.voters": self.static_voters} if self.other_voters else {
            "controller.quorum.bootstrap.servers": ",".join(self.endpoint(i) for i in self.initial_controllers)}
        common = {
            "node.id": str(node.node_id),
            **quorum,
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(node.data_dir / "data"),
            **SINGLE_NODE_SETTINGS,
        }
        if node.role == "controller":
            own = {"process.roles": "controller", "listeners": f"CONTROLLER://{self.endpoint(node.node_id)}"}
        else:
            own = {"process.roles": "broker", "listeners": f"PLAINTEXT://{self.endpoint(node.node_id)}",
                   "advertised.listeners": f"PLAINTEXT://{self.endpoint(node.node_id)}",
                   "inter.broker.listener.name": "PLAINTEXT"}
        return {**common, **own, **self.settings}

    # --- life cycle -------------------------------------------------------------------------------

    def start(self, timeout_s: float = DEFAULT_START_TIMEOUT_S, await_quorum: bool = True) -> "KafkaCluster":
        """Format every node (once), start them all and wait until the quorum has a leader that
        every voter and broker fetches from, and every broker is registered. Without
        `await_quorum` (a static quorum whose other voters start later) the controllers start
        and nothing is awaited."""
        try:
            for node in self.nodes.values():
                self._format(node, initial=node.node_id in self.initial_controllers)
            # Brokers once the controllers have elected a leader they all follow: a broker started
            # while the first elections still flip can keep asking a controller that is no longer
            # active, and give up registering after a minute (seen with Kafka 4.4.0)
            for node_id in self.controller_ids():
                self._spawn(self.nodes[node_id])
            if not await_quorum:
                return self
            self.wait_for(self._controllers_formed, timeout_s, "a controller leader every controller follows")
            if self.broker_ids():
                for node_id in self.broker_ids():
                    self._spawn(self.nodes[node_id])
                admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
                self.wait_for(lambda: self._formed(admin), timeout_s,
                              "a leader, every node fetching and every broker registered")
        except BaseException:
            self.stop(keep_files=True)
            raise
        return self

    def _format(self, node: KafkaNode, initial: bool) -> None:
        if (node.data_dir / "data" / "meta.properties").exists():
            return
        config = self._write_files(node)
        if self.other_voters:  # static: the voters come from controller.quorum.voters
            quorum_args = []
        elif initial:  # the voter set of the cluster's first metadata: the initial controllers
            voters = ",".join(f"{i}@{self.endpoint(i)}:{self.nodes[i].directory_id}" for i in self.initial_controllers)
            quorum_args = ["--initial-controllers", voters]
        else:  # a broker, or a controller that joins later through add-controller
            quorum_args = ["--no-initial-controllers"]
        with open(node.log_path, "ab") as log:
            fmt = subprocess.run(java_command("256m", node.data_dir / "log4j2.properties")
                                 + ["kafka.tools.StorageTool", "format", "--cluster-id", self.cluster_id,
                                    "--config", str(config), *quorum_args],
                                 stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        if fmt.returncode != 0:
            raise BrokerError(f"formatting {node.role} {node.node_id}'s storage failed (exit {fmt.returncode});"
                              f" log: {node.log_path}")
        meta = (node.data_dir / "data" / "meta.properties").read_text()
        node.directory_id = next(line.split("=", 1)[1] for line in meta.splitlines() if line.startswith("directory.id="))

    def _write_files(self, node: KafkaNode) -> Path:
        node.data_dir.mkdir(parents=True, exist_ok=True)
        (node.data_dir / "log4j2.properties").write_text(LOG4J2_PROPERTIES)
        return write_properties(node.data_dir / "server.properties", self.properties(node))

    def _spawn(self, node: KafkaNode) -> None:
        self._write_files(node)
        node.log_file = open(node.log_path, "ab")
        agent = [jmx_exporter_agent(self.host, node.metrics_port)] if node.metrics_port else []
        node.proc = subprocess.Popen(java_command(self.heap[node.role], node.data_dir / "log4j2.properties")
                                     + agent + ["kafka.Kafka", str(node.data_dir / "server.properties")],
                                     stdout=node.log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True, preexec_fn=preexec_joining(self.cgroup_of(node.node_id)))

    def cgroup_of(self, node_id: int) -> Path | None:
        return self.cgroup_parent / f"node-{node_id}" if self.cgroup_parent is not None else None

    def add_controller_node(self) -> int:
        """Start a new controller that is not a voter: formatted with --no-initial-controllers it
        follows the quorum as an observer until `kafka-metadata-quorum add-controller` makes it one."""
        node = self._add_node(max(self.nodes) + 1, "controller")
        self._format(node, initial=False)
        self._spawn(node)
        return node.node_id

    def retire(self, node_id: int) -> None:
        """Stop a node for good (one removed from the voter set, say) and forget it."""
        self.stop_node(node_id)
        cgroup = self.cgroup_of(node_id)
        if cgroup is not None and cgroup.exists():
            cgroup.rmdir()
        del self.nodes[node_id]

    def freeze(self, node_id: int) -> None:
        self.nodes[node_id].proc.send_signal(signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        self.nodes[node_id].proc.send_signal(signal.SIGCONT)

    def kill(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.running():
            node.proc.kill()
            node.proc.wait()
        self._close(node)

    def stop_node(self, node_id: int, timeout_s: float = 30.0) -> None:
        node = self.nodes[node_id]
        terminate(node.proc, timeout_s)
        self._close(node)

    def restart(self, node_id: int) -> None:
        """Start a stopped or killed node again from its data."""
        node = self.nodes[node_id]
        if node.running():
            raise BrokerError(f"{node.role} {node_id} is running")
        self._spawn(node)

    def _close(self, node: KafkaNode) -> None:
        node.proc = None  # stopped on purpose: wait_for does not count it as a crash
        if node.log_file:
            node.log_file.close()
            node.log_file = None

    def stop(self, timeout_s: float = 30.0, keep_files: bool = False) -> None:
        """Brokers first, then the controllers (a broker shuts down in order only while the
        quorum answers); the base directory, if this object made it, goes unless `keep_files`."""
        for node_id in self.broker_ids() + self.controller_ids():
            self.stop_node(node_id, timeout_s)
        for node_id in self.nodes:
            cgroup = self.cgroup_of(node_id)
            if cgroup is not None and cgroup.exists():
                cgroup.rmdir()
        if self._own_dir and not keep_files:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> "KafkaCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- what the quorum says ---------------------------------------------------------------------

    def describe(self, timeout_ms: int = 3000) -> QuorumInfo:
        """DescribeQuorum, through the brokers; without brokers, from whichever voter leads."""
        if self.broker_ids():
            _, answer = fetch_quorum(self.bootstrap, {}, timeout_ms)
            return quorum_info(answer)
        ports = {**{i: n.port for i, n in self.nodes.items() if n.role == "controller"}, **self.other_voters}
        for node_id, port in sorted(ports.items()):
            try:
                return quorum_info(describe_quorum_directly(node_id, self.host, port, timeout_ms / 1000))
            except (OSError, DescribeError):
                continue
        raise DescribeError("no voter answered DescribeQuorum as the leader")

    def leader(self) -> int:
        return self.describe().leader_id

    def followers(self) -> list[int]:
        info = self.describe()
        return sorted(v.replica_id for v in info.voters if v.replica_id != info.leader_id)

    def wait_for(self, condition, timeout_s: float, what: str):
        """Poll `condition` (exceptions count as not yet) until it returns something true."""
        deadline = time.monotonic() + timeout_s
        last: Exception | None = None
        while time.monotonic() < deadline:
            for node in self.nodes.values():
                if node.proc is not None and node.proc.poll() is not None:
                    raise BrokerError(f"{node.role} {node.node_id} exited with code {node.proc.returncode};"
                                      f" log: {node.log_path}")
            try:
                value = condition()
                if value:
                    return value
            except Exception as e:  # noqa: BLE001 - a node still booting answers with anything
                last = e
            time.sleep(0.2)
        raise BrokerError(f"no {what} within {timeout_s:.0f}s (last error: {last}); logs under {self.base_dir}")

    def every_replica_fetching(self, within_ms: int = 1500) -> QuorumInfo | None:
        """The quorum's state when it has a leader and every running voter and observer fetched
        from it within `within_ms` and is caught up; None otherwise."""
        info = self.describe()
        now = int(time.time() * 1000)
        running = {i for i, n in self.nodes.items() if n.running()}
        replicas = [r for r in info.voters + info.observers if r.replica_id in running]
        if info.leader_id < 0 or not replicas:
            return None
        fresh = all(r.replica_id == info.leader_id or
                    (now - r.last_fetch_timestamp <= within_ms and now - r.last_caught_up_timestamp <= within_ms)
                    for r in replicas)
        seen = {r.replica_id for r in replicas}
        return info if fresh and seen == running else None

    def describe_controller(self, node_id: int, timeout_s: float = 2.0) -> QuorumInfo:
        """DescribeQuorum sent straight to one controller: only the leader answers with the
        quorum, the others with NOT_LEADER_OR_FOLLOWER (DescribeError)."""
        return quorum_info(describe_quorum_directly(node_id, self.host, self.nodes[node_id].port, timeout_s))

    def _controllers_formed(self) -> bool:
        """A controller leads, and every controller of the voter set follows it (other voters
        may not have started yet)."""
        now = int(time.time() * 1000)
        for node_id in self.initial_controllers:
            try:
                info = self.describe_controller(node_id)
            except (OSError, DescribeError):
                continue
            return sorted(v.replica_id for v in info.voters) == self.voter_ids() and all(
                v.replica_id == info.leader_id or now - v.last_fetch_timestamp <= 1500
                for v in info.voters if v.replica_id in self.initial_controllers)
        return False

    def _formed(self, admin: AdminClient) -> bool:
        try:
            brokers = admin.list_topics(timeout=1).brokers
        except KafkaException:
            return False
        if not set(self.broker_ids()) <= set(brokers):
            return False
        info = self.every_replica_fetching()
        return info is not None and sorted(v.replica_id for v in info.voters) == self.initial_controllers

