"""The local stack, all on loopback: Apache Kafka (one broker+controller node), a quorum of real node
processes (3 voters + 1 observer by default) publishing their events, the Spark streaming job on
local[*], the Pushgateway, Prometheus with the alerting rules, and Alertmanager, whose
notifications are printed here.

  deploy/run-local                     start everything in the foreground; Ctrl-C stops it all
  deploy/run-local down                stop a stack started from another terminal
  deploy/run-local status              the quorum's state and the stack's addresses
  deploy/run-local chaos ACTION [NODE] disturb the running quorum; NODE is a node id, `follower`
                                       (a voter that is not the leader, chosen for you) or `leader`:
      stall NODE        throttle a follower's replication (1 record/s, the leader appends 2 NoOps/s):
                        it keeps fetching and falls further behind (stalled, cause behind)
      slow-disk NODE    slow a follower's disk (3 s per fsync): its fetches come seconds apart
      wrong-cluster NODE restart a follower with another cluster id: the leader refuses its fetches
      cutoff NODE       drop all of the node's traffic (it cannot reach or be reached)
      freeze NODE       SIGSTOP the node's process (heal sends SIGCONT)
      kill NODE         SIGKILL the node's process (heal restarts it)
      skew NODE MS      stamp the node's records MS milliseconds off the true clock (`-- -3000`: early)
      partition-leader  cut the current leader off from everyone
      job-kill          SIGKILL the streaming job (its supervisor restarts it)
      events-restart    stop the events Kafka and start it again
      heal [NODE]       undo all of the above (or only what disturbs NODE)

  deploy/run-local --secure            secure the stack's Kafka (SASL_SSL with SCRAM users, TLS,
                                       StandardAuthorizer ACLs): every part runs under its own
                                       principal, from the properties files in RUN_DIR/credentials
  deploy/run-local --kafka-quorum      also run a real Apache Kafka KRaft cluster (3 controllers,
                                       1 broker, each serving its metrics through the Prometheus
                                       JMX exporter agent) with `quorum collect` watching it, so
                                       the dashboard shows a Kafka quorum beside the project's;
                                       `chaos freeze|kill|cutoff kafka-follower|kafka-leader|
                                       kafka-collector|kafka-ID` disturbs it (cutoff: packet
                                       filter, as root), `heal` mends it
  deploy/run-local nemesis --seed S --minutes M
                                       start a stack with --kafka-quorum and run a seeded schedule
                                       of overlapping faults on it, then judge every alert and
                                       verdict against the schedule (deploy/run-local nemesis -h)

The streaming job is supervised (deploy/job_supervisor.py): when it dies (a crash, an OOM kill,
`kill -9`), the launcher replaces it from its checkpoint at once by a standby it keeps ready (a
second job process with Spark started and the query planned), or starts one cold when there is
none; deaths in a row wait 1 s, doubling to at most 30 s (a death after 2 minutes of running is a
first one again). It prints why, and counts each in `quorum_monitor_job_restarts_total` on the
Pushgateway (group job="quorum_monitor_supervisor").
  deploy/run-local --synthetic 2       also publish 2 synthetic quorums with scripted faults

Logs go to RUN_DIR/logs/, one file per process; RUN_DIR/stack.json says what runs and where, so
`down`, `status` and `chaos` find it, and nothing is left behind.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "deploy"))

import local_services as svc  # noqa: E402
import packet_filter  # noqa: E402
import secure_stack  # noqa: E402
from alert_console import AlertConsole  # noqa: E402
from job_supervisor import JOB_NAME, STANDBY_NAME, JobSupervisor, signal_group  # noqa: E402

from quorum.local_kafka.kafka_broker import BrokerError, KafkaBroker  # noqa: E402
from quorum.local_kafka.kafka_cluster import KafkaCluster  # noqa: E402
from quorum.local_kafka.loopback_ports import free_port  # noqa: E402
from quorum.storage.atomic_file import write_atomically  # noqa: E402

STOP_TIMEOUT_S = 15
START_TIMEOUT_S = 60
JOB_START_TIMEOUT_S = 240  # the first micro-batch includes starting the JVM and the Python workers
NOTIFICATIONS_FILE = "alert-notifications.jsonl"  # every alert Alertmanager notified (the nemesis reads it)
THROTTLE_RECORDS_PER_S = "1"     # below the leader's 2 NoOps/s: the stalled voter falls behind
OTHER_CLUSTER_ID = "another-cluster"


def say(text: str) -> None:
    print(f"\033[1m[stack]\033[0m {text}", file=sys.stderr, flush=True)


class Stack:
    """The processes of one running stack. Only the launcher holds them; other commands talk to
    it through RUN_DIR/control.sock."""

    def __init__(self, run_dir: Path, args: argparse.Namespace):
        self.run_dir = run_dir
        self.args = args
        self.processes: dict[str, subprocess.Popen] = {}
        self.argv: dict[str, list[str]] = {}
        self.urls: dict[str, str] = {}
        self.nodes: dict[int, svc.NodeSpec] = {}
        self.broker: KafkaBroker | None = None
        self.kafka_quorum: KafkaCluster | None = None  # --kafka-quorum: the real KRaft cluster watched
        self.kafka_frozen: set[int] = set()
        self.kafka_killed: set[int] = set()
        self.packet_filter = None  # --kafka-quorum as root: cuts its nodes off (chaos cutoff kafka-ID)
        self.lock = threading.Lock()
        self.frozen: set[int] = set()
        self.killed: set[int] = set()
        self.other_cluster: set[int] = set()
        self.data_dirs: dict[int, str] = {}  # each node's own, while wrong-cluster runs it on another
        self.supervisor: JobSupervisor | None = None
        self.credentials: secure_stack.Credentials | None = None  # --secure: each part's properties file

    def client_properties(self, principal: str) -> str | None:
        """The properties file of a part's principal (--secure), or None."""
        return str(self.credentials.properties(principal)) if self.credentials else None

    def command_config(self, principal: str, option: str = "--command-config") -> list[str]:
        path = self.client_properties(principal)
        return [option, path] if path else []

    @property
    def state_file(self) -> Path:
        return self.run_dir / "stack.json"

    def log(self, name: str) -> Path:
        return self.run_dir / "logs" / f"{name}.log"

    def spawn(self, name: str, argv: list[str], log_as: str | None = None) -> subprocess.Popen:
        """Start one process in its own session, so that a stop reaches its children too; its
        output goes to its own log, or `log_as`'s (a standby writes the job's)."""
        with open(self.log(log_as or name), "ab") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, cwd=ROOT)
        self.processes[name] = proc
        self.argv[name] = argv
        self.save()
        return proc

    def save(self) -> None:
        pids = {name: p.pid for name, p in self.processes.items() if p.poll() is None}
        if self.broker and self.broker.pid:
            pids["broker"] = self.broker.pid
        if self.kafka_quorum:
            pids.update({f"kafka-{i}": n.pid for i, n in self.kafka_quorum.nodes.items() if n.running()})
        nodes = {n.node_id: {"address": n.address, "config": str(n.config_path), "voter": n.voter}
                 for n in self.nodes.values()}
        restarts = self.supervisor.restarts if self.supervisor else 0
        kafka_quorum = {"cluster_id": self.kafka_quorum.cluster_id, "bootstrap": self.kafka_quorum.bootstrap,
                        "controllers": self.kafka_quorum.controller_ids(),
                        "brokers": self.kafka_quorum.broker_ids()} if self.kafka_quorum else None
        # replaced whole: `status`, `chaos` and the tests read it while the supervisor rewrites it
        write_atomically(self.state_file, json.dumps({"launcher": os.getpid(), "pids": pids, "urls": self.urls,
                                                      "nodes": nodes, "job_restarts": restarts,
                                                      "kafka_quorum": kafka_quorum,
                                                      "notifications": str(self.run_dir / NOTIFICATIONS_FILE),
                                                      "credentials": str(self.credentials.directory)
                                                      if self.credentials else None}, indent=2).encode())

    def node_name(self, node_id: int) -> str:
        return f"node-{node_id}"

    def check_alive(self, nodes_may_die: bool = True) -> str | None:
        """A dead node is part of the game (chaos kill) once the stack runs, and a dead job is
        restarted by the supervisor; anything else dying stops the stack."""
        for name, proc in self.processes.items():
            if name in (JOB_NAME, STANDBY_NAME) and self.supervisor is not None:
                continue
            if proc.poll() is not None and not (nodes_may_die and name.startswith("node-")):
                return f"{name} exited with code {proc.returncode} (log: {self.log(name)})"
        return None

    def stop(self) -> None:
        for node_id in list(self.frozen):
            self._signal(self.node_name(node_id), signal.SIGCONT)
        for name, proc in reversed(list(self.processes.items())):
            if proc.poll() is None:
                say(f"stopping {name}")
                signal_group(proc.pid, signal.SIGTERM)
        for name, proc in reversed(list(self.processes.items())):
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                say(f"{name} did not stop in {STOP_TIMEOUT_S} s: killing it")
                signal_group(proc.pid, signal.SIGKILL)
                proc.wait()
        self.processes.clear()
        if self.kafka_quorum:
            say("stopping the Kafka quorum")
            self.kafka_quorum.stop()
            if self.packet_filter is not None:
                self.packet_filter.close()
                self.packet_filter = None
            if self.kafka_quorum.cgroup_parent is not None:  # the nodes' own went with them
                self.kafka_quorum.cgroup_parent.rmdir()
            self.kafka_quorum = None
        if self.broker:
            say("stopping Kafka")
            self.broker.stop()
            self.broker = None
        self.state_file.unlink(missing_ok=True)

    # --- chaos, carried out for `deploy/run-local chaos` ------------------------------------------
    def _signal(self, name: str, sig: int) -> None:
        proc = self.processes.get(name)
        if proc is None or proc.poll() is not None:
            raise ValueError(f"{name} is not running")
        os.kill(proc.pid, sig)

    def _fault(self, node_id: int, *words: str) -> str:
        spec = self.nodes[node_id]
        out = subprocess.run([sys.executable, "-m", "quorum.cli", "fault", "--config", str(spec.config_path), *words],
                             capture_output=True, text=True, timeout=10, cwd=ROOT)
        if out.returncode != 0:
            raise ValueError(out.stderr.strip() or out.stdout.strip())
        return out.stdout.strip()

    def _control(self, node_id: int, command: dict) -> dict:
        from quorum.node.config import load
        from quorum.node.fault_command import send
        return send(str(load(self.nodes[node_id].config_path).control_path), command, timeout_s=2)

    def leader(self) -> int:
        """The leader named by the running node of the highest epoch, each asked for its status
        on its control socket (quick, where DescribeQuorum through a client waits out its
        timeouts on a node without a leader): a deposed leader still claiming an older epoch
        is outvoted, and a node just restarted, not yet listening, is passed over."""
        said, best = [], None
        for spec in self.nodes.values():
            if spec.node_id in self.killed | self.frozen:
                continue
            try:
                status = self._control(spec.node_id, {"op": "status"})
            except Exception as e:  # noqa: BLE001 - a node that does not answer: ask the next
                said.append(f"node {spec.node_id}: {type(e).__name__}: {e}")
                continue
            said.append(f"node {spec.node_id}: {status['state']} in epoch {status['epoch']}")
            if best is None or status["epoch"] > best["epoch"]:
                best = status
        if best is not None and best["leader_id"] >= 0 and best["leader_id"] not in self.killed | self.frozen:
            return best["leader_id"]  # (the followers of a leader just frozen still name it)
        raise ValueError(f"the quorum has no leader right now ({'; '.join(said) or 'no node running'})")

    def target(self, action: str, node: str | int | None) -> int:
        """The node a node action acts on: an id, `leader`, or `follower` (the lowest-numbered
        voter that is not the leader and not already frozen or killed). Elections pick any node,
        so an action that only means something on a follower refuses the leader, naming the
        followers to choose from."""
        if node == "leader":
            return self.leader()
        voters = sorted(n for n, spec in self.nodes.items() if spec.voter)
        if node == "follower":
            leader = self.leader()
            followers = [n for n in voters if n != leader and n not in self.killed | self.frozen]
            if not followers:
                raise ValueError(f"{action}: no running follower (leader {leader}, voters {voters})")
            return followers[0]
        try:
            node_id = int(node)
        except (TypeError, ValueError):
            raise ValueError(f"{action} needs a node: follower, leader or an id among {sorted(self.nodes)}") from None
        if node_id not in self.nodes:
            raise ValueError(f"{action} needs a node: follower, leader or an id among {sorted(self.nodes)}")
        if action in FOLLOWER_ACTIONS:
            leader = self.leader()
            if node_id == leader:
                followers = ", ".join(str(n) for n in voters if n != leader)
                raise ValueError(f"{action} acts on a follower, and node {node_id} is the leader now: choose "
                                 f"one of the followers {followers}, or say `follower`")
        return node_id

    def kafka_target(self, action: str, node: str) -> int:
        """A node of the --kafka-quorum cluster: kafka-leader, kafka-follower or kafka-ID."""
        cluster = self.kafka_quorum
        if cluster is None:
            raise ValueError(f"{node}: no Kafka quorum runs (start the stack with --kafka-quorum)")
        if action not in KAFKA_ACTIONS + ("heal",):
            raise ValueError(f"{action} acts on the project's nodes; a Kafka node can be: {', '.join(KAFKA_ACTIONS)}")
        which = node.removeprefix("kafka-")
        if which == "leader":
            return cluster.leader()
        if which == "collector":  # the node `quorum collect` holds its connection to, now
            talks_to = sorted(cluster.connected_nodes(self.processes["kafka-collector"].pid) & set(cluster.nodes))
            if not talks_to:
                raise ValueError(f"{action}: the collector holds no connection to a Kafka node right now")
            return talks_to[0]
        if which == "follower":
            followers = [i for i in cluster.followers() if i not in self.kafka_frozen | self.kafka_killed]
            if not followers:
                raise ValueError(f"{action}: no running follower in the Kafka quorum")
            return followers[0]
        if not which.isdigit() or int(which) not in cluster.nodes:
            raise ValueError(f"{node}: say kafka-leader, kafka-follower, kafka-collector or kafka-ID, ID among "
                             f"{sorted(cluster.nodes)}")
        return int(which)

    def kafka_chaos(self, action: str, node: str) -> str:
        node_id = self.kafka_target(action, node)
        role = self.kafka_quorum.nodes[node_id].role
        if action == "cutoff":
            if self.packet_filter is None:
                raise ValueError("cutting a Kafka node off needs root and iptables (kernel packet-filter rules): "
                                 "run the stack as root")
            self.packet_filter.cut(node_id)
            return f"Kafka {role} {node_id}: its controller traffic dropped by packet filter, the process running"
        if action == "freeze":
            self.kafka_quorum.freeze(node_id)
            self.kafka_frozen.add(node_id)
            return f"Kafka {role} {node_id}: stopped with SIGSTOP"
        self.kafka_quorum.kill(node_id)
        self.kafka_killed.add(node_id)
        return f"Kafka {role} {node_id}: killed"

    def kafka_heal(self, only: int | None = None) -> list[str]:
        """Continue, restart and reconnect the Kafka quorum's disturbed nodes (or just `only`)."""
        done = []
        for node_id in sorted(self.kafka_frozen):
            if only in (None, node_id):
                self.kafka_quorum.resume(node_id)
                self.kafka_frozen.discard(node_id)
                done.append(f"Kafka node {node_id} continued")
        for node_id in sorted(self.kafka_killed):
            if only in (None, node_id):
                self.kafka_quorum.restart(node_id)
                self.kafka_killed.discard(node_id)
                done.append(f"Kafka node {node_id} restarted")
        if self.packet_filter is not None:
            for node_id in sorted(self.packet_filter.cut_nodes()):
                if only in (None, node_id):
                    self.packet_filter.heal(node_id)
                    done.append(f"Kafka node {node_id} reconnected")
        return done

    def heal_all(self) -> list[str]:
        done = self.kafka_heal() if self.kafka_quorum else []
        for node_id in sorted(self.nodes):
            done += self.heal_node(node_id)
        return done

    def heal_node(self, node_id: int) -> list[str]:
        """Undo whatever disturbs one node: continue it, restart it, give it its cluster id back,
        clear its injected faults."""
        done = []
        name = self.node_name(node_id)
        if node_id in self.frozen:
            self._signal(name, signal.SIGCONT)
            self.frozen.discard(node_id)
            done.append(f"node {node_id} continued")
        if node_id in self.killed:
            self.spawn(name, self.argv[name])
            self.killed.discard(node_id)
            done.append(f"node {node_id} restarted")
        if node_id in self.other_cluster:
            self._restart_node(node_id, svc.CLUSTER_ID)
            self.other_cluster.discard(node_id)
            done.append(f"node {node_id} restarted with cluster id {svc.CLUSTER_ID!r}")
        if self.processes[name].poll() is None:
            try:  # on its control socket directly: a heal of every node stays quick on a loaded machine
                before = self._control(node_id, {"op": "status"}).get("faults", {})
                self._control(node_id, {"op": "clear"})
            except (OSError, ValueError):
                before = {}  # a node still starting up has no faults to clear
            injected = [k for k, v in before.items() if v not in (False, 0, [])]
            if injected:
                done.append(f"node {node_id}: {', '.join(injected)} cleared")
        return done

    def roles(self) -> dict:
        """Who leads, who follows and who observes in each quorum now (for the nemesis, which
        picks its targets itself): JSON in the reply's message."""
        voters = sorted(n for n, spec in self.nodes.items() if spec.voter)
        try:
            leader, why = self.leader(), None
        except ValueError as e:
            leader, why = None, str(e)
        roles = {"project": {"cluster_id": svc.CLUSTER_ID, "leader": leader, "no_leader": why, "voters": voters,
                             "observers": sorted(set(self.nodes) - set(voters))},
                 "kafka": None, "kafka_cutoff": self.packet_filter is not None}
        cluster = self.kafka_quorum
        if cluster is not None:
            roles["kafka"] = {"cluster_id": cluster.cluster_id, "leader": self._kafka_leader(),
                              "voters": cluster.voter_ids(), "observers": cluster.broker_ids(),
                              "collector": sorted(cluster.connected_nodes(self.processes["kafka-collector"].pid)
                                                  & set(cluster.nodes))}
        return roles

    def _kafka_leader(self) -> int | None:
        """The Kafka quorum's leader by any controller that answers (the broker may be the one frozen)."""
        out = self.kafka_frozen | self.kafka_killed | (self.packet_filter.cut_nodes() if self.packet_filter else set())
        for node_id in [i for i in self.kafka_quorum.controller_ids() if i not in out]:
            try:
                leader = self.kafka_quorum.describe_controller(node_id).leader_id
            except Exception:  # noqa: BLE001 - a controller that does not answer: ask the next
                continue
            if leader >= 0:
                return leader
        return None

    def chaos(self, action: str, node: str | int | None, value: int | None = None) -> str:
        if action == "roles":
            return json.dumps(self.roles())
        with self.lock:
            if isinstance(node, str) and node.startswith("kafka-") and action != "heal":
                return self.kafka_chaos(action, node)
            if action in NODE_ACTIONS:
                node = self.target(action, node)
            if action == "stall":
                self._fault(node, "throttle", THROTTLE_RECORDS_PER_S)
                return (f"node {node}: replication throttled to {THROTTLE_RECORDS_PER_S} record/s; it keeps fetching "
                        f"and falls behind the leader's appends")
            if action == "slow-disk":
                self._fault(node, "slow-disk", "3000")
                return f"node {node}: every fsync now takes 3 s more; its fetches come seconds apart"
            if action == "wrong-cluster":
                self._restart_node(node, OTHER_CLUSTER_ID)
                self.other_cluster.add(node)
                return f"node {node}: restarted with cluster id {OTHER_CLUSTER_ID!r}; the leader refuses its fetches"
            if action == "cutoff":
                self._fault(node, "pause")
                return f"node {node}: all traffic in and out dropped"
            if action == "freeze":
                self._signal(self.node_name(node), signal.SIGSTOP)
                self.frozen.add(node)
                return f"node {node}: stopped with SIGSTOP"
            if action == "kill":
                self._signal(self.node_name(node), signal.SIGKILL)
                self.killed.add(node)
                return f"node {node}: killed"
            if action == "partition-leader":
                leader = self.leader()
                self._fault(leader, "pause")
                return f"leader {leader}: cut off from every peer"
            if action == "skew":
                if value is None:
                    raise ValueError("skew needs milliseconds after the node: chaos skew NODE MS (negative: early)")
                self._fault(node, "skew", "--", str(int(value)))
                return f"node {node}: its records are stamped {int(value):+d} ms off the true clock"
            if action == "job-kill":
                proc = self.processes.get(JOB_NAME)
                if proc is None or proc.poll() is not None:
                    raise ValueError(f"{JOB_NAME} is not running (the supervisor may be restarting it)")
                signal_group(proc.pid, signal.SIGKILL)
                return f"{JOB_NAME}: killed with SIGKILL (the supervisor restarts it from its checkpoint)"
            if action == "events-restart":
                started = time.monotonic()
                self.broker.stop(keep_files=True)
                self.broker.start()
                return f"the events Kafka: stopped and started again in {time.monotonic() - started:.1f} s"
            if action == "heal":
                if node is None:
                    return "; ".join(self.heal_all()) or "faults cleared on every node"
                if isinstance(node, str) and node.startswith("kafka-"):
                    return "; ".join(self.kafka_heal(self.kafka_target("heal", node))) or f"{node}: nothing to heal"
                return "; ".join(self.heal_node(self.target("heal", node))) or f"node {node}: nothing to heal"
            raise ValueError(f"unknown chaos action {action!r}")


    def _restart_node(self, node_id: int, cluster_id: str) -> None:
        """Stop the node and start it again with `cluster_id`. Under another id it runs on a copy
        of its data directory whose meta.properties names that cluster (a data directory keeps
        its cluster id): it still knows the quorum's leader and fetches from it, as a node given
        another cluster's configuration does, and the leader refuses every fetch."""
        import yaml
        name = self.node_name(node_id)
        proc = self.processes.get(name)
        if proc is not None and proc.poll() is None:
            if node_id in self.frozen:
                self._signal(name, signal.SIGCONT)
                self.frozen.discard(node_id)
            signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                signal_group(proc.pid, signal.SIGKILL)
                proc.wait()
        self.killed.discard(node_id)
        path = self.nodes[node_id].config_path
        config = yaml.safe_load(path.read_text())
        data_dir = self.data_dirs.setdefault(node_id, config["data.dir"])
        config["cluster.id"] = cluster_id
        if cluster_id == svc.CLUSTER_ID:
            config["data.dir"] = data_dir
        else:
            config["data.dir"] = f"{data_dir}-{cluster_id}"
            shutil.rmtree(config["data.dir"], ignore_errors=True)
            shutil.copytree(data_dir, config["data.dir"], ignore=shutil.ignore_patterns("*.sock"))
            meta = Path(config["data.dir"]) / "meta.properties"
            meta.write_text("".join(f"cluster.id={cluster_id}\n" if line.startswith("cluster.id=") else line
                                    for line in meta.read_text().splitlines(keepends=True)))
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        self.spawn(name, self.argv[name])


NODE_ACTIONS = ("stall", "slow-disk", "wrong-cluster", "cutoff", "freeze", "kill", "skew")
# a leader does not replicate from anyone and makes its own appends: these mean nothing on it
FOLLOWER_ACTIONS = ("stall", "slow-disk", "wrong-cluster")
KAFKA_ACTIONS = ("freeze", "kill", "cutoff")  # on the --kafka-quorum cluster's nodes
STACK_ACTIONS = ("job-kill", "events-restart")  # on the monitor itself


def _serve_control(stack: Stack, stopping: list) -> socket.socket:
    """One JSON request per connection: {"action": ..., "node": ...} -> {"ok": ..., "message": ...}."""
    path = stack.run_dir / "control.sock"
    path.unlink(missing_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(4)

    def loop():
        while not stopping:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                try:
                    request = json.loads(conn.makefile().readline())
                    message = stack.chaos(request["action"], request.get("node"), request.get("value"))
                    reply = {"ok": True, "message": message}
                    if request["action"] != "roles":
                        say(f"chaos: {message}")
                except Exception as e:  # noqa: BLE001 - the reply carries any failure to the caller
                    reply = {"ok": False, "message": str(e)}
                conn.sendall((json.dumps(reply) + "\n").encode())

    threading.Thread(target=loop, name="control", daemon=True).start()
    return server


def _cgroup_parent() -> Path | None:
    """Where the Kafka quorum's nodes get a cgroup each, so that packet-filter rules can cut one
    off (chaos cutoff kafka-ID): only as root with iptables, else None and no cutoff."""
    if os.geteuid() != 0 or shutil.which("iptables") is None:
        return None
    try:
        return packet_filter.cgroup2_root() / f"quorum-stack-{os.getpid()}"
    except RuntimeError:
        return None


def _start_kafka_quorum(stack: Stack, quorum: list[str]) -> None:
    """A real KRaft cluster to watch, and `quorum collect` watching it with every node's own view."""
    base = stack.run_dir / "kafka-quorum"
    say(f"      Apache Kafka KRaft quorum: 3 controllers + 1 broker, each with the JMX exporter (logs {base})")
    cgroups = _cgroup_parent()
    stack.kafka_quorum = cluster = KafkaCluster(base_dir=base, jmx_exporter=True, cgroup_parent=cgroups)
    if cgroups is not None:
        stack.packet_filter = packet_filter.PacketFilter(cluster)
    try:
        cluster.start()
    except BrokerError as e:
        raise svc.StartError(f"the Kafka quorum: {e}") from None
    stack.urls["kafka-quorum"] = cluster.bootstrap
    say(f"      leader {cluster.leader()}, cluster id {cluster.cluster_id}; `quorum collect` watches it")
    node_metrics = [a for i in sorted(cluster.nodes) for a in ("--node-metrics", f"{i}={cluster.metrics_url(i)}")]
    stack.spawn("kafka-collector", quorum + ["collect", "--bootstrap-server", cluster.bootstrap, "--cluster-id",
                                             cluster.cluster_id, *node_metrics, "--events-bootstrap-server",
                                             stack.broker.bootstrap, "--events-topic", svc.EVENTS_TOPIC,
                                             *stack.command_config("collector", "--events-command-config")])


def _streaming_job_config(stack: Stack, pushgateway: str) -> Path:
    """deploy/job.local.yaml (every key documented there) with this stack's addresses."""
    import yaml
    config = yaml.safe_load((ROOT / "deploy" / "job.local.yaml").read_text())
    config["spark"]["master"] = "local[*]"
    config["source"].update(bootstrap_servers=stack.broker.bootstrap, topic=svc.EVENTS_TOPIC,
                            starting_offsets="earliest")
    config["job"]["checkpoint_location"] = str(stack.run_dir / "checkpoints")
    config["dead_letters"]["path"] = str(stack.run_dir / "dead-letters")
    config["sink"]["prometheus"].update(mode="pushgateway", pushgateway_url=f"http://{pushgateway}")
    config["sink"]["kafka"].update(enabled=True, bootstrap_servers=stack.broker.bootstrap, topic=svc.HEALTH_TOPIC)
    job_properties = stack.client_properties("job")
    if job_properties:
        config["source"]["command_config"] = job_properties
        config["sink"]["kafka"]["command_config"] = job_properties
    path = stack.run_dir / "job.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


# What one run leaves in its run directory. Each run starts a new Kafka cluster and a new quorum,
# so a checkpoint's offsets, the nodes' logs, the pushed verdicts and the stored series of a
# previous run describe a cluster that is gone: the job would plan offsets the new topic never
# had, and the Pushgateway would serve the old run's last batch time (QuorumMonitorSilent).
PER_RUN_STATE = ("kafka", "kafka-quorum", "credentials", "checkpoints", "dead-letters", "nodes", "logs", "pushgateway.data", "prometheus-data",
                 "alertmanager-data", "job.yaml", "prometheus.yml", "alertmanager.yml", "control.sock",
                 NOTIFICATIONS_FILE)


def _clear_previous_run(run_dir: Path) -> None:
    """Removes only the names this launcher creates, never anything else in the directory."""
    found = [name for name in PER_RUN_STATE if (run_dir / name).exists()]
    if not found:
        return
    say(f"clearing the previous run's state in {run_dir} ({', '.join(found)}): each run starts a new cluster")
    for name in found:
        path = run_dir / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()


def up(args: argparse.Namespace) -> int:
    started = time.monotonic()
    run_dir = Path(args.run_dir).resolve()
    stack = Stack(run_dir, args)
    if stack.state_file.exists():
        say(f"a stack seems to run already ({stack.state_file}); `deploy/run-local down` stops it")
        return 1
    _clear_previous_run(run_dir)
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    quorum = [sys.executable, "-m", "quorum.cli"]
    console = None
    control = None
    try:
        svc.check_binaries()
        if args.secure:
            say(f"[1/6] Apache Kafka, one broker+controller node, SASL_SSL with SCRAM users and ACLs "
                f"(log {stack.log('broker')})")
            stack.broker, stack.credentials = secure_stack.start(
                run_dir, args.broker_port or free_port(), stack.log("broker"), svc.EVENTS_TOPIC, svc.HEALTH_TOPIC,
                args.partitions)
            say(f"      credentials: {stack.credentials.directory} (admin.properties for Kafka's own tools; "
                f"one PRINCIPAL.properties per part)")
        else:
            say(f"[1/6] Apache Kafka, one broker+controller node (log {stack.log('broker')})")
            stack.broker = KafkaBroker(port=args.broker_port or free_port(), data_dir=run_dir / "kafka",
                                       log_path=stack.log("broker")).start()
            stack.broker.create_topic(svc.EVENTS_TOPIC, args.partitions)
            stack.broker.create_topic(svc.HEALTH_TOPIC, 1)
        stack.urls["kafka"] = stack.broker.bootstrap
        stack.save()

        say(f"[2/6] quorum: {args.voters} voters + {args.observers} observer(s), cluster id {svc.CLUSTER_ID}")
        for spec in svc.write_node_configs(run_dir, args.voters, args.observers, stack.broker.bootstrap,
                                           stack.client_properties("node")):
            stack.nodes[spec.node_id] = spec
            stack.spawn(stack.node_name(spec.node_id), quorum + ["node", "--config", str(spec.config_path)])
        bootstrap = ",".join(n.address for n in stack.nodes.values())
        stack.urls["quorum"] = bootstrap
        leader, epoch = svc.await_condition("a quorum leader", lambda: svc.quorum_leader(bootstrap), START_TIMEOUT_S,
                                            0.5, alive=lambda: stack.check_alive(nodes_may_die=False))
        say(f"      leader {leader} in epoch {epoch}")

        if args.kafka_quorum:
            _start_kafka_quorum(stack, quorum)

        addresses = {name: f"127.0.0.1:{free_port()}" for name in ("pushgateway", "alertmanager", "prometheus")}

        def start_server(name: str, argv: list[str]) -> None:
            stack.spawn(name, argv)
            svc.await_condition(name, lambda: svc.http_ok(f"http://{addresses[name]}/-/ready"), START_TIMEOUT_S,
                                alive=stack.check_alive)
            stack.urls[name] = f"http://{addresses[name]}"
            stack.save()

        say("[3/6] Pushgateway")
        start_server("pushgateway", svc.pushgateway_argv(addresses["pushgateway"], run_dir))

        if args.synthetic:
            say(f"[4/6] synthetic quorums: {args.synthetic}, with one of each fault in their first four minutes")
            stack.spawn("synthetic-quorum", quorum + ["synth", "--bootstrap-server", stack.broker.bootstrap,
                                                      "--topic", svc.EVENTS_TOPIC, "--clusters", str(args.synthetic),
                                                      "--demo-faults", *stack.command_config("node")])
        else:
            say("[4/6] no synthetic quorums (--synthetic N adds some)")

        say(f"[5/6] streaming job on local[*] (log {stack.log('streaming-job')}; the first batch takes a while)")
        job_config = _streaming_job_config(stack, addresses["pushgateway"])
        stack.spawn(JOB_NAME, [sys.executable, "-m", "streaming.cli", "run", "--config", str(job_config)])
        svc.await_condition("the streaming job's first push of the quorum's health",
                            lambda: svc.pushed_clusters(addresses["pushgateway"]) & {svc.CLUSTER_ID},
                            JOB_START_TIMEOUT_S, 1.0, alive=stack.check_alive)
        stack.supervisor = JobSupervisor(stack, addresses["pushgateway"], say)
        stack.supervisor.push()  # 0 restarts: the series exists from the start

        # Prometheus only once the job has pushed: before, the rules would rightly find the
        # monitor absent, and start the stack with a page
        say("[6/6] Alertmanager, Prometheus with the alerting rules")
        console = AlertConsole("127.0.0.1", free_port(), lambda line: say(f"alert: {line}"),
                               record=run_dir / NOTIFICATIONS_FILE).start()
        start_server("alertmanager", svc.alertmanager_argv(addresses["alertmanager"], run_dir, console.url))
        start_server("prometheus", svc.prometheus_argv(addresses["prometheus"], run_dir, addresses["pushgateway"],
                                                       addresses["alertmanager"]))

        control = _serve_control(stack, stopping)
        say(f"ready in {time.monotonic() - started:.0f} s:")
        for name, url in stack.urls.items():
            say(f"      {name:13} {url}")
        say(f"      {'logs':13} {run_dir / 'logs'}")
        say("      try: deploy/run-local chaos freeze follower   (then: deploy/run-local chaos heal)")
        if stack.kafka_quorum:
            say("           deploy/run-local chaos freeze kafka-follower")
        deadline = time.monotonic() + args.duration if args.duration else None
        while not stopping and (deadline is None or time.monotonic() < deadline):
            problem = stack.check_alive()
            if problem:
                say(f"stopping: {problem}")
                return 1
            with stack.lock:
                restarts = stack.supervisor.restarts
                stack.supervisor.check(time.monotonic())
                if stack.supervisor.restarts != restarts:
                    stack.save()
            time.sleep(0.2)  # a dead job is seen within this
        return 0
    except svc.StartError as e:
        say(f"could not start: {e}")
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        stopping.append(1)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up short
        if control:
            control.close()
            (run_dir / "control.sock").unlink(missing_ok=True)
        stack.stop()
        if console:
            console.stop()
        say("stopped")


def _state(run_dir: Path) -> dict | None:
    path = run_dir / "stack.json"
    return json.loads(path.read_text()) if path.exists() else None


def down(args: argparse.Namespace) -> int:
    run_dir = Path(args.run_dir).resolve()
    state = _state(run_dir)
    if state is None:
        say("no stack is running")
        return 0
    try:
        os.kill(state["launcher"], signal.SIGTERM)  # the launcher stops its processes in order
        svc.await_condition("the stack to stop", lambda: not (run_dir / "stack.json").exists(), STOP_TIMEOUT_S * 3)
    except (ProcessLookupError, svc.StartError):
        pass
    for name, pid in state.get("pids", {}).items():  # whatever a dead launcher left behind
        try:
            os.killpg(pid, signal.SIGKILL)
            say(f"killed leftover {name} ({pid})")
        except (ProcessLookupError, PermissionError):
            pass
    (run_dir / "stack.json").unlink(missing_ok=True)
    say("stopped")
    return 0


def status(args: argparse.Namespace) -> int:
    state = _state(Path(args.run_dir).resolve())
    if state is None:
        say("no stack is running")
        return 1
    for name, url in state["urls"].items():
        print(f"{name:13} {url}")
    print(f"{'job restarts':13} {state.get('job_restarts', 0)}")
    if "quorum" in state["urls"]:
        # every node: a node that hangs costs part of the command's timeout, and another answers
        subprocess.run([sys.executable, "-m", "quorum.cli", "describe", "--bootstrap-server",
                        state["urls"]["quorum"], "--replication", "--human-readable"], cwd=ROOT)
    if "kafka-quorum" in state["urls"]:
        print("\nthe Kafka quorum (--kafka-quorum):", flush=True)
        subprocess.run([sys.executable, "-m", "quorum.cli", "describe", "--bootstrap-server",
                        state["urls"]["kafka-quorum"], "--replication", "--human-readable"], cwd=ROOT)
    return 0


def chaos(args: argparse.Namespace) -> int:
    path = Path(args.run_dir).resolve() / "control.sock"
    if not path.exists():
        say("no stack is running (or it is still starting)")
        return 1
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(90)  # events-restart waits for the events Kafka to serve again
        s.connect(str(path))
        s.sendall((json.dumps({"action": args.chaos_action, "node": args.node, "value": args.value}) + "\n").encode())
        reply = json.loads(s.makefile().readline())
    print(reply["message"])
    return 0 if reply["ok"] else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="deploy/run-local", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run-dir", default=str(ROOT / "run" / "local"), help="logs and state (default %(default)s)")
    sub = p.add_subparsers(dest="action")
    p.set_defaults(action="up")
    for parser in (p, sub.add_parser("up", help="start the stack (the default)")):
        parser.add_argument("--broker-port", type=int, default=None, help="Kafka port (default: a free one)")
        parser.add_argument("--partitions", type=int, default=8, help="events topic partitions (default %(default)s)")
        parser.add_argument("--voters", type=int, default=3, help="voters in the quorum (default %(default)s)")
        parser.add_argument("--observers", type=int, default=1, help="observers in the quorum (default %(default)s)")
        parser.add_argument("--synthetic", type=int, default=0, metavar="N",
                            help="also run N synthetic quorums with scripted faults (default %(default)s)")
        parser.add_argument("--duration", type=float, default=None, help="stop by itself after this many seconds")
        parser.add_argument("--secure", action="store_true",
                            help="secure the stack's Kafka as production clusters are (SASL_SSL with SCRAM, TLS, "
                                 "ACLs): each part runs under its own principal, configured with Kafka's own client "
                                 "properties files in RUN_DIR/credentials")
        parser.add_argument("--kafka-quorum", action="store_true",
                            help="also run a real Apache Kafka KRaft cluster (3 controllers, 1 broker) and watch it "
                                 "with `quorum collect`")
    sub.add_parser("down", help="stop a running stack")
    sub.add_parser("status", help="addresses and the quorum's replication state")
    c = sub.add_parser("chaos", help="disturb the running quorum (see above)")
    c.add_argument("chaos_action", choices=[*NODE_ACTIONS, "partition-leader", *STACK_ACTIONS, "heal"])
    c.add_argument("node", nargs="?", help=f"follower, leader or a node id (for {', '.join(NODE_ACTIONS)}); "
                                           f"kafka-follower, kafka-leader or kafka-ID: a node of the --kafka-quorum "
                                           f"cluster (for {', '.join(KAFKA_ACTIONS)}, heal)")
    c.add_argument("value", nargs="?", type=int, help="for skew: milliseconds (negative: early; after `--`)")
    sub.add_parser("nemesis", add_help=False, help="a seeded schedule of faults on a new stack, every alert judged "
                                                   "against it (deploy/run-local nemesis --help)")
    args, rest = p.parse_known_args(argv)
    if args.action == "nemesis":
        from nemesis.runner import main as nemesis
        return nemesis(rest, run_dir=args.run_dir if args.run_dir != p.get_default("run_dir") else None)
    if rest:
        p.error(f"unrecognized arguments: {' '.join(rest)}")
    return {"up": up, "down": down, "status": status, "chaos": chaos}[args.action](args)


if __name__ == "__main__":
    sys.exit(main())
