"""The launcher of the local stack (`deploy/run-local`, `up`): `Stack` holds one running stack's
parts, composed from the modules beside it (the process table and stack.json in stack_processes,
the fault kinds in stack_faults, the roles query in stack_roles, the control socket's server in
stack_control, the job's configuration in stack_job_config, the run directory's clearing in
stack_run_dir), and `up` starts them in order, serves the control socket, watches them and stops
them all. Only the launcher holds the processes; other commands talk to it through
RUN_DIR/control.sock."""
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

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "deploy"))

import local_services as svc  # noqa: E402
import packet_filter  # noqa: E402
import secure_stack  # noqa: E402
import stack_control  # noqa: E402
import stack_faults as faults  # noqa: E402
import stack_roles  # noqa: E402
from alert_console import AlertConsole  # noqa: E402
from job_supervisor import JOB_NAME, STANDBY_NAME, JobSupervisor  # noqa: E402
from stack_job_config import write_job_config  # noqa: E402
from stack_processes import ProcessTable, say, write_state  # noqa: E402
from stack_run_dir import NOTIFICATIONS_FILE, clear_previous_run  # noqa: E402

from quorum.local_kafka.kafka_broker import BrokerError, KafkaBroker  # noqa: E402
from quorum.local_kafka.kafka_cluster import KafkaCluster  # noqa: E402
from quorum.local_kafka.loopback_ports import free_port  # noqa: E402

START_TIMEOUT_S = 60
JOB_START_TIMEOUT_S = 240  # the first micro-batch includes starting the JVM and the Python workers
QUORUM = [sys.executable, "-m", "quorum.cli"]
FLEET_NAME = "simulated-fleet"
RUN_DIR = ROOT / "run" / "local"


class Stack:
    """The parts of one running stack, and what the fault kinds and the roles query act through."""

    def __init__(self, run_dir: Path, args: argparse.Namespace):
        self.run_dir = run_dir
        self.args = args
        self.table = ProcessTable(run_dir, ROOT, on_spawn=self.save)
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

    # --- the process table, as the job's supervisor sees it (job_supervisor.Processes) -------------
    @property
    def processes(self) -> dict[str, subprocess.Popen]:
        return self.table.processes

    @property
    def argv(self) -> dict[str, list[str]]:
        return self.table.argv

    def log(self, name: str) -> Path:
        return self.table.log(name)

    def spawn(self, name: str, argv: list[str], log_as: str | None = None, stdin_open: bool = False) -> subprocess.Popen:
        return self.table.spawn(name, argv, log_as, stdin_open)

    def client_properties(self, principal: str) -> str | None:
        """The properties file of a part's principal (--secure), or None."""
        return str(self.credentials.properties(principal)) if self.credentials else None

    def command_config(self, principal: str, option: str = "--command-config") -> list[str]:
        path = self.client_properties(principal)
        return [option, path] if path else []

    @property
    def state_file(self) -> Path:
        return self.run_dir / "stack.json"

    def save(self) -> None:
        pids = self.table.pids()
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
        write_state(self.run_dir, {"launcher": os.getpid(), "pids": pids, "urls": self.urls, "nodes": nodes,
                                   "job_restarts": restarts, "kafka_quorum": kafka_quorum,
                                   "notifications": str(self.run_dir / NOTIFICATIONS_FILE),
                                   "credentials": str(self.credentials.directory) if self.credentials else None})

    def node_name(self, node_id: int) -> str:
        return f"node-{node_id}"

    def check_alive(self, nodes_may_die: bool = True) -> str | None:
        """A dead node is part of the game (chaos kill) once the stack runs, and a dead job is
        restarted by the supervisor; anything else dying stops the stack."""
        def may_die(name: str) -> bool:
            return ((name in (JOB_NAME, STANDBY_NAME) and self.supervisor is not None)
                    or (nodes_may_die and name.startswith("node-")))
        return self.table.first_dead(may_die)

    def stop(self) -> None:
        for node_id in list(self.frozen):
            self.signal_node(node_id, signal.SIGCONT)
        self.table.stop_all()
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
    def signal_node(self, node_id: int, sig: int) -> None:
        self.table.signal(self.node_name(node_id), sig)

    def node_running(self, node_id: int) -> bool:
        return self.table.running(self.node_name(node_id))

    def node_fault(self, node_id: int, *words: str) -> str:
        """`quorum fault WORDS` on the node."""
        spec = self.nodes[node_id]
        out = subprocess.run([*QUORUM, "fault", "--config", str(spec.config_path), *words],
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
        if proc is not None and proc.poll() is None and node_id in self.frozen:
            self.signal_node(node_id, signal.SIGCONT)
            self.frozen.discard(node_id)
        self.table.stop_one(name)
        self.killed.discard(node_id)

    # --- the roles query and the nodes a request names (deploy/stack_roles.py) -------------------
    def leader(self) -> int:
        return stack_roles.leader(self)

    def target(self, action: str, node: str | int | None) -> int:
        return stack_roles.target(self, action, node)

    def kafka_target(self, action: str, node: str) -> int:
        return stack_roles.kafka_target(self, action, node)

    def roles(self) -> dict:
        return stack_roles.roles(self)

    # --- the control socket's requests ------------------------------------------------------------
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


def _start_kafka_quorum(stack: Stack) -> None:
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
    stack.spawn("kafka-collector", QUORUM + ["collect", "--bootstrap-server", cluster.bootstrap, "--cluster-id",
                                             cluster.cluster_id, *node_metrics, "--events-bootstrap-server",
                                             stack.broker.bootstrap, "--events-topic", svc.EVENTS_TOPIC,
                                             *stack.command_config("collector", "--events-command-config")])


def _start_events_kafka(stack: Stack) -> None:
    args, run_dir = stack.args, stack.run_dir
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


def _start_quorum(stack: Stack) -> None:
    args = stack.args
    say(f"[2/6] quorum: {args.voters} voters + {args.observers} observer(s), cluster id {svc.CLUSTER_ID}")
    for spec in svc.write_node_configs(stack.run_dir, args.voters, args.observers, stack.broker.bootstrap,
                                       stack.client_properties("node")):
        stack.nodes[spec.node_id] = spec
        stack.spawn(stack.node_name(spec.node_id), QUORUM + ["node", "--config", str(spec.config_path)])
    bootstrap = ",".join(n.address for n in stack.nodes.values())
    stack.urls["quorum"] = bootstrap
    leader, epoch = svc.await_condition("a quorum leader", lambda: svc.quorum_leader(bootstrap), START_TIMEOUT_S,
                                        0.5, alive=lambda: stack.check_alive(nodes_may_die=False))
    say(f"      leader {leader} in epoch {epoch}")


def _start_server(stack: Stack, name: str, address: str, argv: list[str]) -> None:
    stack.spawn(name, argv)
    svc.await_condition(name, lambda: svc.http_ok(f"http://{address}/-/ready"), START_TIMEOUT_S,
                        alive=stack.check_alive)
    stack.urls[name] = f"http://{address}"
    stack.save()


def _start_pipeline(stack: Stack, addresses: dict[str, str]) -> None:
    """The Pushgateway, the synthetic quorums, and the supervised job once it has pushed."""
    args, run_dir = stack.args, stack.run_dir
    say("[3/6] Pushgateway")
    _start_server(stack, "pushgateway", addresses["pushgateway"], svc.pushgateway_argv(addresses["pushgateway"],
                                                                                       run_dir))
    if args.synthetic:
        say(f"[4/6] synthetic quorums: {args.synthetic}, with one of each fault in their first four minutes")
        stack.spawn("synthetic-quorum", QUORUM + ["synth", "--bootstrap-server", stack.broker.bootstrap,
                                                  "--topic", svc.EVENTS_TOPIC, "--clusters", str(args.synthetic),
                                                  "--demo-faults", *stack.command_config("node")])
    elif not args.fleet:
        say("[4/6] no synthetic quorums (--synthetic N adds some, --fleet N a fleet of Kafka clusters)")
    if args.fleet:
        _start_fleet(stack)

    say(f"[5/6] streaming job on local[*] (log {stack.log('streaming-job')}; the first batch takes a while)")
    job_config = write_job_config(run_dir, stack.broker.bootstrap, svc.EVENTS_TOPIC, svc.HEALTH_TOPIC,
                                  addresses["pushgateway"], stack.client_properties("job"), fleet=bool(args.fleet))
    stack.spawn(JOB_NAME, [sys.executable, "-m", "streaming.cli", "run", "--config", str(job_config)])
    svc.await_condition("the streaming job's first push of the quorum's health",
                        lambda: svc.pushed_clusters(addresses["pushgateway"]) & {svc.CLUSTER_ID},
                        JOB_START_TIMEOUT_S, 1.0, alive=stack.check_alive)
    stack.supervisor = JobSupervisor(stack, addresses["pushgateway"], say)
    stack.supervisor.push()  # 0 restarts: the series exists from the start


def _start_fleet(stack: Stack) -> None:
    """A simulated fleet of Kafka clusters in one process (their wire protocol and JMX exporters,
    quorum/synthetic/simulated_fleet.py), watched by one `quorum collect --fleet`."""
    args, run_dir = stack.args, stack.run_dir
    say(f"[4/6] a simulated fleet of {args.fleet} Kafka clusters, watched by one fleet collector")
    stack.spawn(FLEET_NAME, [sys.executable, "-m", "quorum.synthetic.simulated_fleet", "--clusters", str(args.fleet)],
                stdin_open=True)
    clusters = svc.await_condition("the simulated fleet's addresses", lambda: fleet_addresses(stack.log(FLEET_NAME)),
                                   START_TIMEOUT_S, 0.5, alive=stack.check_alive)
    fleet_file = run_dir / "fleet.yaml"
    fleet_file.write_text(yaml.safe_dump({"clusters": [
        {"cluster_id": c["cluster_id"], "bootstrap_server": c["bootstrap"], "node_metrics": c["node_metrics"]}
        for c in clusters]}, sort_keys=False))
    stack.spawn("fleet-collector", QUORUM + ["collect", "--fleet", str(fleet_file), "--events-bootstrap-server",
                                             stack.broker.bootstrap, "--events-topic", svc.EVENTS_TOPIC,
                                             *stack.command_config("collector", "--events-command-config")])


def fleet_addresses(log: Path) -> list[dict] | None:
    """The clusters the simulated fleet serves, from the JSON line it prints first; None before."""
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            return json.loads(line)["clusters"]
    return None


def _start_alerting(stack: Stack, addresses: dict[str, str], console: AlertConsole) -> None:
    """Alertmanager, notifying `console`, and Prometheus with the alerting rules."""
    _start_server(stack, "alertmanager", addresses["alertmanager"],
                  svc.alertmanager_argv(addresses["alertmanager"], stack.run_dir, console.url))
    _start_server(stack, "prometheus", addresses["prometheus"],
                  svc.prometheus_argv(addresses["prometheus"], stack.run_dir, addresses["pushgateway"],
                                      addresses["alertmanager"]))


def _say_ready(stack: Stack, started: float) -> None:
    say(f"ready in {time.monotonic() - started:.0f} s:")
    for name, url in stack.urls.items():
        say(f"      {name:13} {url}")
    say(f"      {'logs':13} {stack.run_dir / 'logs'}")
    say("      try: deploy/run-local chaos freeze follower   (then: deploy/run-local chaos heal)")
    if stack.kafka_quorum:
        say("           deploy/run-local chaos freeze kafka-follower")


def _watch(stack: Stack, stopping: list) -> int:
    """Until stopped (or --duration): a part that died stops the stack; a dead job is replaced."""
    deadline = time.monotonic() + stack.args.duration if stack.args.duration else None
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


def up(args: argparse.Namespace) -> int:
    started = time.monotonic()
    run_dir = Path(args.run_dir).resolve()
    stack = Stack(run_dir, args)
    if stack.state_file.exists():
        say(f"a stack seems to run already ({stack.state_file}); `deploy/run-local down` stops it")
        return 1
    clear_previous_run(run_dir, say)
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    console = None
    control = None
    try:
        svc.check_binaries()
        _start_events_kafka(stack)
        _start_quorum(stack)
        if args.kafka_quorum:
            _start_kafka_quorum(stack)
        addresses = {name: f"127.0.0.1:{free_port()}" for name in ("pushgateway", "alertmanager", "prometheus")}
        _start_pipeline(stack, addresses)
        # Prometheus only once the job has pushed: before, the rules would rightly find the
        # monitor absent, and start the stack with a page
        say("[6/6] Alertmanager, Prometheus with the alerting rules")
        console = AlertConsole("127.0.0.1", free_port(), lambda line: say(f"alert: {line}"),
                               record=run_dir / NOTIFICATIONS_FILE).start()
        _start_alerting(stack, addresses, console)
        control = stack_control.serve(run_dir, stack.answer, stopping)
        _say_ready(stack, started)
        return _watch(stack, stopping)
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
            (run_dir / stack_control.SOCKET).unlink(missing_ok=True)
        stack.stop()
        if console:
            console.stop()
        say("stopped")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`up`'s flags (deploy/local_stack.py's CLI offers them on itself and on `up`)."""
    parser.add_argument("--broker-port", type=int, default=None, help="Kafka port (default: a free one)")
    parser.add_argument("--partitions", type=int, default=8, help="events topic partitions (default %(default)s)")
    parser.add_argument("--voters", type=int, default=3, help="voters in the quorum (default %(default)s)")
    parser.add_argument("--observers", type=int, default=1, help="observers in the quorum (default %(default)s)")
    parser.add_argument("--synthetic", type=int, default=0, metavar="N",
                        help="also run N synthetic quorums with scripted faults (default %(default)s)")
    parser.add_argument("--fleet", type=int, default=0, metavar="N",
                        help="also watch a fleet of N simulated Kafka clusters, healthy, through one fleet collector; "
                             "the job then keeps a steady quorum's row every 10 s (default %(default)s)")
    parser.add_argument("--duration", type=float, default=None, help="stop by itself after this many seconds")
    parser.add_argument("--secure", action="store_true",
                        help="secure the stack's Kafka as production clusters are (SASL_SSL with SCRAM, TLS, "
                             "ACLs): each part runs under its own principal, configured with Kafka's own client "
                             "properties files in RUN_DIR/credentials")
    parser.add_argument("--kafka-quorum", action="store_true",
                        help="also run a real Apache Kafka KRaft cluster (3 controllers, 1 broker) and watch it "
                             "with `quorum collect`")


def main(argv: list[str] | None = None) -> int:
    """`deploy/local_stack.py up` alone: how stack_control.start_stack starts a stack for the
    nemesis, the incident picture and the tests, without the CLI in between."""
    p = argparse.ArgumentParser(prog="deploy/stack_launcher.py", description="start the local stack "
                                "(deploy/run-local --help says more)")
    p.add_argument("--run-dir", default=str(RUN_DIR), help="logs and state (default %(default)s)")
    add_arguments(p)
    return up(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
