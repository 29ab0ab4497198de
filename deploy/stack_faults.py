"""Every fault the local stack can be put through, one object a kind that knows how to inject
itself, heal itself and say what it does: `deploy/run-local chaos` dispatches through FAULTS,
its argparse choices are read from it, and the nemesis schedule draws from the same kinds.

A kind acts on one of three things (its `cluster`): the project's quorum (a node id, `leader` or
`follower`), the --kafka-quorum cluster (`kafka-leader`, `kafka-follower`, `kafka-collector`,
`kafka-ID`; the schedule names these kinds `kafka-ACTION`), or the monitor itself. The objects
hold no state: what is disturbed now is the stack's (`frozen`, `killed`, ...), so that the
launcher's stop and the roles query see it too. The stack side they use is `deploy/stack_launcher.py`'s
`Stack`: its processes and node sets, leader, kafka_target, node_fault, node_control,
signal_node, stop_node and respawn_node."""
from __future__ import annotations

import shutil
import signal
import time
from pathlib import Path

import local_services as svc
from job_supervisor import JOB_NAME, signal_group

PROJECT, KAFKA, MONITOR = "project", "kafka", "monitor"
THROTTLE_RECORDS_PER_S = "1"     # below the leader's 2 NoOps/s: the stalled voter falls behind
OTHER_CLUSTER_ID = "another-cluster"


class Fault:
    action = ""            # the chaos command's word
    cluster = PROJECT
    on_node = True         # acts on a node named in the request
    follower_only = False  # a leader does not replicate from anyone and makes its own appends
    instant = False        # over once done: nothing to heal
    help = ""

    @property
    def kind(self) -> str:
        """The name the nemesis schedule gives it: the cluster is part of it for Kafka's nodes."""
        return f"kafka-{self.action}" if self.cluster == KAFKA else self.action

    def inject(self, stack, node, value: int | None = None) -> str:
        raise NotImplementedError

    def disturbed(self, stack) -> set[int]:
        """The nodes this kind disturbs now (those a heal has to mend)."""
        return set()

    def heal(self, stack, node_id: int) -> list[str]:
        """Undo this kind on one node; what was done, in words."""
        return []


# --- the project's quorum -------------------------------------------------------------------
class NodeSocketFault(Fault):
    """Injected through the node's own control socket (`quorum fault`); one `clear` heals them all."""
    words: tuple[str, ...] = ()
    said = ""

    def inject(self, stack, node, value=None):
        stack.node_fault(node, *self.words)
        return self.said.format(node=node)


class Stall(NodeSocketFault):
    action, follower_only = "stall", True
    words = ("throttle", THROTTLE_RECORDS_PER_S)
    said = (f"node {{node}}: replication throttled to {THROTTLE_RECORDS_PER_S} record/s; it keeps fetching "
            f"and falls behind the leader's appends")
    help = ("throttle a follower's replication (1 record/s, the leader appends 2 NoOps/s):\n"
            "it keeps fetching and falls further behind (stalled, cause behind)")


class SlowDisk(NodeSocketFault):
    action, follower_only = "slow-disk", True
    words = ("slow-disk", "3000")
    said = "node {node}: every fsync now takes 3 s more; its fetches come seconds apart"
    help = "slow a follower's disk (3 s per fsync): its fetches come seconds apart"


class WrongCluster(Fault):
    action, follower_only = "wrong-cluster", True
    help = "restart a follower with another cluster id: the leader refuses its fetches"

    def inject(self, stack, node, value=None):
        restart_node(stack, node, OTHER_CLUSTER_ID)
        stack.other_cluster.add(node)
        return f"node {node}: restarted with cluster id {OTHER_CLUSTER_ID!r}; the leader refuses its fetches"

    def disturbed(self, stack):
        return set(stack.other_cluster)

    def heal(self, stack, node_id):
        if node_id not in stack.other_cluster:
            return []
        restart_node(stack, node_id, svc.CLUSTER_ID)
        stack.other_cluster.discard(node_id)
        return [f"node {node_id} restarted with cluster id {svc.CLUSTER_ID!r}"]


def restart_node(stack, node_id: int, cluster_id: str) -> None:
    """Stop the node and start it again with `cluster_id`. Under another id it runs on a copy
    of its data directory whose meta.properties names that cluster (a data directory keeps
    its cluster id): it still knows the quorum's leader and fetches from it, as a node given
    another cluster's configuration does, and the leader refuses every fetch."""
    import yaml
    stack.stop_node(node_id)
    path = stack.nodes[node_id].config_path
    config = yaml.safe_load(path.read_text())
    data_dir = stack.data_dirs.setdefault(node_id, config["data.dir"])
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
    stack.respawn_node(node_id)


class Cutoff(NodeSocketFault):
    action, words = "cutoff", ("pause",)
    said = "node {node}: all traffic in and out dropped"
    help = "drop all of the node's traffic (it cannot reach or be reached)"


class NodeProcessFault(Fault):
    """A signal to the node's process; the stack's set `held` says on whom, until the heal."""
    held = ""           # the stack's set of the nodes it holds
    sig = signal.SIGSTOP
    done = healed = ""  # in words

    def inject(self, stack, node, value=None):
        stack.signal_node(node, self.sig)
        getattr(stack, self.held).add(node)
        return f"node {node}: {self.done}"

    def disturbed(self, stack):
        return set(getattr(stack, self.held))

    def heal(self, stack, node_id):
        if node_id not in getattr(stack, self.held):
            return []
        self.undo(stack, node_id)
        getattr(stack, self.held).discard(node_id)
        return [f"node {node_id} {self.healed}"]

    def undo(self, stack, node_id: int) -> None:
        raise NotImplementedError


class Freeze(NodeProcessFault):
    action, held, sig, done, healed = "freeze", "frozen", signal.SIGSTOP, "stopped with SIGSTOP", "continued"
    help = "SIGSTOP the node's process (heal sends SIGCONT)"

    def undo(self, stack, node_id):
        stack.signal_node(node_id, signal.SIGCONT)


class Kill(NodeProcessFault):
    action, held, sig, done, healed = "kill", "killed", signal.SIGKILL, "killed", "restarted"
    help = "SIGKILL the node's process (heal restarts it)"

    def undo(self, stack, node_id):
        stack.respawn_node(node_id)


class Skew(Fault):
    action = "skew"
    help = "stamp the node's records MS milliseconds off the true clock (`-- -3000`: early)"

    def inject(self, stack, node, value=None):
        if value is None:
            raise ValueError("skew needs milliseconds after the node: chaos skew NODE MS (negative: early)")
        stack.node_fault(node, "skew", "--", str(int(value)))
        return f"node {node}: its records are stamped {int(value):+d} ms off the true clock"


class PartitionLeader(Fault):
    action, on_node = "partition-leader", False
    help = "cut the current leader off from everyone"

    def inject(self, stack, node, value=None):
        leader = stack.leader()
        stack.node_fault(leader, "pause")
        return f"leader {leader}: cut off from every peer"


def clear_injected(stack, node_id: int) -> list[str]:
    """Heal what the node's control socket injected (stall, slow-disk, cutoff, skew, a leader's
    partition), asked of the node directly: a heal of every node stays quick on a loaded machine."""
    if not stack.node_running(node_id):
        return []
    try:
        before = stack.node_control(node_id, {"op": "status"}).get("faults", {})
        stack.node_control(node_id, {"op": "clear"})
    except (OSError, ValueError):
        before = {}  # a node still starting up has no faults to clear
    injected = [k for k, v in before.items() if v not in (False, 0, [])]
    return [f"node {node_id}: {', '.join(injected)} cleared"] if injected else []


# --- the monitor ------------------------------------------------------------------------------
class JobKill(Fault):
    action, cluster, on_node, instant = "job-kill", MONITOR, False, True
    help = "SIGKILL the streaming job (its supervisor restarts it)"

    def inject(self, stack, node, value=None):
        proc = stack.processes.get(JOB_NAME)
        if proc is None or proc.poll() is not None:
            raise ValueError(f"{JOB_NAME} is not running (the supervisor may be restarting it)")
        signal_group(proc.pid, signal.SIGKILL)
        return f"{JOB_NAME}: killed with SIGKILL (the supervisor restarts it from its checkpoint)"


class EventsRestart(Fault):
    action, cluster, on_node, instant = "events-restart", MONITOR, False, True
    help = "stop the events Kafka and start it again"

    def inject(self, stack, node, value=None):
        started = time.monotonic()
        stack.broker.stop(keep_files=True)
        stack.broker.start()
        return f"the events Kafka: stopped and started again in {time.monotonic() - started:.1f} s"


# --- the --kafka-quorum cluster ---------------------------------------------------------------
class KafkaProcessFault(Fault):
    """A Kafka node's process stopped or killed: the cluster does and undoes it, the stack's set
    `held` says on whom."""
    cluster = KAFKA
    held = ""           # the stack's set of the nodes it holds
    do = undo = ""      # KafkaCluster's methods
    done = healed = ""  # in words

    def inject(self, stack, node, value=None):
        node_id = stack.kafka_target(self.action, node)
        getattr(stack.kafka_quorum, self.do)(node_id)
        getattr(stack, self.held).add(node_id)
        return f"Kafka {stack.kafka_quorum.nodes[node_id].role} {node_id}: {self.done}"

    def disturbed(self, stack):
        return set(getattr(stack, self.held))

    def heal(self, stack, node_id):
        getattr(stack.kafka_quorum, self.undo)(node_id)
        getattr(stack, self.held).discard(node_id)
        return [f"Kafka node {node_id} {self.healed}"]


class KafkaFreeze(KafkaProcessFault):
    action, held, do, undo = "freeze", "kafka_frozen", "freeze", "resume"
    done, healed = "stopped with SIGSTOP", "continued"


class KafkaKill(KafkaProcessFault):
    action, held, do, undo = "kill", "kafka_killed", "kill", "restart"
    done, healed = "killed", "restarted"


class KafkaCutoff(Fault):
    action, cluster = "cutoff", KAFKA

    def inject(self, stack, node, value=None):
        node_id = stack.kafka_target(self.action, node)
        if stack.packet_filter is None:
            raise ValueError("cutting a Kafka node off needs root and iptables (kernel packet-filter rules): "
                             "run the stack as root")
        stack.packet_filter.cut(node_id)
        return (f"Kafka {stack.kafka_quorum.nodes[node_id].role} {node_id}: its controller traffic dropped by "
                f"packet filter, the process running")

    def disturbed(self, stack):
        return set(stack.packet_filter.cut_nodes()) if stack.packet_filter is not None else set()

    def heal(self, stack, node_id):
        stack.packet_filter.heal(node_id)
        return [f"Kafka node {node_id} reconnected"]


# in the chaos command's order; a node's heal goes through the project's in this order too
PROJECT_FAULTS = {f.action: f for f in (Stall(), SlowDisk(), WrongCluster(), Cutoff(), Freeze(), Kill(), Skew(),
                                        PartitionLeader())}
MONITOR_FAULTS = {f.action: f for f in (JobKill(), EventsRestart())}
KAFKA_FAULTS = {f.action: f for f in (KafkaFreeze(), KafkaKill(), KafkaCutoff())}
FAULTS = [*PROJECT_FAULTS.values(), *MONITOR_FAULTS.values(), *KAFKA_FAULTS.values()]
BY_KIND = {f.kind: f for f in FAULTS}  # the nemesis schedule's names

NODE_ACTIONS = tuple(a for a, f in PROJECT_FAULTS.items() if f.on_node)
FOLLOWER_ACTIONS = tuple(a for a, f in PROJECT_FAULTS.items() if f.follower_only)
KAFKA_ACTIONS = tuple(KAFKA_FAULTS)
STACK_ACTIONS = tuple(MONITOR_FAULTS)
HEAL = "heal"
CHOICES = [*NODE_ACTIONS, *(a for a, f in PROJECT_FAULTS.items() if not f.on_node), *STACK_ACTIONS, HEAL]
# a node's heal: continue it, restart it, give it its cluster id back, then clear what it injected
NODE_HEAL_ORDER = (PROJECT_FAULTS["freeze"], PROJECT_FAULTS["kill"], PROJECT_FAULTS["wrong-cluster"])


def is_kafka_node(node) -> bool:
    return isinstance(node, str) and node.startswith("kafka-")


def request_node(cluster: str, node: int | None) -> str | int | None:
    """How a chaos request names node `node` of `cluster` (the Kafka quorum's: kafka-ID)."""
    return f"kafka-{node}" if cluster == KAFKA and node is not None else node


def find(action: str, node) -> Fault | None:
    """The kind a chaos request names: a Kafka node's for a kafka-... node, else the project's or the monitor's."""
    if is_kafka_node(node):
        return KAFKA_FAULTS.get(action)
    return PROJECT_FAULTS.get(action) or MONITOR_FAULTS.get(action)


def heal_node(stack, node_id: int) -> list[str]:
    """Undo whatever disturbs one of the project's nodes."""
    done = []
    for fault in NODE_HEAL_ORDER:
        done += fault.heal(stack, node_id)
    return done + clear_injected(stack, node_id)


def heal_kafka(stack, only: int | None = None) -> list[str]:
    """Continue, restart and reconnect the Kafka quorum's disturbed nodes (or just `only`)."""
    done = []
    for fault in KAFKA_FAULTS.values():
        for node_id in sorted(fault.disturbed(stack)):
            if only in (None, node_id):
                done += fault.heal(stack, node_id)
    return done


def usage() -> str:
    """The chaos actions' lines of `deploy/run-local --help`."""
    return "\n".join(_usage_line(f) for f in (*PROJECT_FAULTS.values(), *MONITOR_FAULTS.values()))


def _usage_line(fault: Fault) -> str:
    name = fault.action + (" NODE" if fault.on_node else "") + (" MS" if isinstance(fault, Skew) else "")
    first, *rest = fault.help.split("\n")
    pad = " " * 6
    lines = [f"{pad}{name:17} {first}" if len(name) < 18 else f"{pad}{name} {first}"]
    return "\n".join(lines + [f"{pad}{'':17} {line}" for line in rest])
