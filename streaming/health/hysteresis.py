"""Hysteresis: a worse status applies at once, a better one after `recovery_hold_ms`, so a
replica or a quorum on the edge does not flap. A status entered while the quorum was silent is
no evidence, so it clears at once."""
from __future__ import annotations

from typing import Callable

from . import statuses as S
from .state import Verdict


def settle(cur: Verdict | None, candidate: str, reason: str, now_ms: int, silent: bool, *, kind: str,
           hold_ms: int, cause: str | None, event: Callable[..., None], rid: int | None = None,
           role: str | None = None) -> Verdict:
    """The verdict held after `candidate` (of a "replica", `rid` in `role`, or the "quorum",
    `kind`) was seen at `now_ms`; `event` is told of a transition, and of a new cause under the
    same status."""
    if cur is None or (cur.initial and candidate in (S.CAUGHT_UP, S.HEALTHY)):
        # A first verdict, or a first good one after "no evidence yet": news to nobody.
        return Verdict(candidate, now_ms, reason, silent, initial=cur is None and candidate == S.UNKNOWN,
                       cause=cause)
    if candidate == cur.status:
        if cause != cur.cause and candidate not in (S.CAUGHT_UP, S.HEALTHY):
            # Same status, a better-told reason (unknown -> partitioned as evidence comes in; a
            # quorum degraded before and now because of a network partition).
            event("cause", replica_id=rid, role=role, now_ms=now_ms, status=candidate, cause=cause, previous_cause=cur.cause,
                  reason=reason)
        cur.reason, cur.pending_since, cur.cause = reason, -1, cause
        return cur
    if hold_ms > 0 and not cur.silent and S.is_improvement(kind, cur.status, candidate):
        if cur.pending_since < 0:
            cur.pending_since = now_ms
        if now_ms - cur.pending_since < hold_ms:
            return cur
    fields = {"replica_id": rid} if rid is None else {"replica_id": rid, "role": role, "cause": cause}
    event("transition", now_ms=now_ms, status=candidate, previous_status=cur.status, reason=reason, **fields)
    return Verdict(candidate, now_ms, reason, silent, cause=cause)
