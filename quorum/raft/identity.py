"""Who a node is in its quorum: its id, the voters, and the cluster, topic and partition its
requests must name. Fixed for the node's life; every handler reads it."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class NodeIdentity:
    node_id: int
    voters: tuple[int, ...]    # sorted, without repeats
    is_voter: bool             # a voter that lost its disk may not vote: it only follows
    cluster_id: str
    topic: str
    partition: int

    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def other_voters(self) -> list[int]:
        return [v for v in self.voters if v != self.node_id]

    def our_partition(self, topics, name_attr: str = "topic_name"):
        """The partition of this quorum inside a batched request or response, or None."""
        for t in topics:
            if getattr(t, name_attr) == self.topic:
                for p in t.partitions:
                    if getattr(p, "partition_index", getattr(p, "partition", None)) == self.partition:
                        return p
        return None

    def cluster_ok(self, cluster_id: str | None) -> bool:
        # A request without a cluster id comes from a tool that does not know it; accept it.
        return cluster_id is None or cluster_id == self.cluster_id
