"""The messages a node sends: requests, tracked until answered or timed out, and responses.
Each request remembers the state that sent it, since answers to an older state are stale."""
from __future__ import annotations

from dataclasses import dataclass, field

from quorum.raft.config import RaftConfig
from quorum.raft.epoch_states import EpochState
from quorum.raft.messages import Message
from quorum.raft.node_state import NodeState
from quorum.raft.step import Step


class PendingRequest:
    __slots__ = ("kind", "destination", "deadline", "state")

    def __init__(self, kind: str, destination: int, deadline: int, state: EpochState) -> None:
        self.kind = kind
        self.destination = destination
        self.deadline = deadline
        self.state = state


@dataclass(eq=False)
class Outbox:
    node_id: int
    config: RaftConfig
    node: NodeState                      # a request remembers the state that sent it
    step: Step
    next_correlation_id: int
    pending: dict[int, PendingRequest] = field(default_factory=dict, init=False)

    def ask(self, destination: int, body, kind: str) -> int:
        """Send a request of `kind` for the current state; its answer is awaited until the
        request timeout."""
        correlation_id = self.next_correlation_id
        self.next_correlation_id += 1
        self.pending[correlation_id] = PendingRequest(
            kind, destination, self.step.now + self.config.request_timeout_ms, self.node.state)
        self.step.out.messages.append(Message(self.node_id, destination, correlation_id, body))
        return correlation_id

    def answer(self, request: Message, body) -> None:
        self.step.out.messages.append(Message(self.node_id, request.source, request.correlation_id, body))

    def take(self, response: Message, kinds: tuple[str, ...]) -> PendingRequest | None:
        """The request `response` answers, no longer awaited; None when it answers none of ours."""
        p = self.pending.get(response.correlation_id)
        if p is None or p.kind not in kinds or p.destination != response.source:
            return None
        del self.pending[response.correlation_id]
        return p

    def expire(self) -> None:
        now = self.step.now
        expired = [c for c, p in self.pending.items() if p.deadline <= now]
        for c in expired:
            del self.pending[c]
            self.node.state.request_expired(c, now)

    def destinations(self, kind: str) -> set[int]:
        """Where requests of `kind` are in flight."""
        return {p.destination for p in self.pending.values() if p.kind == kind}

    def earliest_deadline(self, deadline: int | None) -> int | None:
        for p in self.pending.values():
            if deadline is None or p.deadline < deadline:
                deadline = p.deadline
        return deadline

    def forget_all(self) -> None:
        self.pending.clear()
