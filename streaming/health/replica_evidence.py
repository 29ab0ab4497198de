"""What a replica's own records and the leader's view say of it, folded into its state: its
directory, its log end and truncations, when it last wrote a record itself and how it
campaigns. The fetches themselves are folded by the tracker (tracker.py)."""
from __future__ import annotations

from typing import Callable

from .replica_verdicts import CAMPAIGNING, ReplicaJudge
from .state import QuorumState, ReplicaState

ZERO_DIRECTORY_ID = "AAAAAAAAAAAAAAAAAAAAAA"  # Kafka's zero UUID, base64url: directory id unknown


class ReplicaEvidence:
    def __init__(self, s: QuorumState, judge: ReplicaJudge, event: Callable[..., None]):
        self.s, self.judge, self.event = s, judge, event

    def own_record(self, r: ReplicaState, state: str, epoch: int, t: int, periodic: bool,
                   entering: bool = False) -> None:
        """A record the node wrote itself at `t`: it was alive then (a record that came late says
        so of its own moment, not of now: the caller takes how late off); campaigning counts an election attempt: a new
        epoch, or a state change into campaigning (a pre-vote round keeps the epoch). Only
        its periodic records (metrics) set the pace they are expected at: the state changes of
        a campaign come in bursts between them and would make a slightly late one look fatal."""
        if 0 <= r.own_ms < t and t - r.own_ms > self.judge.alive_within(r):
            r.back_ms, r.silent_ms = t, t - r.own_ms  # its records resume after a silence
        last = r.periodic_ms
        if periodic and last >= 0 and t > last:
            gap = t - last
            r.own_gap_ms = gap if r.own_gap_ms < 0 else (2 * r.own_gap_ms + gap) // 3
        if periodic:
            r.periodic_ms = max(last, t)
        r.own_ms = max(r.own_ms, t)
        if state in CAMPAIGNING and (epoch > r.campaign_epoch or entering):
            r.campaigns += 1
            r.campaign_epoch = epoch

    def get(self, rid: int, role: str) -> ReplicaState:
        reps = self.s.replicas
        r = reps.get(str(rid))
        if r is None:
            r = reps[str(rid)] = ReplicaState(role)
        elif self.s.voter_set is None:
            r.role = role
        return r

    def same_directory(self, rid: int, r: ReplicaState, directory: str | None, t: int) -> None:
        """A replica is (id, directory id): a new directory under the same id is a replaced disk."""
        if not directory or directory == ZERO_DIRECTORY_ID:
            return
        if r.dir is not None and r.dir != directory:
            self.event("replaced", replica_id=rid, now_ms=t, status=None,
                       reason=f"directory {r.dir} -> {directory}: a new replica under id {rid}")
            fresh = ReplicaState(r.role, status=r.status, windows=r.windows)
            for name in r.__slots__:
                setattr(r, name, getattr(fresh, name))
        r.dir = directory

    def own_log_end(self, rid: int, r: ReplicaState, leo: int, t: int) -> None:
        """A node's own log end offset going backwards is a truncation of its uncommitted tail."""
        if 0 <= leo < r.own_leo:
            self._truncated(rid, r, r.own_leo, leo, t)
        r.own_leo = leo

    def truncation_after_divergence(self, rid: int, r: ReplicaState, fetch_offset: int, t: int) -> None:
        """A valid fetch below the offset of the replica's diverging fetch: it truncated. A node
        usually truncates and catches up between two of its metrics records, so its own log end
        rarely shows going backwards; the leader's fetch records always do. Counted once: a
        decrease its metrics already showed is not counted again."""
        diverged, r.diverged_from = r.diverged_from, -1
        if 0 <= fetch_offset < diverged and (r.own_leo < 0 or r.own_leo > fetch_offset):
            self._truncated(rid, r, diverged, fetch_offset, t)
            r.own_leo = fetch_offset

    def _truncated(self, rid: int, r: ReplicaState, from_leo: int, to_leo: int, t: int) -> None:
        lost = from_leo - to_leo
        r.truncations += 1
        r.truncated_records += lost
        self.event("truncation", replica_id=rid, role=r.role, now_ms=t, records_lost=lost,
                   log_end_offset=to_leo, reason=f"log end offset {from_leo} -> {to_leo}")

