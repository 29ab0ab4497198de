"""The safety invariants, as part of `Simulation` (cluster.py), checked after every event:
at most one leader per epoch, epochs and high watermarks never go back (stored and in
memory), a majority of voters holds every offset below a leader's high watermark, and every
node commits the same records; at the end every node agrees with what was committed."""
from __future__ import annotations

from quorum.raft.log import MemoryLog
from quorum.sim.sim_node import SimNode


class Invariants:
    """Simulation's checks, mixed into it: `self` is the simulation; `fail` raises Violation."""

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
