"""What one DescribeQuorum poll gave, whoever polled: the quorum state, or the error."""
from __future__ import annotations

from dataclasses import dataclass

from quorum.kafka_watch.quorum_info import QuorumInfo


@dataclass(frozen=True)
class PollOutcome:
    """What one DescribeQuorum poll gave: the quorum state, or the error."""
    latency_ms: int
    answered_by: int = -1
    info: QuorumInfo | None = None
    cluster_id: str | None = None
    error_code: int = -1
    error: str = ""
    leader_id: int = -1
    leader_epoch: int = -1
    detail: str = ""  # what the client said of a failure, for the log (never published)
