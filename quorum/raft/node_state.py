"""What a node knows and changes as it runs: its epoch state (epoch_states.py,
leader_state.py), its high watermark and how far it has handed out committed records. One
object that the transitions and every handler share, so that each sees the others' changes."""
from __future__ import annotations

from quorum.raft.epoch_states import EpochState
from quorum.raft.log import LogRecord


class NodeState:
    __slots__ = ("state", "high_watermark", "applied", "last_applied")

    def __init__(self, state: EpochState) -> None:
        self.state = state
        self.high_watermark = 0
        self.applied = 0                          # next offset to hand out as committed
        self.last_applied: LogRecord | None = None

    @property
    def known_leader(self) -> int:
        # A resigned node still names itself: it led this epoch, and nobody else can.
        return self.state.leader_id
