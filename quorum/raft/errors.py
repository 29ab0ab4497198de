"""What the core raises: a call it cannot serve (NotLeaderError), or a step that would break
Raft's guarantees (SafetyError)."""
from __future__ import annotations


class NotLeaderError(Exception):
    """`append` on a node that is not the leader; says who is, when known."""

    def __init__(self, leader_id: int, epoch: int) -> None:
        self.leader_id = leader_id
        self.epoch = epoch
        super().__init__(f"not the leader (leader {leader_id}, epoch {epoch})")


class SafetyError(RuntimeError):
    """The core was asked to do something that would break Raft's guarantees (for example
    truncate below the high watermark). Raised rather than done: stop the node."""
