"""One simulated node: the Raft core (when up) over its in-memory disk, and what the
simulation keeps of it across restarts to check the invariants."""
from __future__ import annotations

from dataclasses import dataclass, field

from quorum.raft.log import MemoryLog
from quorum.raft.messages import Message
from quorum.raft.node import RaftNode
from quorum.raft.output import Output
from quorum.raft.quorum_state_store import MemoryQuorumStateStore


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
