"""Seeded discrete-event simulation of a KRaft quorum built from the pure Raft core.

    python -m quorum.sim --seed 7 --voters 3 --observers 1 --events 3000

Every node is a `RaftNode` over an in-memory log and quorum-state store; a virtual
clock jumps from event to event, so a run is a pure function of its arguments and a
failing seed replays exactly. During the fault phase the network drops, delays,
reorders and duplicates messages, partitions nodes (both ways or one way), and nodes
crash and restart (losing unflushed log data), shut down gracefully, lose their whole
disk, pause longer than every timeout, or all die at once. After **every** event the
safety invariants are checked; then everything heals and the liveness phase demands a
leader and a newly committed record within a bounded simulated time.

cluster.py has the simulation itself (`Simulation`), network.py the simulated network,
faults.py the node faults and the random draw, invariants.py the checks, cli.py the command.
"""
from quorum.sim.cli import main, replay_command, run_seed
from quorum.sim.cluster import SimResult, Simulation, Violation
from quorum.sim.faults import Faults
from quorum.sim.sim_node import SimNode

__all__ = ["Faults", "SimNode", "SimResult", "Simulation", "Violation", "main", "replay_command", "run_seed"]
