"""Timeouts and limits of the core, with Kafka's defaults (`controller.quorum.*`)."""
from __future__ import annotations

from dataclasses import dataclass

DEFAULT_TOPIC = "__cluster_metadata"


@dataclass(frozen=True, slots=True)
class RaftConfig:
    election_timeout_ms: int = 1000        # controller.quorum.election.timeout.ms (+ random(0, this))
    fetch_timeout_ms: int = 2000           # controller.quorum.fetch.timeout.ms
    election_backoff_max_ms: int = 1000    # controller.quorum.election.backoff.max.ms
    request_timeout_ms: int = 2000         # controller.quorum.request.timeout.ms
    retry_backoff_ms: int = 20             # controller.quorum.retry.backoff.ms
    append_linger_ms: int = 25             # controller.quorum.append.linger.ms (batching is the caller's)
    max_idle_interval_ms: int = 500        # metadata.max.idle.interval.ms; 0 turns NoOps off
    fetch_max_wait_ms: int = 500           # long poll of a fetch with nothing new
    fetch_max_records: int = 4096          # records per fetch response
    observer_expiry_ms: int = 300_000      # the leader forgets an observer silent this long
    check_quorum_factor: float = 1.5       # leader resigns without majority fetches for this x fetch timeout
    pre_vote: bool = True                  # KIP-996
    metrics_snapshot_interval_ms: int = 100  # Output.metrics at most this often (None in between)

    @property
    def check_quorum_timeout_ms(self) -> int:
        return int(self.fetch_timeout_ms * self.check_quorum_factor)

    @property
    def begin_quorum_epoch_resend_ms(self) -> int:
        return self.fetch_timeout_ms // 2

    def __post_init__(self) -> None:
        for name in ("election_timeout_ms", "fetch_timeout_ms", "request_timeout_ms", "fetch_max_records"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive (got {getattr(self, name)})")
        for name in ("election_backoff_max_ms", "retry_backoff_ms", "max_idle_interval_ms",
                     "fetch_max_wait_ms", "append_linger_ms"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative (got {getattr(self, name)})")
