"""KIP-836's per-replica state replayed from a leader's `fetch` records, in order: what that
leader reports for each replica in DescribeQuorum, and what each of its fetch records carries."""
from __future__ import annotations

from collections import defaultdict

from quorum import events


class Kip836Replay:
    """One state per (cluster, leader, epoch, replica): a new term's leader starts afresh."""

    def __init__(self) -> None:
        # end offset, last fetch time, the leader's end offset at that fetch, last caught-up time
        self._states: dict[tuple, list[int]] = defaultdict(lambda: [-1, -1, -1, -1])

    def apply(self, f: events.Fetch) -> tuple[int, int, int]:
        """The replica's (end offset, last fetch time, last caught-up time) once the leader has
        handled `f`; only a valid fetch changes it."""
        s = self._states[f.cluster_id, f.leader_id, f.leader_epoch, f.replica_id]
        if f.outcome == "valid":
            if f.fetch_offset >= f.leader_log_end_offset:
                s[3] = max(s[3], f.time_ms)
            elif s[2] > 0 and f.fetch_offset >= s[2]:   # reached where the leader stood at its last fetch
                s[3] = max(s[3], s[1])
            s[0], s[1], s[2] = f.fetch_offset, max(s[1], f.time_ms), f.leader_log_end_offset
        return s[0], s[1], s[3]
