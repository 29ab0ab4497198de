"""The simulated cluster: its nodes, a virtual clock and one queue of events, and the
caller's side of the core's contract (flush, then send, then apply), with the network
(network.py), the faults (faults.py) and the invariants (invariants.py) mixed in.

The clock jumps from event to event, so a run is a pure function of its arguments and a
failing seed replays exactly.
"""
from __future__ import annotations

import heapq
import random
from dataclasses import dataclass

from quorum import events as contract
from quorum.contract_records import records
from quorum.raft.config import RaftConfig
from quorum.raft.errors import NotLeaderError
from quorum.raft.node import RaftNode
from quorum.raft.observations import StateTransition
from quorum.raft.output import Output, leaves_before_flush
from quorum.sim.faults import FaultInjection, Faults
from quorum.sim.invariants import Invariants
from quorum.sim.network import Network
from quorum.sim.sim_node import SimNode


class Violation(AssertionError):
    """An invariant broke; the message names the seed and how to replay it."""


class Simulation(Network, FaultInjection, Invariants):
    """A seeded cluster of `voters` voters and `observers` observers, under `faults`."""

    def __init__(self, seed: int, voters: int = 3, observers: int = 0, faults: Faults | None = None,
                 config: RaftConfig | None = None, validate_events: bool = False,
                 check_every_event: bool = True) -> None:
        if not 1 <= voters:
            raise ValueError("at least one voter")
        self.seed = seed
        self.rng = random.Random(seed)
        self.faults = faults if faults is not None else Faults()
        self.config = config or RaftConfig()
        self.validate_events = validate_events
        self.check_every_event = check_every_event   # off only to measure the core's own cost
        self.now = 0
        self.voter_ids = tuple(range(voters))
        self.nodes = {i: SimNode(i, i < voters) for i in range(voters + observers)}
        self.queue: list[tuple[int, int, str, object]] = []
        self._seq = 0
        self.blocked: set[tuple[int, int]] = set()   # (source, destination) pairs that drop
        self.drop = self.faults.drop
        self.duplicate = self.faults.duplicate
        self.committed: list[tuple[int, bytes, str]] = []   # offset -> (epoch, value, kind)
        self.epoch_leaders: dict[int, int] = {}
        self.events_processed = 0
        self.client_counter = 0
        self.disk_losses = 0
        self.stats = {"messages": 0, "dropped": 0, "duplicated": 0, "crashes": 0, "elections": 0}
        self.trace: list[str] | None = None
        for n in self.nodes.values():
            self._start(n)

    # --- plumbing ------------------------------------------------------------------------------

    def _push(self, at: int, kind: str, data: object) -> None:
        self._seq += 1
        heapq.heappush(self.queue, (at, self._seq, kind, data))

    def fail(self, what: str) -> None:
        raise Violation(f"seed {self.seed}: {what} (t={self.now} ms, event {self.events_processed})")

    def _start(self, n: SimNode) -> None:
        n.incarnation += 1
        rng = random.Random(f"{self.seed}/{n.node_id}/{n.incarnation}")
        n.raft = RaftNode(n.node_id, self.voter_ids, n.log, n.store, rng, self.now, self.config,
                          cluster_id="sim", may_vote=n.may_vote)
        n.paused_until = None
        n.buffered = []
        n.flush_queue = []
        n.flush_scheduled = False
        n.applied = 0
        n.published_hw = 0
        n.max_hw_seen = 0
        n.scheduled_tick = None
        self._schedule_tick(n)

    def _schedule_tick(self, n: SimNode) -> None:
        d = n.raft.next_deadline()
        if d < self.now:
            d = self.now
        if n.scheduled_tick is None or d < n.scheduled_tick or n.scheduled_tick < self.now:
            n.scheduled_tick = d
            self._push(d, "tick", (n.node_id, n.incarnation))

    def _apply(self, n: SimNode, out: Output) -> None:
        """The caller's side of the contract: flush, then send, then apply (fetch responses
        with a durable high watermark leave before the flush)."""
        if self.validate_events:
            for e in records(n.raft, out.observations):
                contract.validate(e)
        for o in out.observations:
            if isinstance(o, StateTransition) and o.to_state == "leader":
                self.stats["elections"] += 1
        if out.flush_log or n.flush_queue:
            flushed = n.log.flushed_end_offset()
            later = []
            for m in out.messages:   # as the node does: fetch responses whose high watermark is durable go now
                if leaves_before_flush(m, flushed):
                    self._send(m)
                else:
                    later.append(m)
            out.messages = later
            n.flush_queue.append(out)
            if not n.flush_scheduled:
                n.flush_scheduled = True
                self._push(self.now + self.rng.randint(0, 2), "flush", (n.node_id, n.incarnation))
        else:
            self._release(n, out)
        self._schedule_tick(n)

    def _release(self, n: SimNode, out: Output) -> None:
        for m in out.messages:
            self._send(m)
        self._record_committed(n, out.committed)
        n.published_hw = n.raft.high_watermark if n.raft else n.published_hw

    # --- event loop ----------------------------------------------------------------------------

    def step(self) -> bool:
        """Process one event; False when nothing is left to do."""
        if not self.queue:
            return False
        at, _, kind, data = heapq.heappop(self.queue)
        self.now = max(self.now, at)
        getattr(self, "_on_" + kind)(data)
        self.events_processed += 1
        if self.check_every_event:
            self.check_invariants()
        return True

    def _on_tick(self, data) -> None:
        node_id, inc = data
        n = self.nodes[node_id]
        if not n.up or n.incarnation != inc:
            return
        if n.scheduled_tick is not None and n.scheduled_tick <= self.now:
            n.scheduled_tick = None   # consumed even while paused: the resume schedules anew
        if n.paused_until is not None:
            return
        if n.raft.next_deadline() <= self.now:
            self._apply(n, n.raft.tick(self.now))
        else:
            self._schedule_tick(n)

    def _on_flush(self, data) -> None:
        node_id, inc = data
        n = self.nodes[node_id]
        if not n.up or n.incarnation != inc:
            return
        n.log.flush()
        n.flush_scheduled = False
        queued, n.flush_queue = n.flush_queue, []
        for out in queued:
            self._release(n, out)

    def _on_client(self, _) -> None:
        self.client_append(self.rng.choice((1, 1, 2, 5)))
        lo, hi = self.faults.client_every_ms
        self._push(self.now + self.rng.randint(lo, hi), "client", None)

    def _on_noop(self, _) -> None:
        return

    def run_for(self, duration_ms: int) -> None:
        end = self.now + duration_ms
        self._push(end, "noop", None)
        while self.queue and self.queue[0][0] <= end:
            self.step()
        self.now = max(self.now, end)

    def run_until(self, predicate, timeout_ms: int, what: str) -> int:
        """Run until `predicate()` holds; fail naming `what` after `timeout_ms` of simulated time."""
        start = self.now
        deadline = start + timeout_ms
        self._push(deadline, "noop", None)
        while not predicate():
            if not self.queue or self.queue[0][0] > deadline:
                self.fail(f"liveness: {what} not reached within {timeout_ms} ms")
            self.step()
        return self.now - start

    # --- clients and progress (scenario tests use them) ----------------------------------------

    def client_append(self, count: int = 1) -> tuple[int, int] | None:
        """Append through whichever node leads (if any is up and not paused)."""
        leader = self.leader()
        if leader is None:
            return None
        n = self.nodes[leader]
        values = []
        for _ in range(count):
            self.client_counter += 1
            values.append(f"s{self.seed}-r{self.client_counter}".encode())
        try:
            out = n.raft.append(values, self.now)
        except NotLeaderError:
            return None
        self._apply(n, out)
        return out.append_offsets

    def start_client_traffic(self) -> None:
        """Append through the leader every `faults.client_every_ms` from now on."""
        self._push(self.now + self.rng.randint(*self.faults.client_every_ms), "client", None)

    def leader(self) -> int | None:
        """The up, unpaused node that believes it leads in the highest epoch."""
        best = None
        for n in self.nodes.values():
            if n.up and n.paused_until is None and n.raft.is_leader:
                if best is None or n.raft.epoch > self.nodes[best].raft.epoch:
                    best = n.node_id
        return best

    def caught_up(self, node_ids=None) -> bool:
        """Every given node (default: every node) has applied everything the current leader
        has committed, and the leader has committed a record of its own epoch."""
        leader = self.leader()
        if leader is None:
            return False
        n = self.nodes[leader]
        hw = n.published_hw
        if hw <= n.raft.state.epoch_start_offset:
            return False       # nothing of the leader's own epoch committed yet
        ids = list(self.nodes) if node_ids is None else node_ids
        return all(self.nodes[i].up and self.nodes[i].applied >= hw for i in ids)

    def await_caught_up(self, bound_ms: int, node_ids=None, what: str = "every node catches up") -> int:
        """Liveness bound: `caught_up(node_ids)` within `bound_ms` of simulated time."""
        return self.run_until(lambda: self.caught_up(node_ids), bound_ms, what)

    # --- whole runs ----------------------------------------------------------------------------

    def run(self, events: int, liveness_timeout_ms: int = 60_000) -> "SimResult":
        """Fault phase of `events` events, then heal and demand progress."""
        if self.faults.enabled:
            self._push(self.rng.randint(*self.faults.fault_every_ms), "fault", None)
        self.start_client_traffic()
        while self.events_processed < events and self.step():
            pass
        fault_phase_ms = self.now
        self.heal_all()
        recovery_ms = self.await_progress(liveness_timeout_ms)
        self.check_final_agreement()
        return SimResult(self.seed, self.events_processed, fault_phase_ms, recovery_ms,
                         len(self.committed), dict(self.stats))

    def heal_all(self) -> None:
        """End every fault: no partitions, no loss, every node up and running."""
        self.queue = [e for e in self.queue if e[2] not in ("fault", "heal")]
        heapq.heapify(self.queue)
        self.blocked.clear()
        self.drop = 0.0
        self.duplicate = 0.0
        for n in self.nodes.values():
            if not n.up:
                self._start(n)
            elif n.paused_until is not None:
                n.paused_until = self.now
                self._on_resume((n.node_id, n.incarnation))

    def await_progress(self, timeout_ms: int) -> int:
        """Liveness: a leader commits a new record and every node learns it, in bounded time."""
        start = self.now
        target: list[int] = []

        def committed_new_record() -> bool:
            leader = self.leader()
            if leader is None:
                return False
            n = self.nodes[leader]
            if not target or n.log.end_offset() <= target[0] or n.log.epoch_at(target[0]) != target[1]:
                offsets = self.client_append(1)
                if offsets is None:
                    return False
                target[:] = [offsets[0], n.raft.epoch]
            return n.published_hw > target[0]

        self.run_until(committed_new_record, timeout_ms, "a leader commits a new record after healing")
        goal = target[0] + 1
        self.run_until(lambda: all(n.applied >= goal for n in self.nodes.values()),
                       timeout_ms, f"every node applies offset {target[0]}")
        return self.now - start


@dataclass
class SimResult:
    seed: int
    events: int
    fault_phase_ms: int
    recovery_ms: int
    committed: int
    stats: dict

    def summary(self) -> str:
        s = self.stats
        return (f"seed {self.seed}: {self.events} events, {self.fault_phase_ms / 1000:.1f} s simulated, "
                f"{self.committed} records committed, {s['elections']} elections, {s['crashes']} crashes, "
                f"{s['messages']} messages ({s['dropped']} dropped, {s['duplicated']} duplicated); "
                f"recovered in {self.recovery_ms} ms")
