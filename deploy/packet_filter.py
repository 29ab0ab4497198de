"""Real network cuts between the nodes of a cluster on loopback (the tests' clusters, the local
stack's --kafka-quorum): kernel packet-filter rules (iptables, installed by deploy/setup.sh) in
a chain of the process's own, hooked into OUTPUT, which all loopback traffic passes. A node's
own traffic is told apart by its cgroup (the cluster starts each node in one: KafkaCluster's
`cgroup_parent`), since every node sends from 127.0.0.1.

Needs root, as the set-up does. Only the cluster's own loopback ports are ever named."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path


def cgroup2_root() -> Path:
    """Where the unified (v2) cgroup hierarchy is mounted: iptables' cgroup match names paths in it."""
    for line in Path("/proc/mounts").read_text().splitlines():
        _, mount_point, fs_type, *_ = line.split()
        if fs_type == "cgroup2":
            return Path(mount_point)
    raise RuntimeError("no cgroup2 hierarchy is mounted: the network-cut tests need one (and root)")


def iptables(*args: str) -> None:
    out = subprocess.run(["iptables", "-w", *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"iptables {' '.join(args)}: {out.stderr.strip()}")


class PacketFilter:
    """Cuts one node of a KafkaCluster off from the controllers while its process runs; heals."""

    def __init__(self, cluster=None):
        self.cluster = cluster
        self.chain = f"QUORUM-TEST-{os.getpid()}"
        self.root = cgroup2_root()
        self.rules: dict[int | None, list[list[str]]] = {}  # each cut node's rules, for heal(node)
        iptables("-N", self.chain)
        iptables("-I", "OUTPUT", "-j", self.chain)

    def cut(self, node_id: int) -> None:
        """Drop every packet into the node's CONTROLLER listener (a broker's: its client one), and
        every packet the node sends to the other controllers' CONTROLLER listeners; everything
        else (the node's other ports, a combined node's client port among them) still flows."""
        node, nodes = self.cluster.nodes[node_id], self.cluster.nodes
        peers = [nodes[i].controller_port for i in self.cluster.controller_ids() if i != node_id]
        self.cut_process(node.controller_port or node.port, peers, self.cluster.cgroup_of(node_id), node_id)

    def cut_process(self, listener_port: int, peer_ports: list[int], cgroup: Path, node_id: int | None = None) -> None:
        """The same for any process in a cgroup of its own: its listener, and its way to the peers."""
        rules = [["-p", "tcp", "--dport", str(listener_port), "-j", "DROP"],
                 ["-m", "cgroup", "--path", str(cgroup.relative_to(self.root)), "-p", "tcp",
                  "-m", "multiport", "--dports", ",".join(str(p) for p in peer_ports), "-j", "DROP"]]
        for rule in rules:
            iptables("-A", self.chain, *rule)
        self.rules.setdefault(node_id, []).extend(rules)

    def heal(self, node_id: int | None = None) -> None:
        """Every cut (no node given), or the cuts of one node."""
        if node_id is None:
            iptables("-F", self.chain)
            self.rules.clear()
            return
        for rule in self.rules.pop(node_id, []):
            iptables("-D", self.chain, *rule)

    def cut_nodes(self) -> set[int]:
        return {n for n in self.rules if n is not None}

    def close(self) -> None:
        iptables("-D", "OUTPUT", "-j", self.chain)
        iptables("-F", self.chain)
        iptables("-X", self.chain)
