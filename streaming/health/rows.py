"""The output rows of one evaluation (schema.py): a replica's, the quorum's, and when a replica's
row is worth emitting again."""
from __future__ import annotations

from typing import Any

from . import statuses as S
from . import windows as W
from .config import HealthConfig
from .leadership import ViewNow
from .quorum_verdict import QuorumEvidence
from .state import QuorumState, ReplicaState


def replica_row(cfg: HealthConfig, s: QuorumState, rid: int, r: ReplicaState, now_ms: int,
                view: ViewNow | None) -> dict[str, Any]:
    leader_leo = s.leader_leo

    def quorum_time(stamp: int) -> int:
        if stamp < 0 or view is None:
            return -1
        return min(now_ms, view.q - (view.stamp - stamp))

    if rid == s.leader and r.status.status == S.CAUGHT_UP:
        lag_records, lag_ms, lf, lcu = 0, 0, now_ms, now_ms
    else:
        lf, lcu = quorum_time(r.last_fetch), quorum_time(r.last_caught_up)
        lag_records = max(0, leader_leo - r.leo) if leader_leo >= 0 and r.leo >= 0 else None
        lag_ms = max(0, view.stamp - r.last_caught_up) + max(0, now_ms - view.q) \
            if view is not None and r.last_caught_up >= 0 else None
    return {
        "kind": "replica", "replica_id": rid, "role": r.role, "now_ms": now_ms,
        "status": r.status.status, "reason": r.status.reason,
        "cause": r.status.cause if r.status.status != S.CAUGHT_UP else None,
        "log_end_offset": r.leo, "lag_records": lag_records, "lag_ms": lag_ms,
        "last_fetch_ms": lf, "last_fetch_age_ms": max(0, now_ms - lf) if lf >= 0 else None,
        "last_caught_up_ms": lcu,
        "caught_up_ratio": W.caught_up_ratio(r.windows, now_ms, cfg.caught_up_horizon_ms),
        "truncations_total": r.truncations, "truncated_records_total": r.truncated_records,
    }


def quorum_row(s: QuorumState, e: QuorumEvidence) -> dict[str, Any]:
    poll = e.poll
    return {
        "kind": "quorum", "now_ms": e.now_ms, "status": s.status.status, "reason": s.status.reason,
        "leader_id": e.leader if e.lead.alive else -1, "leader_epoch": e.epoch, "high_watermark": s.hw,
        "hw_age_ms": e.hw_age, "leader_log_end_offset": s.leader_leo, "voters": e.voters,
        "voters_caught_up": e.caught_up, "voters_reachable": e.reachable, "majority_reachable": e.majority,
        "fault_tolerance": e.fault_tolerance,
        "poll_error": poll.error if e.polls_failing else None,
        "poll_failures": poll.failures if poll is not None else None,
        "elections_total": s.elections, "epoch_changes_window": len(s.epoch_changes),
        "leader_changes_total": s.leader_changes, "leader_changes_window": e.leader_changes,
        "candidate_epoch": e.lead.candidate_epoch, "incarnation": s.incarnation,
        "voter_ids": ",".join(map(str, s.voter_set or [])), "voter_set_changes_total": s.voter_set_changes,
        "leaders_claimed": len(e.lead.claimants), "zombie_leaders": len(e.lead.zombies),
        "network_partition": bool(e.cut_off), "leader_side_voters": ",".join(map(str, e.leader_side)),
        "cut_off_voters": ",".join(map(str, e.cut_off))}


def signature(row: dict[str, Any]) -> list:
    """What a replica row shows, at the precision the outputs show it (seconds, per mille)."""
    ratio = row["caught_up_ratio"]
    return [row["status"], row["role"], "".join(c for c in row["reason"] if not c.isdigit()),
            row["lag_records"], None if row["lag_ms"] is None else row["lag_ms"] // 1000,
            None if row["last_fetch_age_ms"] is None else row["last_fetch_age_ms"] // 1000,
            None if ratio is None else round(ratio, 3), row["truncations_total"]]


def shows_change(previous: list | None, row: dict[str, Any]) -> bool:
    """Emit a replica row when anything it shows changed; its lag in records only when it moved
    by more than a tenth (a caught-up replica's lag flips between 0 and 1 at every append)."""
    if previous is None:
        return True
    now = signature(row)
    if now[:3] != previous[:3] or now[4:] != previous[4:]:
        return True
    before, after = previous[3], now[3]
    if (before is None) != (after is None):
        return True
    return before is not None and abs(after - before) > max(1, before // 10)


# What a quorum row shows that moves while nothing happens to the quorum: its clock and batch,
# and its log's offsets (they advance with every append). The rest changes only with news.
_QUORUM_ROW_CLOCKWORK = frozenset({"now_ms", "seq", "proc_ms", "last_input_proc_ms", "high_watermark",
                                   "leader_log_end_offset", "hw_age_ms"})


def quorum_signature(row: dict[str, Any], hw_stall_after_ms: int) -> list:
    """What a quorum row shows but its clockwork: its statuses, counts, leaders and voters, and
    its high watermark's age only once that is past `hw_stall_after_ms` (then in seconds), as the
    alert on it reads it."""
    age = row["hw_age_ms"]
    shown_age = None if age is None else -1 if age < hw_stall_after_ms else age // 1000
    return [shown_age, *(v for k, v in sorted(row.items()) if k not in _QUORUM_ROW_CLOCKWORK)]
