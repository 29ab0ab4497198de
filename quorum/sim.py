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
"""
from __future__ import annotations

import argparse
import heapq
import random
import sys
import time
from dataclasses import dataclass, field

from quorum import events as contract
from quorum.contract_records import records
from quorum.raft.config import RaftConfig
from quorum.raft.log import MemoryLog
from quorum.raft.messages import Message
from quorum.raft.errors import NotLeaderError
from quorum.raft.node import RaftNode
from quorum.raft.observations import StateTransition
from quorum.raft.output import Output, leaves_before_flush
from quorum.raft.quorum_state_store import MemoryQuorumStateStore


class Violation(AssertionError):
    """An invariant broke; the message names the seed and how to replay it."""


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


@dataclass
class SimNode:
    node_id: int
    is_voter: bool
    log: MemoryLog = field(default_factory=MemoryLog)
    store: MemoryQuorumStateStore = field(default_factory=MemoryQuorumStateStore)
    raft: RaftNode | None = None
    incarnation: int = 0
    may_vote: bool = True
    paused_until: int | None = None
    buffered: list[Message] = field(default_factory=list)
    flush_queue: list[Output] = field(default_factory=list)
    flush_scheduled: bool = False
    published_hw: int = 0          # the high watermark as far as it has left the node
    applied: int = 0               # committed records handed out in this incarnation
    max_hw_seen: int = 0
    max_epoch_seen: int = 0        # in memory, across restarts (reset on disk loss)
    max_stored_epoch: int = 0
    scheduled_tick: int | None = None

    @property
    def up(self) -> bool:
        return self.raft is not None


class Simulation:
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

    # ------------------------------------------------------------------ plumbing

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

    def _record_committed(self, n: SimNode, records) -> None:
        for r in records:
            if r.offset != n.applied:
                self.fail(f"node {n.node_id} committed offset {r.offset}, expected {n.applied}")
            n.applied += 1
            entry = (r.epoch, r.value, r.kind)
            if r.offset < len(self.committed):
                if self.committed[r.offset] != entry:
                    self.fail(f"node {n.node_id} committed {entry} at offset {r.offset}, "
                              f"others committed {self.committed[r.offset]}")
            elif r.offset == len(self.committed):
                self.committed.append(entry)
            else:
                self.fail(f"committed offset {r.offset} leaves a gap after {len(self.committed)}")

    def _send(self, m: Message) -> None:
        self.stats["messages"] += 1
        if (m.source, m.destination) in self.blocked or m.destination not in self.nodes:
            self.stats["dropped"] += 1
            return
        if self.drop and self.rng.random() < self.drop:
            self.stats["dropped"] += 1
            return
        self._push(self.now + self.rng.randint(1, self.faults.max_delay_ms), "deliver", m)
        if self.duplicate and self.rng.random() < self.duplicate:
            self.stats["duplicated"] += 1
            self._push(self.now + self.rng.randint(1, 3 * self.faults.max_delay_ms), "deliver", m)

    # ------------------------------------------------------------------ event loop

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

    def _on_deliver(self, m: Message) -> None:
        n = self.nodes[m.destination]
        if not n.up or (m.source, m.destination) in self.blocked:
            return
        if n.paused_until is not None:
            n.buffered.append(m)
            return
        self._apply(n, n.raft.handle(m, self.now))

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

    def _on_restart(self, node_id: int) -> None:
        n = self.nodes[node_id]
        if not n.up:
            self._start(n)

    def _on_heal(self, pairs) -> None:
        self.blocked.difference_update(pairs)

    def _on_client(self, _) -> None:
        self.client_append(self.rng.choice((1, 1, 2, 5)))
        lo, hi = self.faults.client_every_ms
        self._push(self.now + self.rng.randint(lo, hi), "client", None)

    def _on_fault(self, _) -> None:
        self.inject_random_fault()
        lo, hi = self.faults.fault_every_ms
        self._push(self.now + self.rng.randint(lo, hi), "fault", None)

    def _on_graceful_stop(self, node_id: int) -> None:
        self._crash(self.nodes[node_id])

    # ------------------------------------------------------------------ actions (scenario tests use them)

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

    def crash(self, node_id: int, restart_after_ms: int | None = None) -> None:
        self._crash(self.nodes[node_id])
        if restart_after_ms is not None:
            self._push(self.now + restart_after_ms, "restart", node_id)

    def restart(self, node_id: int) -> None:
        self._on_restart(node_id)

    def graceful_shutdown(self, node_id: int, restart_after_ms: int | None = None) -> None:
        n = self.nodes[node_id]
        if not n.up:
            return
        self._apply(n, n.raft.resign(self.now))
        self._push(self.now + 30, "graceful_stop", node_id)
        if restart_after_ms is not None:
            self._push(self.now + 30 + restart_after_ms, "restart", node_id)

    def resign(self, node_id: int) -> None:
        """The leader resigns but keeps running (Kafka's `resign(epoch)`), unlike a graceful
        shutdown: it can resend EndQuorumEpoch while resigned."""
        n = self.nodes[node_id]
        if n.up:
            self._apply(n, n.raft.resign(self.now))

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

    def _holders(self, end: int, exclude: int | None = None, reference: MemoryLog | None = None) -> int:
        """Voters whose durable log holds offset end-1 with the epoch the reference has there."""
        if end <= 0:
            return len(self.voter_ids)
        if reference is None:
            if end > len(self.committed):
                return 0
            epoch = self.committed[end - 1][0]
        else:
            if reference.end_offset() < end:
                return 0
            epoch = reference.epoch_at(end - 1)
        count = 0
        for v in self.voter_ids:
            if v == exclude:
                continue
            log = self.nodes[v].log
            if log.flushed_end_offset() >= end and log.epoch_at(end - 1) == epoch:
                count += 1
        return count

    def partition(self, *groups) -> list[tuple[int, int]]:
        """Block all traffic between the given groups (nodes not named form one more group)."""
        named = {i for g in groups for i in g}
        rest = [i for i in self.nodes if i not in named]
        groups = [set(g) for g in groups] + ([set(rest)] if rest else [])
        pairs = [(a, b) for g in groups for h in groups if g is not h for a in g for b in h]
        self.blocked.update(pairs)
        return pairs

    def block(self, pairs) -> list[tuple[int, int]]:
        pairs = list(pairs)
        self.blocked.update(pairs)
        return pairs

    def isolate(self, node_id: int) -> list[tuple[int, int]]:
        return self.block([(node_id, o) for o in self.nodes if o != node_id]
                          + [(o, node_id) for o in self.nodes if o != node_id])

    def heal(self, pairs=None) -> None:
        if pairs is None:
            self.blocked.clear()
        else:
            self.blocked.difference_update(pairs)

    def pause(self, node_id: int, duration_ms: int) -> None:
        n = self.nodes[node_id]
        if n.up and n.paused_until is None:
            n.paused_until = self.now + duration_ms
            self._push(n.paused_until, "resume", (node_id, n.incarnation))

    def kill_all(self, restart_after_ms: int | None = None) -> None:
        for i in self.nodes:
            self.crash(i, restart_after_ms)

    def run_for(self, duration_ms: int) -> None:
        end = self.now + duration_ms
        self._push(end, "noop", None)
        while self.queue and self.queue[0][0] <= end:
            self.step()
        self.now = max(self.now, end)

    def _on_noop(self, _) -> None:
        return

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

    # ------------------------------------------------------------------ random faults

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

    # ------------------------------------------------------------------ invariants

    def check_invariants(self) -> None:
        leaders = self.epoch_leaders
        for n in self.nodes.values():
            stored = n.store.read()
            if stored is not None:
                if stored.epoch < n.max_stored_epoch:
                    self.fail(f"node {n.node_id} stored epoch went back {n.max_stored_epoch} -> {stored.epoch}")
                n.max_stored_epoch = stored.epoch
                if stored.leader_id >= 0:
                    known = leaders.setdefault(stored.epoch, stored.leader_id)
                    if known != stored.leader_id:
                        self.fail(f"two leaders in epoch {stored.epoch}: {known} and {stored.leader_id}")
            raft = n.raft
            if raft is None:
                continue
            epoch = raft.state.epoch
            if epoch < n.max_epoch_seen:
                self.fail(f"node {n.node_id} epoch went back {n.max_epoch_seen} -> {epoch}")
            n.max_epoch_seen = epoch
            hw = raft.high_watermark
            if hw < n.max_hw_seen:
                self.fail(f"node {n.node_id} high watermark went back {n.max_hw_seen} -> {hw}")
            n.max_hw_seen = hw
            if raft.is_leader:
                known = leaders.setdefault(epoch, n.node_id)
                if known != n.node_id:
                    self.fail(f"two leaders in epoch {epoch}: {known} and {n.node_id}")
                if n.published_hw > 0:
                    held = self._holders(n.published_hw, reference=n.log)
                    if held < len(self.voter_ids) // 2 + 1:
                        self.fail(f"leader {n.node_id} high watermark {n.published_hw} held by only "
                                  f"{held} of {len(self.voter_ids)} voters")

    def check_final_agreement(self) -> None:
        """Every up node's log matches the committed records up to its high watermark, and the
        leader still holds every record ever committed."""
        for n in self.nodes.values():
            if not n.up:
                continue
            recs = n.log.read(0, n.raft.high_watermark)
            for r in recs:
                if r.offset < len(self.committed) and (r.epoch, r.value, r.kind) != self.committed[r.offset]:
                    self.fail(f"node {n.node_id} holds {r} where {self.committed[r.offset]} was committed")
        leader = self.leader()
        if leader is not None:
            log = self.nodes[leader].log
            if log.end_offset() < len(self.committed):
                self.fail(f"leader {leader} lost committed records: log ends at {log.end_offset()}, "
                          f"{len(self.committed)} committed")
            for r in log.read(0, len(self.committed)):
                if (r.epoch, r.value, r.kind) != self.committed[r.offset]:
                    self.fail(f"leader {leader} holds {r} where {self.committed[r.offset]} was committed")

    # ------------------------------------------------------------------ whole runs

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


def replay_command(seed: int, voters: int, observers: int, events: int) -> str:
    return f"python -m quorum.sim --seed {seed} --voters {voters} --observers {observers} --events {events}"


def run_seed(seed: int, voters: int, observers: int, events: int, validate_events: bool = False) -> SimResult:
    """One full run; a violation's message ends with the command that replays it."""
    try:
        return Simulation(seed, voters, observers, validate_events=validate_events).run(events)
    except Violation as e:
        raise Violation(f"{e}\n  replay: {replay_command(seed, voters, observers, events)}") from None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m quorum.sim",
        description="Run the Raft core in a seeded discrete-event simulation with network and node "
                    "faults, checking the safety invariants after every event and liveness after "
                    "healing. The same arguments always replay the same run.",
        epilog="Checked after every event: at most one leader per epoch, epochs never decrease "
               "(stored and in memory), high watermarks never decrease, a majority of voters holds "
               "every offset below a leader's high watermark, committed records are the same on every "
               "node. Exit status 1 when a seed breaks one; its line names the seed and the command "
               "that replays it. Long soak: python -m quorum.sim --mixed --seeds 10000 (or "
               "QUORUM_SIM_SOAK_SEEDS=10000 pytest tests/raft/test_simulation.py -k soak -s).")
    p.add_argument("--seed", type=int, default=0, help="random seed of the run (default 0)")
    p.add_argument("--voters", type=int, default=3, help="number of voters, 1-5 are tested (default 3)")
    p.add_argument("--observers", type=int, default=0, help="number of observers (default 0)")
    p.add_argument("--events", type=int, default=3000, help="events in the fault phase (default 3000)")
    p.add_argument("--seeds", type=int, default=1,
                   help="run this many consecutive seeds starting at --seed (default 1)")
    p.add_argument("--mixed", action="store_true",
                   help="vary the shape with the seed: 1-5 voters and 0-3 observers (ignores --voters "
                        "and --observers), as the test suite and the soak do")
    p.add_argument("--no-faults", action="store_true", help="no faults at all: a healthy quorum")
    p.add_argument("--trace", action="store_true", help="print the faults injected")
    args = p.parse_args(argv)
    if args.voters < 1 or args.observers < 0 or args.events < 0 or args.seeds < 1:
        p.error("--voters must be >= 1, --observers and --events >= 0, --seeds >= 1")
    failures = 0
    started = time.process_time()
    for i, seed in enumerate(range(args.seed, args.seed + args.seeds)):
        voters, observers = (1 + i % 5, (i // 5) % 4) if args.mixed else (args.voters, args.observers)
        sim = Simulation(seed, voters, observers, Faults.none() if args.no_faults else None)
        if args.trace:
            sim.trace = []
        try:
            result = sim.run(args.events)
            print(result.summary())
        except Violation as e:
            failures += 1
            print(f"FAILED {e}\n  replay: {replay_command(seed, voters, observers, args.events)}",
                  file=sys.stderr)
        if sim.trace:
            print("\n".join(sim.trace))
    if args.seeds > 1:
        print(f"{args.seeds - failures}/{args.seeds} seeds passed in {time.process_time() - started:.1f} CPU s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
