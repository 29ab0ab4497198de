"""The local stack, all on loopback: Apache Kafka (one broker+controller node), a quorum of real node
processes (3 voters + 1 observer by default) publishing their events, the Spark streaming job on
local[*], the Pushgateway, Prometheus with the alerting rules, and Alertmanager, whose
notifications are printed here.

  deploy/run-local                     start everything in the foreground; Ctrl-C stops it all
  deploy/run-local down                stop a stack started from another terminal
  deploy/run-local status              the quorum's state and the stack's addresses
  deploy/run-local chaos ACTION [NODE] disturb the running quorum; NODE is a node id, `follower`
                                       (a voter that is not the leader, chosen for you) or `leader`:
{chaos actions}
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
import stack_control  # noqa: E402
import stack_faults as faults  # noqa: E402
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

    # --- what the faults (deploy/stack_faults.py) act through -----------------------------------
    def _signal(self, name: str, sig: int) -> None:
        proc = self.processes.get(name)
        if proc is None or proc.poll() is not None:
            raise ValueError(f"{name} is not running")
        os.kill(proc.pid, sig)

    def signal_node(self, node_id: int, sig: int) -> None:
        self._signal(self.node_name(node_id), sig)

    def node_running(self, node_id: int) -> bool:
        return self.processes[self.node_name(node_id)].poll() is None

    def node_fault(self, node_id: int, *words: str) -> str:
        """`quorum fault WORDS` on the node."""
        spec = self.nodes[node_id]
        out = subprocess.run([sys.executable, "-m", "quorum.cli", "fault", "--config", str(spec.config_path), *words],
                             capture_output=True, text=True, timeout=10, cwd=ROOT)
        if out.returncode != 0:
            raise ValueError(out.stderr.strip() or out.stdout.strip())
        return out.stdout.strip()

    def node_control(self, node_id: int, command: dict) -> dict:
        """One command on the node's own control socket."""
        from quorum.node.config import load
        from quorum.node.fault_command import send
        return send(str(load(self.nodes[node_id].config_path).control_path), command, timeout_s=2)

    def respawn_node(self, node_id: int) -> None:
        name = self.node_name(node_id)
        self.spawn(name, self.argv[name])

    def stop_node(self, node_id: int) -> None:
        """Stop the node's process (a frozen one is continued first, so that it can stop)."""
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

    # --- the roles query, and the nodes a request names -------------------------------------------
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
                status = self.node_control(spec.node_id, {"op": "status"})
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
        if action in faults.FOLLOWER_ACTIONS:
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
        if action not in faults.KAFKA_ACTIONS + (faults.HEAL,):
            raise ValueError(f"{action} acts on the project's nodes; a Kafka node can be: "
                             f"{', '.join(faults.KAFKA_ACTIONS)}")
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

    def heal(self, node: str | int | None) -> str:
        """Undo every fault (no node), or only those on one node."""
        if node is None:
            done = faults.heal_kafka(self) if self.kafka_quorum else []
            for node_id in sorted(self.nodes):
                done += faults.heal_node(self, node_id)
            return "; ".join(done) or "faults cleared on every node"
        if faults.is_kafka_node(node):
            return "; ".join(faults.heal_kafka(self, self.kafka_target("heal", node))) or f"{node}: nothing to heal"
        return "; ".join(faults.heal_node(self, self.target("heal", node))) or f"node {node}: nothing to heal"

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
        """Carry out one fault kind of deploy/stack_faults.py, or heal, on the node the request names."""
        with self.lock:
            if action == faults.HEAL:
                return self.heal(node)
            fault = faults.find(action, node)
            if fault is None:
                if faults.is_kafka_node(node):
                    self.kafka_target(action, node)  # says why: no Kafka quorum, or no Kafka node's fault
                raise ValueError(f"unknown chaos action {action!r}")
            if fault.cluster == faults.PROJECT and fault.on_node:
                node = self.target(action, node)
            return fault.inject(self, node, value)

    def answer(self, request: dict) -> str:
        """A request on RUN_DIR/control.sock (deploy/stack_control.py): the roles query, or chaos."""
        if stack_control.is_roles_query(request):
            return json.dumps(self.roles())
        message = self.chaos(request["action"], request.get("node"), request.get("value"))
        say(f"chaos: {message}")
        return message


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

        control = stack_control.serve(run_dir, stack.answer, stopping)
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
    client = stack_control.StackClient(Path(args.run_dir).resolve(), timeout_s=90)  # events-restart waits
    if not client.serving():                                                         # for Kafka to serve again
        say("no stack is running (or it is still starting)")
        return 1
    ok, message = client.ask(args.chaos_action, args.node, args.value)
    print(message)
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    description = __doc__.replace("{chaos actions}", faults.usage())  # each kind's own words
    p = argparse.ArgumentParser(prog="deploy/run-local", description=description,
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
    c.add_argument("chaos_action", choices=faults.CHOICES)
    c.add_argument("node", nargs="?", help=f"follower, leader or a node id (for {', '.join(faults.NODE_ACTIONS)}); "
                                           f"kafka-follower, kafka-leader or kafka-ID: a node of the --kafka-quorum "
                                           f"cluster (for {', '.join(faults.KAFKA_ACTIONS)}, heal)")
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
