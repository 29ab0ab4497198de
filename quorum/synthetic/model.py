"""A synthetic quorum: N clusters of M voters + K observers, simulated on a synthetic clock.

It produces the records real nodes would publish (contract `fetch`, `metrics`, `state_change`)
without running Raft: the leader appends a NoOp when idle for `noop_interval_ms` (KIP-835) and
workload batches if asked; followers long-poll (a caught-up fetch waits up to 500 ms for new
data, a behind one is answered at once) so a healthy idle quorum shows about two fetches per
second per follower; the leader's high watermark follows the majority rule of the facts file.
Scripted faults (see faults.py) change that behaviour and leave a ground-truth timeline.

Deterministic for a seed: every random choice comes from one `random.Random(seed)`.
"""
from __future__ import annotations

import bisect
import heapq
import itertools
import random
import time
from typing import Callable, Iterator

from quorum import events
from quorum.raft.leader_state import ReplicaProgress
from quorum.synthetic.config import SyntheticConfig
from quorum.synthetic.faults import REPLICA_FAULTS, TimelineEntry

# what a leader publishes for a replica it has no valid fetch from this term (KIP-836's -1s)
_NO_PROGRESS = ReplicaProgress(-1)


class Node:
    __slots__ = ("id", "key", "role", "state", "epoch", "leader_id", "log_end", "epochs", "hw", "parked",
                 "epoch_start", "leader_gen", "fetch_gen", "pending_end", "disk_stalled", "progress")

    def __init__(self, node_id: int, role: str, key: bytes):
        self.id = node_id
        self.key = key  # the contract's Kafka key: the quorum's, shared by all its nodes
        self.role = role
        self.state = "follower" if role == "voter" else "observer"
        self.epoch = 0
        self.leader_id = -1
        self.log_end = 0
        self.epochs: list[tuple[int, int]] = []  # (epoch, start offset), the epoch cache
        self.hw = 0
        self.parked: dict[int, int] = {}         # as leader: long-polling fetcher -> poll id
        self.progress: dict[int, ReplicaProgress] = {}  # as leader: KIP-836 state per fetcher, this term
        self.epoch_start = 0
        self.leader_gen = 0                      # bumped per term led: stale NoOp timers die
        self.fetch_gen = 0                       # bumped per fetch loop started: one loop at a time
        self.pending_end = 0
        self.disk_stalled = False

    @property
    def last_epoch(self) -> int:
        return self.epochs[-1][0] if self.epochs else 0

    def end_of_epoch(self, epoch: int) -> int:
        """End offset of `epoch` in this log: where the next epoch starts, or the log end."""
        for i, (e, _start) in enumerate(self.epochs):
            if e > epoch:
                return self.epochs[i][1] if i else 0
        return self.log_end


class Cluster:
    """One quorum. Methods named `on_*` are the scheduled actions."""

    def __init__(self, world: "SyntheticQuorum", index: int):
        cfg = world.config
        self.world = world
        self.index = index
        self.id = f"{cfg.cluster_prefix}-{cfg.first_cluster + index}"
        self.key = events.quorum_key(self.id, cfg.topic, cfg.partition)
        self.voter_ids = list(range(1, cfg.voters + 1))
        self.nodes = {i: Node(i, "voter", self.key) for i in self.voter_ids}
        for j in range(cfg.observers):
            self.nodes[cfg.voters + 1 + j] = Node(cfg.voters + 1 + j, "observer", self.key)
        self.leader_id = -1
        self.stalled: set[int] = set()
        self.cut: set[int] = set()
        self.isolated: set[int] = set()
        self.claimants: set[int] = set()          # split brain: followers that claim leadership
        self.storm_until = -1
        self.fault_replicas: dict[int, int] = {}  # fault id -> replica it hit
        self._offsets: list[int] = []             # append times of the committed log, for KIP-835 lag
        self._times: list[int] = []
        where = {"cluster_id": self.id, "topic": cfg.topic, "partition": cfg.partition}
        self.fetch_encoders = {(role, outcome): events.make_encoder(events.Fetch, **where, replica_role=role,
                                                                    outcome=outcome)
                               for role in events.ROLES for outcome in ("valid", "diverging")}
        self.encode_metrics = events.make_encoder(events.Metrics, **where, voter_set=self.voter_ids,
                                                  dropped_events_total=0)
        self.encode_state_change = events.make_encoder(events.StateChange, **where)

    # --- helpers ---------------------------------------------------------------------------
    def schedule(self, t: int, action: Callable[[int, int, int], None], node: int = 0, gen: int = 0) -> None:
        heapq.heappush(self.world.heap, (t, next(self.world.seq), action, node, gen))

    def delay(self) -> int:
        return self.world.next_delay()

    def reachable(self, a: int, b: int) -> bool:
        return not ({a, b} & (self.cut | self.isolated))

    def append_time(self, offset: int) -> int:
        i = bisect.bisect_right(self._offsets, offset) - 1
        return self._times[i] if i >= 0 else -1

    def state_change(self, t: int, node: Node, to_state: str, reason: str) -> None:
        before = node.state
        node.state = to_state
        self.world.emit(node.key, self.encode_state_change(
            t, node.id, before, to_state, node.epoch, node.leader_id, reason), t)

    # --- boot --------------------------------------------------------------------------------
    def boot(self, t: int) -> None:
        rng, cfg = self.world.rng, self.world.config
        base = rng.randint(100, 10_000)
        epoch = rng.randint(1, 20)
        for node in self.nodes.values():
            node.epoch, node.log_end, node.hw = epoch, base, base
            node.epochs = [(epoch, 0)]
        self._offsets, self._times = [base - 1], [t - rng.randint(0, cfg.noop_interval_ms)]
        leader = self.nodes[self.voter_ids[0]]
        leader.state = "leader"
        self.become_leader(t, leader, append_leader_change=False)
        leader.epoch_start = 0
        for node in self.nodes.values():
            self.schedule(t + rng.randint(0, cfg.metrics_interval_ms), self.on_metrics, node.id)

    def become_leader(self, t: int, leader: Node, append_leader_change: bool = True) -> None:
        self.leader_id = leader.id
        leader.leader_id = leader.id
        leader.parked = {}
        leader.progress = {}
        leader.leader_gen += 1
        leader.disk_stalled = False
        if append_leader_change:
            leader.epochs.append((leader.epoch, leader.log_end))
            leader.epoch_start = leader.log_end
            self.append(t, leader, 1)  # the LeaderChangeMessage
        self.schedule(t + self.world.config.noop_interval_ms, self.on_noop, leader.id, leader.leader_gen)
        if self.world.config.append_interval_ms:
            self.schedule(t + self.world.config.append_interval_ms, self.on_workload, leader.id, leader.leader_gen)
        for node in self.nodes.values():
            if node is not leader and node.id not in self.isolated and node.id not in self.cut:
                node.epoch, node.leader_id = leader.epoch, leader.id
                self.start_fetching(t, node)

    def start_fetching(self, t: int, node: Node) -> None:
        node.fetch_gen += 1
        self.schedule(t + self.delay(), self.on_arrive, node.id, node.fetch_gen)

    # --- leader side ---------------------------------------------------------------------------
    def append(self, t: int, leader: Node, n: int) -> None:
        if leader.disk_stalled:
            return
        leader.log_end += n
        if leader.id == self.leader_id:
            self._offsets.append(leader.log_end - 1)
            self._times.append(t)
            if len(self._offsets) > 4096:  # keep what the slowest node may still ask for
                floor = min(n_.hw for n_ in self.nodes.values()) - 1
                cut = bisect.bisect_left(self._offsets, floor) - 1
                if cut > 0:
                    del self._offsets[:cut], self._times[:cut]
        for fetcher in list(leader.parked):
            node = self.nodes[fetcher]
            if self.reachable(leader.id, fetcher):
                self.respond(t + self.delay(), leader, node)
            else:  # the answer is lost: the fetcher's request times out and it tries again
                self.schedule(t + self.world.config.long_poll_ms, self.on_arrive, fetcher, node.fetch_gen)
        leader.parked.clear()
        self.update_hw(leader)

    def update_hw(self, leader: Node) -> None:
        # a voter that has not fetched in this term counts as at offset 0
        progress = leader.progress
        ends = sorted([leader.log_end] + [progress[v].end_offset if v in progress else 0
                                          for v in self.voter_ids if v != leader.id], reverse=True)
        candidate = ends[len(self.voter_ids) // 2]
        if candidate > leader.epoch_start and candidate > leader.hw:
            leader.hw = candidate

    def on_noop(self, t: int, node_id: int, gen: int) -> None:
        leader = self.nodes[node_id]
        if leader.state != "leader" or gen != leader.leader_gen:
            return
        self.append(t, leader, 1)
        self.schedule(t + self.world.config.noop_interval_ms, self.on_noop, node_id, gen)

    def on_workload(self, t: int, node_id: int, gen: int) -> None:
        leader = self.nodes[node_id]
        if leader.state != "leader" or gen != leader.leader_gen:
            return
        self.append(t, leader, self.world.config.append_batch)
        self.schedule(t + self.world.config.append_interval_ms, self.on_workload, node_id, gen)

    def on_arrive(self, t: int, node_id: int, gen: int) -> None:
        """A fetch from `node_id` reaches the leader it believes in (or is lost on the way)."""
        node = self.nodes[node_id]
        if gen != node.fetch_gen or node.leader_id < 0 or node.leader_id == node.id:
            return
        leader = self.nodes[node.leader_id]
        if not self.reachable(node.id, leader.id) or leader.state != "leader":
            self.schedule(t + self.world.config.long_poll_ms, self.on_arrive, node_id, gen)  # timed out: retry
            return
        end_of_epoch = leader.end_of_epoch(node.last_epoch)
        role = node.role
        if node.log_end > end_of_epoch:
            self.emit_fetch(t, leader, node, "diverging")
            truncated_to = end_of_epoch
            lost = node.log_end - truncated_to
            self.world.timeline.append(TimelineEntry("truncation", self.id, node.id, t, t, {
                "from_offset": node.log_end, "to_offset": truncated_to, "records_lost": lost}))
            node.log_end = truncated_to
            node.epochs = [(e, s) for e, s in node.epochs if s < truncated_to] or [(node.last_epoch, 0)]
            node.hw = min(node.hw, node.log_end)
            self.schedule(t + 2 * self.delay(), self.on_arrive, node_id, gen)
            return
        progress = leader.progress.get(node.id)
        if progress is None:
            progress = leader.progress[node.id] = ReplicaProgress(node.id)
        progress.on_valid_fetch(node.log_end, leader.log_end, t)
        if role == "voter":
            self.update_hw(leader)
        self.emit_fetch(t, leader, node, "valid")
        if node.log_end < leader.log_end:
            self.respond(t + self.delay(), leader, node)
        else:
            self.park(t, leader, node)

    def park(self, t: int, leader: Node, node: Node) -> None:
        """Hold a caught-up fetch until new data or the long-poll timeout. When a workload appends
        more often than the timeout and the leader's disk is fine, the timeout cannot win, so no
        timer is set (most heap events would otherwise be dead timers)."""
        poll_id = next(self.world.poll_ids)
        leader.parked[node.id] = poll_id
        cfg = self.world.config
        if leader.disk_stalled or not cfg.append_interval_ms or cfg.append_interval_ms >= cfg.long_poll_ms:
            self.schedule(t + cfg.long_poll_ms, self.on_poll_timeout, node.id, poll_id)

    def emit_fetch(self, t: int, leader: Node, node: Node, outcome: str) -> None:
        p = leader.progress.get(node.id) or _NO_PROGRESS
        self.world.emit(node.key, self.fetch_encoders[node.role, outcome](
            t, leader.id, leader.epoch, node.id, node.log_end, node.last_epoch, leader.log_end, leader.hw,
            p.end_offset, p.last_fetch_timestamp, p.last_caught_up_timestamp), t)

    def respond(self, t: int, leader: Node, node: Node) -> None:
        """The fetch response reaches `node` at `t`; it appends and sends its next fetch. (Applied
        now rather than at `t`: a few milliseconds early, one heap event less per fetch.)"""
        node.pending_end = leader.log_end
        self.on_response(t, node.id, node.fetch_gen)

    def on_poll_timeout(self, t: int, node_id: int, poll_id: int) -> None:
        node = self.nodes[node_id]
        leader = self.nodes.get(node.leader_id)
        if leader is not None and leader.parked.get(node_id) == poll_id:
            del leader.parked[node_id]
            self.respond(t + self.delay(), leader, node)

    # --- follower side ---------------------------------------------------------------------------
    def on_response(self, t: int, node_id: int, gen: int) -> None:
        node = self.nodes[node_id]
        if gen != node.fetch_gen or node.leader_id < 0:
            return  # answer to a fetch loop that was replaced (new leader)
        leader = self.nodes[node.leader_id]
        cfg = self.world.config
        if node_id in self.stalled:  # slow disk: the records never make it into its log in time
            self.schedule(t + cfg.stall_fetch_interval_ms, self.on_arrive, node_id, gen)
            return
        if node.pending_end > node.log_end:
            node.log_end = node.pending_end
            if len(node.epochs) != len(leader.epochs) or node.epochs[-1] != leader.epochs[-1]:
                node.epochs = [(e, s) for e, s in leader.epochs if s < node.log_end]
        node.hw = min(leader.hw, node.log_end)
        self.schedule(t + self.delay(), self.on_arrive, node_id, gen)

    # --- every node -----------------------------------------------------------------------------
    def on_metrics(self, t: int, node_id: int, _gen: int) -> None:
        node, cfg = self.nodes[node_id], self.world.config
        committed = node.hw - 1
        applied_ts = self.append_time(committed) if committed >= 0 else -1
        lag = max(0, t - applied_ts) if applied_ts >= 0 else -1
        state, leader_id = ("leader", node_id) if node_id in self.claimants else (node.state, node.leader_id)
        self.world.emit(node.key, self.encode_metrics(
            t, node_id, state, leader_id, node.epoch, node.log_end, node.hw, committed, applied_ts, committed,
            lag), t)
        self.schedule(t + cfg.metrics_interval_ms, self.on_metrics, node_id)

    # --- elections ------------------------------------------------------------------------------
    def elect(self, t: int, reason: str, exclude: int) -> Node | None:
        """Elect the most up-to-date voter that a majority can reach (pre-vote and vote granted)."""
        connected = [self.nodes[v] for v in self.voter_ids
                     if v != exclude and v not in self.cut and v not in self.isolated]
        if len(connected) <= len(self.voter_ids) // 2:
            return None  # no majority can be reached: the election fails and is retried
        winner = max(connected, key=lambda n: (n.log_end, -n.id))
        epoch = max(n.epoch for n in self.nodes.values()) + 1
        winner.epoch, winner.leader_id = epoch, -1
        self.state_change(t, winner, "candidate", reason)
        for voter in connected:
            if voter is not winner:
                voter.epoch, voter.leader_id = epoch, -1
                self.state_change(t + 1, voter, "voted", f"voted for {winner.id} in epoch {epoch}")
        winner.leader_id = winner.id
        self.state_change(t + 2, winner, "leader", f"won the election in epoch {epoch}")
        self.become_leader(t + 2, winner)
        for voter in connected:
            if voter is not winner:
                self.state_change(t + 3, voter, "follower", f"BeginQuorumEpoch from {winner.id}")
        self.announce_observers(t + 3, winner)
        self.world.timeline.append(TimelineEntry("election", self.id, winner.id, t + 2, t + 2,
                                                 {"epoch": epoch, "reason": reason}))
        return winner

    def announce_observers(self, t: int, leader: Node) -> None:
        for node in self.nodes.values():
            if node.role == "observer" and node.id not in self.cut:
                self.state_change(t, node, "observer", f"new leader {leader.id} in epoch {leader.epoch}")

    def on_elect(self, t: int, old_leader: int, _gen: int) -> None:
        if old_leader in self.isolated and self.leader_id == old_leader:
            if self.elect(t, "fetch timeout: leader unreachable", exclude=old_leader) is None:
                self.schedule(t + self.world.config.election_timeout_ms, self.on_elect, old_leader)

    def on_check_quorum(self, t: int, node_id: int, gen: int) -> None:
        node = self.nodes[node_id]
        if node.state == "leader" and node.leader_gen == gen and node_id in self.isolated:
            self.state_change(t, node, "resigned", "check quorum: no fetches from a majority for 1.5 x fetch timeout")
            self.world.timeline.append(TimelineEntry("resignation", self.id, node_id, t, t, {"epoch": node.epoch}))
            node.leader_id = -1
            self.schedule(t + self.world.config.election_timeout_ms, self.on_unattached, node_id)

    def on_unattached(self, t: int, node_id: int, _gen: int) -> None:
        node = self.nodes[node_id]
        if node.state in ("resigned", "follower"):
            node.leader_id = -1
            self.state_change(t, node, "unattached", "no leader reachable; pre-vote not granted")

    def on_storm(self, t: int, _node: int, _gen: int) -> None:
        if t >= self.storm_until:
            return
        old = self.nodes[self.leader_id]
        order = [v for v in self.voter_ids if v not in self.cut and v not in self.isolated]
        nxt = order[(order.index(old.id) + 1) % len(order)] if old.id in order else order[0]
        if nxt != old.id:
            # the leader resigns (EndQuorumEpoch) and the next voter wins the new epoch
            old.leader_gen += 1
            old.parked.clear()
            old.leader_id = -1
            self.state_change(t, old, "resigned", "EndQuorumEpoch (election storm)")
            winner = self.nodes[nxt]
            epoch = max(n.epoch for n in self.nodes.values()) + 1
            winner.epoch, winner.leader_id = epoch, -1
            self.state_change(t + 1, winner, "candidate", "election timeout (election storm)")
            winner.leader_id = winner.id
            self.state_change(t + 2, winner, "leader", f"won the election in epoch {epoch}")
            self.become_leader(t + 2, winner)
            self.state_change(t + 3, old, "follower", f"BeginQuorumEpoch from {winner.id}")
            self.announce_observers(t + 3, winner)
            self.world.timeline.append(TimelineEntry("election", self.id, winner.id, t + 2, t + 2,
                                                     {"epoch": epoch, "reason": "election storm"}))
        self.schedule(t + self.world.config.storm_period_ms, self.on_storm)

    # --- faults -----------------------------------------------------------------------------------
    def default_replica(self) -> int:
        followers = [v for v in self.voter_ids if v != self.leader_id]
        return followers[0] if followers else self.voter_ids[0]

    def on_fault_start(self, t: int, fault_id: int, _gen: int) -> None:
        fault = self.world.config.faults[fault_id]
        cfg = self.world.config
        replica = fault.replica if fault.replica is not None else (
            self.default_replica() if fault.kind in REPLICA_FAULTS else -1)
        if fault.kind == "leader_partition":
            replica = self.leader_id
        self.fault_replicas[fault_id] = replica
        entry = TimelineEntry(fault.kind, self.id, replica, t, t + fault.duration_ms, {"fault": fault_id})
        self.world.timeline.append(entry)
        node = self.nodes.get(replica)
        if fault.kind == "stall":
            self.stalled.add(replica)
        elif fault.kind == "cutoff":
            self.cut.add(replica)
            self.schedule(t + cfg.fetch_timeout_ms, self.on_cutoff_timeout, replica)
        elif fault.kind == "leader_partition":
            self.isolated.add(replica)
            jitter = self.world.rng.randint(0, cfg.election_timeout_ms // 4)
            self.schedule(t + cfg.fetch_timeout_ms + jitter, self.on_elect, replica)
            self.schedule(t + cfg.fetch_timeout_ms * 3 // 2, self.on_check_quorum, replica, node.leader_gen)
        elif fault.kind == "hw_stall":
            leader = self.nodes[self.leader_id]
            leader.disk_stalled = True
            for fetcher, poll_id in leader.parked.items():  # their long polls now run out
                self.schedule(t + cfg.long_poll_ms, self.on_poll_timeout, fetcher, poll_id)
            entry.replica_id = -1
            entry.detail["leader"] = self.leader_id
        elif fault.kind == "election_storm":
            self.storm_until = t + fault.duration_ms
            self.schedule(t, self.on_storm)
        elif fault.kind == "split_brain":
            self.claimants.add(replica)
            self.emit_claim(t, node, "follower", "leader", "claims leadership in the current epoch (injected fault)")
        self.schedule(t + fault.duration_ms, self.on_fault_end, fault_id)

    def on_cutoff_timeout(self, t: int, node_id: int, _gen: int) -> None:
        node = self.nodes[node_id]
        if node_id in self.cut and node.leader_id >= 0:
            node.leader_id = -1
            if node.role == "voter":
                self.state_change(t, node, "unattached", "fetch timeout; pre-vote not granted")
            else:
                self.state_change(t, node, "observer", "fetch timeout; leader unknown")

    def on_fault_end(self, t: int, fault_id: int, _gen: int) -> None:
        fault = self.world.config.faults[fault_id]
        replica = self.fault_replicas[fault_id]
        if fault.kind == "stall":
            self.stalled.discard(replica)
        elif fault.kind == "cutoff":
            self.cut.discard(replica)
            self.rejoin(t, self.nodes[replica])
        elif fault.kind == "leader_partition":
            self.isolated.discard(replica)
            if self.leader_id != replica:
                self.rejoin(t, self.nodes[replica])
        elif fault.kind == "hw_stall":
            for node in self.nodes.values():
                node.disk_stalled = False
        elif fault.kind == "split_brain":
            self.claimants.discard(replica)
            self.emit_claim(t, self.nodes[replica], "leader", "follower", "stopped claiming leadership")

    def emit_claim(self, t: int, node: Node, before: str, after: str, reason: str) -> None:
        """A split-brain claimant reports leadership while it keeps following the real leader."""
        leader_id = node.id if after == "leader" else node.leader_id
        self.world.emit(node.key, self.encode_state_change(
            t, node.id, before, after, node.epoch, leader_id, reason), t)

    def rejoin(self, t: int, node: Node) -> None:
        """A node that lost its leader learns the current one (BeginQuorumEpoch) and fetches again."""
        leader = self.nodes[self.leader_id]
        was_following = node.leader_id == leader.id and node.state in ("follower", "observer")
        node.epoch, node.leader_id = leader.epoch, leader.id
        if not was_following:
            self.state_change(t, node, "follower" if node.role == "voter" else "observer",
                              f"BeginQuorumEpoch from {leader.id}")
        self.start_fetching(t, node)


class SyntheticQuorum:
    """Generates the records of `config.clusters` quorums in synthetic-time order."""

    def __init__(self, config: SyntheticConfig):
        self.config = config
        self.rng = random.Random(config.seed)
        self.start_ms = config.start_ms if config.start_ms is not None else int(time.time() * 1000)
        self.now = self.start_ms
        self.timeline: list[TimelineEntry] = []
        self.heap: list[tuple] = []  # (time, sequence, bound action, node, generation)
        self.seq = itertools.count()
        self._out: list[tuple[bytes, bytes, int]] = []
        self.poll_ids = itertools.count(1)
        lo, hi = config.network_delay_ms
        self._delays = [self.rng.randint(lo, hi) for _ in range(4099)]  # a prime-length cycle, drawn once
        self._delay_index = 0
        self.clusters = [Cluster(self, i) for i in range(config.clusters)]
        for c in self.clusters:
            c.boot(self.start_ms)
        for i, f in enumerate(config.faults):
            self.schedule(self.start_ms + f.start_ms, self.clusters[f.cluster].on_fault_start, i)

    def schedule(self, t: int, action: Callable[[int, int, int], None], node: int = 0, gen: int = 0) -> None:
        heapq.heappush(self.heap, (t, next(self.seq), action, node, gen))

    def next_delay(self) -> int:
        self._delay_index = (self._delay_index + 1) % len(self._delays)
        return self._delays[self._delay_index]

    def emit(self, key: bytes, value: bytes, t: int) -> None:
        self._out.append((key, value, t))

    def events_until(self, end_ms: int) -> Iterator[tuple[bytes, bytes, int]]:
        """Yield (key, value, time_ms) for everything that happens before `end_ms` (absolute)."""
        heap, out, pop = self.heap, self._out, heapq.heappop
        while heap and heap[0][0] < end_ms:
            t, _, action, node, gen = pop(heap)
            self.now = t
            action(t, node, gen)
            if out:
                # actions may emit slightly ahead (a state change sequence); keep the timeline honest
                yield from out
                out.clear()
        self.now = max(self.now, end_ms)
