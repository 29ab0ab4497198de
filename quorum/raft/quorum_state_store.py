"""The quorum-state port: the small record a voter must never forget (epoch, leader, vote).

Contract for a durable implementation: `write` is atomic and durable when it returns
(write a temporary file, fsync it, rename it over the old one, fsync the directory), so a
crash leaves either the old or the new state, never a mix. The core writes before it
sends anything that depends on the new state (a granted vote, a candidacy, a leadership),
which is how "one vote per epoch" survives restarts.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from quorum.raft.messages import NO_LEADER


@dataclass(frozen=True, slots=True)
class ElectionState:
    epoch: int
    leader_id: int = NO_LEADER   # -1: unknown
    voted_id: int = -1           # -1: no vote cast in this epoch
    voters: tuple[int, ...] = ()


class QuorumStateStore(ABC):

    @abstractmethod
    def read(self) -> ElectionState | None:
        """The last written state, or None for a node that never wrote one."""

    @abstractmethod
    def write(self, state: ElectionState) -> None:
        """Replace the state atomically and durably before returning."""


class MemoryQuorumStateStore(QuorumStateStore):
    """In-memory store; every write is durable at once, as the contract requires."""

    def __init__(self, state: ElectionState | None = None) -> None:
        self._state = state
        self.writes = 0

    def read(self) -> ElectionState | None:
        return self._state

    def write(self, state: ElectionState) -> None:
        self._state = state
        self.writes += 1
