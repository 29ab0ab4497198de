"""The simulated network, as part of `Simulation` (cluster.py): each message is delivered
after a random delay (different delays reorder them), or dropped or duplicated at the rates
of the moment, or dropped because a partition cuts its way (both ways or one way)."""
from __future__ import annotations

from quorum.raft.messages import Message


class Network:
    """Simulation's message delivery and partitions, mixed into it: `self` is the simulation."""

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

    def _on_deliver(self, m: Message) -> None:
        n = self.nodes[m.destination]
        if not n.up or (m.source, m.destination) in self.blocked:
            return
        if n.paused_until is not None:
            n.buffered.append(m)
            return
        self._apply(n, n.raft.handle(m, self.now))

    # --- partitions ----------------------------------------------------------------------------

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

    def _on_heal(self, pairs) -> None:
        self.blocked.difference_update(pairs)
