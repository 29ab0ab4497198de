"""A real Apache Kafka KRaft cluster on loopback, in the shapes users run (quorum/local_kafka/kafka_shapes.py):
- any pinned Kafka version (`kafka_version`, deploy/jvm/pom.xml; the default one unless told);
- topology `dedicated`: controllers (three by default) and brokers (one by default), which
  follow the quorum as observers; or `combined`: every node is broker and controller at once
  (process.roles=broker,controller), with a client (PLAINTEXT) port and a CONTROLLER port;
- voter set `dynamic`: formatted with `--initial-controllers` (KIP-853, Kafka 3.9 on), as Kafka
  4.x makes it; or `static`: `controller.quorum.voters` (kraft.version 0, no directory ids in
  the voter set), the only kind Kafka 3.7 has. With `other_voters` (voters outside the cluster:
  a project node's id and port) the quorum is static and they are among its voters.

Each node has its own ports, data directory and log under one base directory. Faults are the
real ones: a node is frozen (SIGSTOP), killed (SIGKILL), stopped in order or restarted from its
data. With `cgroup_parent` each node runs in a cgroup of its own from its first instruction, so
kernel packet-filter rules can tell its traffic apart (see deploy/packet_filter.py).

  with KafkaCluster(kafka_version="3.9.1", topology="combined", voter_set="static") as cluster:
      cluster.bootstrap              # the brokers' client ports, for clients and `quorum collect`
      cluster.bootstrap_controllers  # the CONTROLLER ports, for `kafka-metadata-quorum --bootstrap-controller`
      cluster.leader()
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from quorum import jvm
from quorum.kafka_watch.quorum_info import DescribeError, QuorumInfo, quorum_info
from quorum.local_kafka import kafka_logging
from quorum.local_kafka.cgroup import preexec_joining
from quorum.local_kafka.kafka_broker import (SINGLE_NODE_SETTINGS, BrokerError, java_command, random_cluster_id,
                                             terminate, write_properties)
from quorum.kafka_client.direct_describe import describe_quorum_directly
from quorum.local_kafka.kafka_node import BROKER_HEAP, CONTROLLER_HEAP, KafkaNode, jmx_exporter_agent
from quorum.local_kafka.kafka_shapes import FIRST_DYNAMIC, TOPOLOGIES, VOTER_SETS
from quorum.local_kafka.loopback_ports import free_port
from quorum.local_kafka.tcp_connections import remote_ports

DEFAULT_START_TIMEOUT_S = 120.0
FORMAT_TIMEOUT_S = 120.0  # StorageTool: a JVM that formats and exits, seconds even on a loaded machine


class KafkaCluster:
    """Controllers (or combined nodes) 1..N, the voters at the start, and brokers N+1.. on
    loopback; a context manager."""

    def __init__(self, controllers: int = 3, brokers: int | None = None, base_dir: str | os.PathLike | None = None,
                 host: str = "127.0.0.1", cluster_id: str | None = None, cgroup_parent: Path | None = None,
                 controller_heap: str = CONTROLLER_HEAP, broker_heap: str = BROKER_HEAP,
                 settings: dict[str, str] | None = None, jmx_exporter: bool = False,
                 other_voters: dict[int, int] | None = None, kafka_version: str | None = None,
                 topology: str = "dedicated", voter_set: str | None = None):
        """`controllers`: the voters at the start, dedicated controllers or, with topology
        `combined`, nodes that are brokers too. `brokers`: broker-only nodes besides (default 1
        for `dedicated`, 0 for `combined`). `jmx_exporter`: attach the Prometheus JMX exporter
        agent to every node, serving Kafka's metrics (raft-metrics among them) at
        `metrics_url(node_id)`. `other_voters`: id -> loopback port of voters that are not Kafka
        nodes; the quorum is then static. `kafka_version`: one deploy/jvm/pom.xml pins (default:
        the `kafka` profile's). `voter_set`: `dynamic` or `static` (default: static with
        other_voters, else dynamic)."""
        self.kafka_version = kafka_version or jvm.default_kafka_version()
        jvm.kafka_profile(self.kafka_version)  # a version the manifest does not pin fails here, by name
        self.topology = topology
        self.voter_set = voter_set or ("static" if other_voters else "dynamic")
        if topology not in TOPOLOGIES or self.voter_set not in VOTER_SETS:
            raise ValueError(f"topology {topology!r} / voter set {self.voter_set!r}: expected one of "
                             f"{TOPOLOGIES} / {VOTER_SETS}")
        if other_voters and self.voter_set != "static":
            raise ValueError("other voters join through controller.quorum.voters: the voter set is static")
        if self.dynamic and self.kafka_line() < FIRST_DYNAMIC:
            raise ValueError(f"Kafka {self.kafka_version} has static voter sets only (KIP-853 came in 3.9)")
        self.host = host
        self.other_voters = dict(other_voters or {})
        self.jmx_exporter = jmx_exporter
        self.cluster_id = cluster_id or random_cluster_id()
        self._own_dir = base_dir is None
        self.base_dir = Path(base_dir) if base_dir else Path(tempfile.mkdtemp(prefix="kafka-cluster-"))
        self.cgroup_parent = cgroup_parent
        # a combined node holds a broker's caches and the controller's: the broker's heap
        self.heap = {"controller": controller_heap, "broker": broker_heap, "combined": broker_heap}
        self.settings = dict(settings or {})
        self.nodes: dict[int, KafkaNode] = {}
        if brokers is None:
            brokers = 0 if self.combined else 1
        for i in range(1, controllers + 1):
            self._add_node(i, "combined" if self.combined else "controller")
        for i in range(controllers + 1, controllers + brokers + 1):
            self._add_node(i, "broker")
        self.initial_controllers = self.controller_ids()

    @property
    def combined(self) -> bool:
        return self.topology == "combined"

    @property
    def dynamic(self) -> bool:
        return self.voter_set == "dynamic"

    def kafka_line(self) -> tuple[int, int]:
        """The Kafka release line, (major, minor), for what a version brought (pre-vote in 4.0, say)."""
        major, minor = self.kafka_version.split(".")[:2]
        return int(major), int(minor)

    def _add_node(self, node_id: int, role: str) -> KafkaNode:
        port = free_port(self.host)
        controller_port = port if role == "controller" else free_port(self.host) if role == "combined" else None
        node = KafkaNode(node_id, role, port, self.base_dir / f"{role}-{node_id}", controller_port,
                         metrics_port=free_port(self.host) if self.jmx_exporter else None)
        self.nodes[node_id] = node
        return node

    # --- addresses --------------------------------------------------------------------------------

    def controller_ids(self) -> list[int]:
        """The nodes with a controller's role: dedicated controllers, or every combined node."""
        return sorted(i for i, n in self.nodes.items() if n.is_controller)

    def broker_ids(self) -> list[int]:
        """The nodes with a broker's role: brokers, or every combined node."""
        return sorted(i for i, n in self.nodes.items() if n.is_broker)

    def endpoint(self, node_id: int) -> str:
        """The node's first listener: a broker's or combined node's client port, a dedicated
        controller's CONTROLLER port."""
        return f"{self.host}:{self.nodes[node_id].port}"

    def controller_endpoint(self, node_id: int) -> str:
        """The node's CONTROLLER listener, where voters and `--bootstrap-controller` reach it."""
        return f"{self.host}:{self.nodes[node_id].controller_port}"

    def metrics_url(self, node_id: int) -> str:
        return f"http://{self.host}:{self.nodes[node_id].metrics_port}/metrics"

    def node_of_port(self, port: int) -> int | None:
        """The node that listens on `port` (client, CONTROLLER or metrics), if any."""
        for node_id, node in self.nodes.items():
            if port in (node.port, node.controller_port, node.metrics_port):
                return node_id
        return None

    def connected_nodes(self, pid: int | None = None) -> set[int]:
        """The nodes process `pid` (default: this one) holds a TCP connection to, by the remote
        port of each: which node a client talks to, when the node a test faults may be it."""
        nodes = {self.node_of_port(port) for port in remote_ports(pid or os.getpid())}
        return nodes - {None}

    @property
    def bootstrap(self) -> str:
        return ",".join(self.endpoint(i) for i in self.broker_ids())

    @property
    def static_voters(self) -> str:
        """`controller.quorum.voters` of a static quorum: the controllers and the other voters."""
        ports = {**{i: self.nodes[i].controller_port for i in self.initial_controllers}, **self.other_voters}
        return ",".join(f"{i}@{self.host}:{ports[i]}" for i in sorted(ports))

    def voter_ids(self) -> list[int]:
        return sorted([*self.initial_controllers, *self.other_voters])

    @property
    def bootstrap_controllers(self) -> str:
        return ",".join(self.controller_endpoint(i) for i in self.controller_ids())

    def properties(self, node: KafkaNode) -> dict[str, str]:
        # static: the voters, fixed; dynamic: the controllers a node starts from, the voter set
        # itself living in the metadata log
        quorum = {"controller.quorum.voters": self.static_voters} if not self.dynamic else {
            "controller.quorum.bootstrap.servers": ",".join(self.controller_endpoint(i)
                                                            for i in self.initial_controllers)}
        listeners = []
        own = {"process.roles": node.process_roles}
        if node.is_broker:
            client = f"PLAINTEXT://{self.endpoint(node.node_id)}"
            listeners.append(client)
            own.update({"advertised.listeners": client, "inter.broker.listener.name": "PLAINTEXT"})
        if node.is_controller:
            listeners.append(f"CONTROLLER://{self.controller_endpoint(node.node_id)}")
        return {
            "node.id": str(node.node_id),
            **quorum,
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(node.data_dir / "data"),
            **SINGLE_NODE_SETTINGS,
            "listeners": ",".join(listeners),
            **own,
            **self.settings,
        }

    # --- life cycle -------------------------------------------------------------------------------

    def start(self, timeout_s: float = DEFAULT_START_TIMEOUT_S, await_quorum: bool = True) -> "KafkaCluster":
        """Format every node (once), start them all and wait until the quorum has a leader that
        every voter and broker fetches from, and every broker is registered. Without
        `await_quorum` (a static quorum whose other voters start later) the controllers start
        and nothing is awaited."""
        try:
            for node in self.nodes.values():
                self._format(node)
            # Brokers once the controllers have elected a leader they all follow: a broker started
            # while the first elections still flip can keep asking a controller that is no longer
            # active, and give up registering after a minute (seen with Kafka 4.4.0). Combined
            # nodes start with the controllers: they are some of them.
            for node_id in self.controller_ids():
                self._spawn(self.nodes[node_id])
            if not await_quorum:
                return self
            self.wait_for(self._controllers_formed, timeout_s, "a controller leader every controller follows")
            if self.broker_ids():
                for node_id in self.broker_ids():
                    if not self.nodes[node_id].running():
                        self._spawn(self.nodes[node_id])
                admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
                self.wait_for(lambda: self._formed(admin), timeout_s,
                              "a leader, every node fetching and every broker registered")
        except BaseException:
            self.stop(keep_files=True)
            raise
        return self

    def _format(self, node: KafkaNode) -> None:
        if (node.data_dir / "data" / "meta.properties").exists():
            return
        config = self._write_files(node)
        with open(node.log_path, "ab") as log:
            # `--cluster-id` and `--config`: the long forms every Kafka line has (3.7 documents -t, -c)
            fmt = subprocess.run(self._java(node, "256m")
                                 + ["kafka.tools.StorageTool", "format", "--cluster-id", self.cluster_id,
                                    "--config", str(config), *self._format_quorum_args(node)],
                                 stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 timeout=FORMAT_TIMEOUT_S)
        if fmt.returncode != 0:
            raise BrokerError(f"formatting {node.role} {node.node_id}'s storage failed (exit {fmt.returncode});"
                              f" log: {node.log_path}")
        meta = (node.data_dir / "data" / "meta.properties").read_text()
        node.directory_id = next(line.split("=", 1)[1] for line in meta.splitlines() if line.startswith("directory.id="))

    def _format_quorum_args(self, node: KafkaNode) -> list[str]:
        if not self.dynamic:  # static: the voters come from controller.quorum.voters
            return []
        if node.node_id in self.initial_controllers:  # the voter set of the cluster's first metadata
            return ["--initial-controllers", ",".join(f"{i}@{self.controller_endpoint(i)}:{self.nodes[i].directory_id}"
                                                      for i in self.initial_controllers)]
        return ["--no-initial-controllers"]  # a broker, or a controller that joins later through add-controller

    def _java(self, node: KafkaNode, heap: str) -> list[str]:
        """The JVM for one of the node's processes, its log set up as the node's Kafka version reads it."""
        return java_command(heap, kafka_logging.config_path(node.data_dir, self.kafka_version), self.kafka_version)

    def _write_files(self, node: KafkaNode) -> Path:
        node.data_dir.mkdir(parents=True, exist_ok=True)
        kafka_logging.write_config(node.data_dir, self.kafka_version)
        return write_properties(node.data_dir / "server.properties", self.properties(node))

    def _spawn(self, node: KafkaNode) -> None:
        self._write_files(node)
        node.log_file = open(node.log_path, "ab")
        agent = [jmx_exporter_agent(self.host, node.metrics_port)] if node.metrics_port else []
        node.proc = subprocess.Popen(self._java(node, self.heap[node.role])
                                     + agent + ["kafka.Kafka", str(node.data_dir / "server.properties")],
                                     stdout=node.log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True, preexec_fn=preexec_joining(self.cgroup_of(node.node_id)))

    def cgroup_of(self, node_id: int) -> Path | None:
        return self.cgroup_parent / f"node-{node_id}" if self.cgroup_parent is not None else None

    def add_controller_node(self) -> int:
        """Start a new (dedicated) controller that is not a voter: formatted with
        --no-initial-controllers it follows the quorum as an observer until `kafka-metadata-quorum
        add-controller` makes it one. Only a dynamic voter set takes new voters."""
        if not self.dynamic:
            raise BrokerError(f"a static voter set (controller.quorum.voters) takes no new controller: "
                              f"add-controller needs a dynamic one (KIP-853); this cluster is "
                              f"{self.kafka_version}-{self.topology}-{self.voter_set}")
        node = self._add_node(max(self.nodes) + 1, "controller")
        self._format(node)
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

    def _stop_all(self, node_ids: list[int], timeout_s: float) -> None:
        """SIGTERM to each (a frozen one continued first), SIGKILL to those still running after
        `timeout_s`."""
        running = [self.nodes[i] for i in node_ids if self.nodes[i].running()]
        for node in running:
            node.proc.send_signal(signal.SIGCONT)
            node.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for node in running:
            try:
                node.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                node.proc.kill()
                node.proc.wait()
        for node_id in node_ids:
            self._close(self.nodes[node_id])

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
        """Brokers first, then the controllers and combined nodes, all of a group at once (a
        broker, a combined node's too, shuts down in order only while the quorum answers: one
        at a time, the last combined nodes would wait for a majority that is gone); the base
        directory, if this object made it, goes unless `keep_files`."""
        brokers = [i for i, n in self.nodes.items() if not n.is_controller]
        for group in (brokers, self.controller_ids()):
            self._stop_all(group, timeout_s)
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
        """DescribeQuorum through the brokers (any forwards it to the leader); without brokers,
        from whichever voter leads. Each asked on a connection of its own, at the version this
        Kafka answers: kafka-python's admin client cannot read a v0/v1 answer (Kafka 3.7's)."""
        if self.broker_ids():
            ports = {i: self.nodes[i].port for i in self.broker_ids() if self.nodes[i].running()}
        else:
            ports = {**{i: n.controller_port for i, n in self.nodes.items() if n.is_controller}, **self.other_voters}
        last: Exception | None = None
        for node_id, port in sorted(ports.items()):
            try:
                return quorum_info(describe_quorum_directly(node_id, self.host, port, timeout_ms / 1000,
                                                            self.describe_version))
            except (OSError, DescribeError) as e:
                last = e
        raise DescribeError(f"no node answered DescribeQuorum with the quorum (last: {last})")

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
        return quorum_info(describe_quorum_directly(node_id, self.host, self.nodes[node_id].controller_port,
                                                    timeout_s, self.describe_version))

    @property
    def describe_version(self) -> int:
        """The DescribeQuorum version this Kafka answers: v2 (directory ids, endpoints) came with
        KIP-853 in 3.9; 3.7 closes the connection on it."""
        return 2 if self.kafka_line() >= FIRST_DYNAMIC else 1

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

