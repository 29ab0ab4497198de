"""What one call into the core returns: everything the caller must do, in this order.

1. If `flush_log`, call `log.flush()` (fsync). The quorum state in `quorum_state` has
   already been written through the store (writes are durable on return).
2. Send `messages`.
3. Apply `committed` records (in offset order) and report `observations` (a shell that
   publishes the event contract's records builds them from these: `quorum.contract_records`).
Anything the node must not lose (a vote, an acknowledged offset) only leaves the node
in step 2, after step 1: that is the whole crash-safety contract between core and caller.

One exception, as Kafka's leader does ("parked fetches can return sooner"): a Fetch
response may leave before the flush when its high watermark is already durable here
(`leaves_before_flush`). Handing a follower records it may append is not acknowledging
anything; only a high watermark above what this node has flushed would let a record count
as committed that a crash of this node could still lose.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from quorum.raft.log import LogRecord
from quorum.raft.messages import FetchResponse, Message
from quorum.raft.metrics import RaftMetrics
from quorum.raft.observations import Observation
from quorum.raft.quorum_state_store import ElectionState


@dataclass(slots=True)
class Output:
    messages: list[Message] = field(default_factory=list)
    appended: list[LogRecord] = field(default_factory=list)   # appended to the log, not yet flushed
    truncated_to: int | None = None                            # log truncated (durably) to this offset
    flush_log: bool = False                                    # flush the log before sending
    quorum_state: ElectionState | None = None                  # the state written in this step
    committed: list[LogRecord] = field(default_factory=list)   # newly committed, to apply in order
    observations: list[Observation] = field(default_factory=list)  # state transitions, fetches answered
    append_offsets: tuple[int, int] | None = None              # (first, last) offset of an `append`
    metrics: RaftMetrics | None = None                         # snapshot after this step, at most one
                                                               # per metrics_snapshot_interval_ms
    cannot_follow: str | None = None                           # why this node cannot follow its leader


def leaves_before_flush(message: Message, flushed_end_offset: int) -> bool:
    """Whether `message` may be sent before its step's log flush (see the module's note)."""
    body = message.body
    return isinstance(body, FetchResponse) and all(
        p.high_watermark <= flushed_end_offset for t in body.responses for p in t.partitions)
