"""Node faults and the fault phase's random draw, as part of `Simulation` (cluster.py):
nodes crash and restart (losing what they had not flushed), shut down gracefully, lose their
whole disk, pause longer than every timeout, or all die at once; the network's faults are in
network.py, and `inject_random_fault` draws from both with the weights of `Faults`."""
from __future__ import annotations

from dataclasses import dataclass

from quorum.raft.log import MemoryLog
from quorum.raft.quorum_state_store import MemoryQuorumStateStore
from quorum.sim.sim_node import SimNode


@dataclass
class Faults:
    """Probabilities and ranges of the fault phase (a seed draws its own mix from these)."""
    drop: float = 0.03               # per message
    duplicate: float = 0.02          # per message
    max_delay_ms: int = 25           # uniform 1..max: different delays reorder messages
    fault_every_ms: tuple[int, int] = (200, 2500)
    client_every_ms: tuple[int, int] = (20, 250)
    crash: float = 1.0               # relative weights of the fault kinds
    graceful_shutdown: float = 0.5
    disk_loss: float = 0.3
    partition: float = 1.0
    one_way_partition: float = 0.6
    isolate: float = 0.6
    pause: float = 0.5
    kill_all: float = 0.15
    noise: float = 0.5               # change the drop/duplicate rates
    enabled: bool = True

    @staticmethod
    def none() -> "Faults":
        return Faults(drop=0.0, duplicate=0.0, enabled=False)


class FaultInjection:
    """Simulation's node faults and random fault draw, mixed into it: `self` is the simulation."""

    def _crash(self, n: SimNode) -> None:
        if not n.up:
            return
        n.raft = None
        n.log.crash()
        n.flush_queue = []
        n.flush_scheduled = False
        n.paused_until = None
        n.buffered = []
        self.stats["crashes"] += 1

    def crash(self, node_id: int, restart_after_ms: int | None = None) -> None:
        self._crash(self.nodes[node_id])
        if restart_after_ms is not None:
            self._push(self.now + restart_after_ms, "restart", node_id)

    def restart(self, node_id: int) -> None:
        self._on_restart(node_id)

    def _on_restart(self, node_id: int) -> None:
        n = self.nodes[node_id]
        if not n.up:
            self._start(n)

    def graceful_shutdown(self, node_id: int, restart_after_ms: int | None = None) -> None:
        n = self.nodes[node_id]
        if not n.up:
            return
        self._apply(n, n.raft.resign(self.now))
        self._push(self.now + 30, "graceful_stop", node_id)
        if restart_after_ms is not None:
            self._push(self.now + 30 + restart_after_ms, "restart", node_id)

    def _on_graceful_stop(self, node_id: int) -> None:
        self._crash(self.nodes[node_id])

    def resign(self, node_id: int) -> None:
        """The leader resigns but keeps running (Kafka's `resign(epoch)`), unlike a graceful
        shutdown: it can resend EndQuorumEpoch while resigned."""
        n = self.nodes[node_id]
        if n.up:
            self._apply(n, n.raft.resign(self.now))

    def lose_disk(self, node_id: int, restart_after_ms: int | None = None) -> bool:
        """Wipe a node's log and quorum state. A voter comes back unable to vote; only done
        where Raft's fault model allows it (see `_disk_loss_allowed`)."""
        n = self.nodes[node_id]
        if n.is_voter and not self._disk_loss_allowed(n):
            return False
        self._crash(n)
        n.log = MemoryLog()
        n.store = MemoryQuorumStateStore()
        n.max_epoch_seen = n.max_stored_epoch = 0
        if n.is_voter:
            n.may_vote = False
            self.disk_losses += 1
        if restart_after_ms is not None:
            self._push(self.now + restart_after_ms, "restart", node_id)
        return True

    def _disk_loss_allowed(self, n: SimNode) -> bool:
        voters = len(self.voter_ids)
        if voters < 3 or self.disk_losses >= (voters - 1) // 2 or not n.may_vote:
            return False
        # The other voters must still hold, by a majority, every record committed so far and
        # every record the wiped voter ever acknowledged: its fetches may still be in flight,
        # and a leader counting them must not commit what only the lost disk held.
        majority = voters // 2 + 1
        return (self._holders(len(self.committed), exclude=n.node_id) >= majority
                and self._holders(n.log.flushed_end_offset(), exclude=n.node_id, reference=n.log) >= majority)

    def pause(self, node_id: int, duration_ms: int) -> None:
        n = self.nodes[node_id]
        if n.up and n.paused_until is None:
            n.paused_until = self.now + duration_ms
            self._push(n.paused_until, "resume", (node_id, n.incarnation))

    def _on_resume(self, data) -> None:
        node_id, inc = data
        n = self.nodes[node_id]
        if not n.up or n.incarnation != inc or n.paused_until is None:
            return
        n.paused_until = None
        buffered, n.buffered = n.buffered, []
        for m in buffered:
            if n.up:
                self._apply(n, n.raft.handle(m, self.now))
        if n.up:
            self._apply(n, n.raft.tick(self.now))

    def kill_all(self, restart_after_ms: int | None = None) -> None:
        for i in self.nodes:
            self.crash(i, restart_after_ms)

    # --- the fault phase's draw ----------------------------------------------------------------

    def inject_random_fault(self) -> str:
        f = self.faults
        kinds = [("crash", f.crash), ("graceful_shutdown", f.graceful_shutdown), ("disk_loss", f.disk_loss),
                 ("partition", f.partition), ("one_way_partition", f.one_way_partition),
                 ("isolate", f.isolate), ("pause", f.pause), ("kill_all", f.kill_all), ("noise", f.noise)]
        kind = self.rng.choices([k for k, _ in kinds], [w for _, w in kinds])[0]
        rng = self.rng
        ids = list(self.nodes)
        target = rng.choice(ids)
        if rng.random() < 0.5 and self.leader() is not None:
            target = self.leader()      # the interesting node, half of the time
        back = rng.randint(100, 6000)
        if kind == "crash":
            self.crash(target, back)
        elif kind == "graceful_shutdown":
            self.graceful_shutdown(target, back)
        elif kind == "disk_loss":
            if not self.lose_disk(target, back):
                kind = "disk_loss(refused)"
        elif kind == "partition":
            rng.shuffle(ids)
            cut = rng.randint(1, max(1, len(ids) - 1))
            self._push(self.now + back, "heal", self.partition(ids[:cut]))
        elif kind == "one_way_partition":
            others = [o for o in ids if o != target]
            pairs = [(target, o) for o in others] if rng.random() < 0.5 else [(o, target) for o in others]
            self._push(self.now + back, "heal", self.block(pairs))
        elif kind == "isolate":
            self._push(self.now + back, "heal", self.isolate(target))
        elif kind == "pause":
            self.pause(target, rng.randint(self.config.check_quorum_timeout_ms + 500, 8000))
        elif kind == "kill_all":
            self.kill_all(rng.randint(100, 3000))
        elif kind == "noise":
            self.drop = rng.choice((0.0, 0.01, f.drop, 0.1, 0.2))
            self.duplicate = rng.choice((0.0, f.duplicate, 0.1))
        if self.trace is not None:
            self.trace.append(f"t={self.now} {kind} node={target}")
        return kind

    def _on_fault(self, _) -> None:
        self.inject_random_fault()
        lo, hi = self.faults.fault_every_ms
        self._push(self.now + self.rng.randint(lo, hi), "fault", None)
