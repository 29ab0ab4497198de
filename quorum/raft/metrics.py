"""Raft metrics (`raft-metrics`) and KIP-835's last applied / committed metrics.

The core measures what it can see; `poll-idle-ratio-avg` belongs to the node's I/O loop,
so the core reports -1 there and the node process overwrites it.
"""
from __future__ import annotations

from dataclasses import dataclass

WINDOW_MS = 30_000  # Kafka's default metrics sample window


class WindowedStat:
    """Count, sum and max over the current and the previous window."""
    __slots__ = ("_start", "_cur", "_prev")

    def __init__(self) -> None:
        self._start = 0
        self._cur = [0, 0.0, float("-inf")]
        self._prev = [0, 0.0, float("-inf")]

    def _roll(self, now: int) -> None:
        if now - self._start >= WINDOW_MS:
            if now - self._start >= 2 * WINDOW_MS:
                self._prev = [0, 0.0, float("-inf")]
            else:
                self._prev = self._cur
            self._cur = [0, 0.0, float("-inf")]
            self._start = now - (now - self._start) % WINDOW_MS

    def record(self, value: float, now: int) -> None:
        self._roll(now)
        c = self._cur
        c[0] += 1
        c[1] += value
        if value > c[2]:
            c[2] = value

    def avg(self, now: int) -> float:
        self._roll(now)
        n = self._cur[0] + self._prev[0]
        return (self._cur[1] + self._prev[1]) / n if n else float("nan")

    def max(self, now: int) -> float:
        self._roll(now)
        m = max(self._cur[2], self._prev[2])
        return m if m != float("-inf") else float("nan")

    def rate_per_s(self, now: int) -> float:
        """Sum of recorded values per second over the covered span."""
        self._roll(now)
        span = max(now - self._start, 1) + (WINDOW_MS if self._prev[0] else 0)
        return (self._cur[1] + self._prev[1]) * 1000.0 / span


@dataclass(frozen=True, slots=True)
class RaftMetrics:
    # raft-metrics
    current_state: str            # leader, candidate, prospective, voted, follower, unattached, observer, resigned
    current_leader: int
    current_vote: int
    current_epoch: int
    high_watermark: int
    log_end_offset: int
    log_end_epoch: int
    commit_latency_avg: float     # ms from a leader append to its commit (NaN: none yet)
    commit_latency_max: float
    election_latency_avg: float   # ms from starting an election to knowing the leader
    election_latency_max: float
    fetch_records_rate: float     # records per second this node fetched as a follower
    append_records_rate: float    # records per second this node appended as leader
    poll_idle_ratio_avg: float    # -1: measured by the node process
    number_unknown_voter_connections: int
    # KIP-835
    last_applied_record_offset: int     # last committed record handed to the application (-1 none)
    last_applied_record_timestamp: int  # its append time (-1 none)
    last_committed_record_offset: int   # high watermark - 1 (-1 none)
    last_applied_record_lag_ms: int     # now - last applied timestamp (-1 none)


class MetricsTracker:
    __slots__ = ("commit_latency", "election_latency", "fetch_records", "append_records")

    def __init__(self) -> None:
        self.commit_latency = WindowedStat()
        self.election_latency = WindowedStat()
        self.fetch_records = WindowedStat()
        self.append_records = WindowedStat()
