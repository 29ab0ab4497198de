"""Faults a running node can be told to simulate, for demos and tests: networking paused,
cut off from chosen peers (inbound, outbound or both), a slow disk, a replication throttle, a
wall clock off by some milliseconds in what it publishes. The
transport, the server and the fetch path consult this object; `quorum fault` changes it through
the control socket."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

THROTTLE_MAX_WAIT_S = 0.25   # a throttled follower still fetches at least this often, as Kafka's does

DIRECTIONS = ("in", "out", "both")


@dataclass
class Faults:
    paused: bool = False                                   # no traffic in or out at all
    cut_in: set[int] = field(default_factory=set)          # drop what these peers send us
    cut_out: set[int] = field(default_factory=set)         # drop what we send them
    slow_disk_ms: int = 0                                  # added to every fsync
    throttle_records_per_s: float = 0                      # replication quota of a follower; 0: none
    clock_skew_ms: int = 0                                 # added to every time its published records carry
    _tokens: float = 0.0                                   # the quota's bucket (records)
    _refilled_at: float | None = None

    def drops_outbound(self, peer: int) -> bool:
        return self.paused or peer in self.cut_out

    def drops_inbound(self, peer: int | None) -> bool:
        return self.paused or (peer is not None and peer in self.cut_in)

    def cut(self, peers: list[int], direction: str) -> None:
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)}")
        if direction in ("in", "both"):
            self.cut_in.update(peers)
        if direction in ("out", "both"):
            self.cut_out.update(peers)

    def throttle(self, records_per_s: float) -> None:
        if records_per_s < 0:
            raise ValueError("throttle must be >= 0 records per second (0: no throttle)")
        self.throttle_records_per_s = records_per_s
        self._tokens, self._refilled_at = 0.0, None

    def take_records(self, offered: int, now_s: float) -> tuple[int, float]:
        """How many of the `offered` fetched records a throttled follower keeps, and how long it
        waits before handling the response. Like Kafka's follower replication quota: the follower
        keeps fetching (the leader sees it alive), but takes no more than its quota, so a leader
        that appends faster than the quota leaves it further behind at every fetch."""
        rate = self.throttle_records_per_s
        if rate <= 0:
            return offered, 0.0
        if self._refilled_at is not None:
            self._tokens = min(max(rate, 1.0), self._tokens + (now_s - self._refilled_at) * rate)
        self._refilled_at = now_s
        kept = min(offered, int(self._tokens))
        self._tokens -= kept
        if kept < offered:   # over quota (less than a record's worth left): wait for the next, bounded
            return kept, min(THROTTLE_MAX_WAIT_S, (1 - self._tokens) / rate)
        return kept, 0.0

    def clear(self) -> None:
        self.paused = False
        self.cut_in.clear()
        self.cut_out.clear()
        self.slow_disk_ms = 0
        self.clock_skew_ms = 0
        self.throttle(0)

    def describe(self) -> dict:
        return {"paused": self.paused, "cut_in": sorted(self.cut_in), "cut_out": sorted(self.cut_out),
                "slow_disk_ms": self.slow_disk_ms, "throttle_records_per_s": self.throttle_records_per_s,
                "clock_skew_ms": self.clock_skew_ms}

    def stamped(self, record):
        """`record` as a node whose wall clock is off by clock_skew_ms would publish it: every
        wall-clock time in it moved by the skew (a -1 'never' stays -1). Only what the node tells
        the monitor moves: its Raft timers keep the true clock, so the skew changes no election."""
        skew = self.clock_skew_ms
        if not skew:
            return record
        moved = {f.name: max(0, getattr(record, f.name) + skew) for f in dataclasses.fields(record)
                 if (f.name == "time_ms" or f.name.endswith("_timestamp_ms")) and getattr(record, f.name) >= 0}
        return dataclasses.replace(record, **moved)
