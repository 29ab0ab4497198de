"""Who leads, follows and observes in the local stack's quorums now: the roles query of the
control socket (the nemesis picks its targets from it), and the node a chaos request names
(`leader`, `follower`, an id; `kafka-leader`, `kafka-follower`, `kafka-collector`, `kafka-ID`).
Each function takes deploy/stack_launcher.py's Stack, and asks its nodes through it."""
from __future__ import annotations

import local_services as svc
import stack_faults as faults


def leader(stack) -> int:
    """The leader named by the running node of the highest epoch, each asked for its status
    on its control socket (quick, where DescribeQuorum through a client waits out its
    timeouts on a node without a leader): a deposed leader still claiming an older epoch
    is outvoted, and a node just restarted, not yet listening, is passed over."""
    said, best = [], None
    for spec in stack.nodes.values():
        if spec.node_id in stack.killed | stack.frozen:
            continue
        try:
            status = stack.node_control(spec.node_id, {"op": "status"})
        except Exception as e:  # noqa: BLE001 - a node that does not answer: ask the next
            said.append(f"node {spec.node_id}: {type(e).__name__}: {e}")
            continue
        said.append(f"node {spec.node_id}: {status['state']} in epoch {status['epoch']}")
        if best is None or status["epoch"] > best["epoch"]:
            best = status
    if best is not None and best["leader_id"] >= 0 and best["leader_id"] not in stack.killed | stack.frozen:
        return best["leader_id"]  # (the followers of a leader just frozen still name it)
    raise ValueError(f"the quorum has no leader right now ({'; '.join(said) or 'no node running'})")


def target(stack, action: str, node: str | int | None) -> int:
    """The node a node action acts on: an id, `leader`, or `follower` (the lowest-numbered
    voter that is not the leader and not already frozen or killed). Elections pick any node,
    so an action that only means something on a follower refuses the leader, naming the
    followers to choose from."""
    if node == "leader":
        return stack.leader()
    voters = sorted(n for n, spec in stack.nodes.items() if spec.voter)
    if node == "follower":
        leader = stack.leader()
        followers = [n for n in voters if n != leader and n not in stack.killed | stack.frozen]
        if not followers:
            raise ValueError(f"{action}: no running follower (leader {leader}, voters {voters})")
        return followers[0]
    try:
        node_id = int(node)
    except (TypeError, ValueError):
        raise ValueError(f"{action} needs a node: follower, leader or an id among {sorted(stack.nodes)}") from None
    if node_id not in stack.nodes:
        raise ValueError(f"{action} needs a node: follower, leader or an id among {sorted(stack.nodes)}")
    if action in faults.FOLLOWER_ACTIONS:
        leader = stack.leader()
        if node_id == leader:
            followers = ", ".join(str(n) for n in voters if n != leader)
            raise ValueError(f"{action} acts on a follower, and node {node_id} is the leader now: choose "
                             f"one of the followers {followers}, or say `follower`")
    return node_id


def kafka_target(stack, action: str, node: str) -> int:
    """A node of the --kafka-quorum cluster: kafka-leader, kafka-follower or kafka-ID."""
    cluster = stack.kafka_quorum
    if cluster is None:
        raise ValueError(f"{node}: no Kafka quorum runs (start the stack with --kafka-quorum)")
    if action not in faults.KAFKA_ACTIONS + (faults.HEAL,):
        raise ValueError(f"{action} acts on the project's nodes; a Kafka node can be: "
                         f"{', '.join(faults.KAFKA_ACTIONS)}")
    which = node.removeprefix("kafka-")
    if which == "leader":
        return cluster.leader()
    if which == "collector":  # the node `quorum collect` holds its connection to, now
        talks_to = sorted(cluster.connected_nodes(stack.processes["kafka-collector"].pid) & set(cluster.nodes))
        if not talks_to:
            raise ValueError(f"{action}: the collector holds no connection to a Kafka node right now")
        return talks_to[0]
    if which == "follower":
        followers = [i for i in cluster.followers() if i not in stack.kafka_frozen | stack.kafka_killed]
        if not followers:
            raise ValueError(f"{action}: no running follower in the Kafka quorum")
        return followers[0]
    if not which.isdigit() or int(which) not in cluster.nodes:
        raise ValueError(f"{node}: say kafka-leader, kafka-follower, kafka-collector or kafka-ID, ID among "
                         f"{sorted(cluster.nodes)}")
    return int(which)


def roles(stack) -> dict:
    """Who leads, who follows and who observes in each quorum now (for the nemesis, which
    picks its targets itself): JSON in the reply's message."""
    voters = sorted(n for n, spec in stack.nodes.items() if spec.voter)
    try:
        leader, why = stack.leader(), None
    except ValueError as e:
        leader, why = None, str(e)
    roles = {"project": {"cluster_id": svc.CLUSTER_ID, "leader": leader, "no_leader": why, "voters": voters,
                         "observers": sorted(set(stack.nodes) - set(voters))},
             "kafka": None, "kafka_cutoff": stack.packet_filter is not None}
    cluster = stack.kafka_quorum
    if cluster is not None:
        roles["kafka"] = {"cluster_id": cluster.cluster_id, "leader": kafka_leader(stack),
                          "voters": cluster.voter_ids(), "observers": cluster.broker_ids(),
                          "collector": sorted(cluster.connected_nodes(stack.processes["kafka-collector"].pid)
                                              & set(cluster.nodes))}
    return roles


def kafka_leader(stack) -> int | None:
    """The Kafka quorum's leader by any controller that answers (the broker may be the one frozen)."""
    out = stack.kafka_frozen | stack.kafka_killed | (stack.packet_filter.cut_nodes() if stack.packet_filter else set())
    for node_id in [i for i in stack.kafka_quorum.controller_ids() if i not in out]:
        try:
            leader = stack.kafka_quorum.describe_controller(node_id).leader_id
        except Exception:  # noqa: BLE001 - a controller that does not answer: ask the next
            continue
        if leader >= 0:
            return leader
    return None
