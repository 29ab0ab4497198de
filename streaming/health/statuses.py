"""The statuses a replica and a quorum can be in, ordered from best to worst.

The order is what hysteresis uses: moving to a worse status happens as soon as its threshold
is crossed (the thresholds already carry a duration), moving to a better one only after the
better status has held for `recovery_hold_ms`, so a replica on the edge does not flap.
"""
from __future__ import annotations

# Replica statuses. `unknown` sits outside the order: it means "no evidence" (never fetched
# from the current leader, or the quorum's leader is not heard from), not "worse than stalled".
CAUGHT_UP = "caught_up"          # caught up (KIP-836) within lagging_after_ms
LAGGING = "lagging"              # fetching, not caught up within lagging_after_ms
STALLED = "stalled"              # fetching, not caught up for longer than stall_after_ms
UNREACHABLE = "unreachable"      # no valid fetch for unreachable_after_ms while the leader is alive
UNKNOWN = "unknown"              # no evidence either way
REPLICA_STATUSES = (CAUGHT_UP, LAGGING, STALLED, UNREACHABLE, UNKNOWN)

# Quorum statuses, listed in the order they are checked: the first that applies wins.
SPLIT_BRAIN = "split_brain"      # two nodes claim leadership of the same epoch
UNOBSERVED = "unobserved"        # the collector reaches no node and no node's own view arrives: no evidence
LEADERLESS = "leaderless"        # no node is heard acting as leader of the current epoch
NO_MAJORITY = "no_majority"      # fewer than a majority of voters reachable
STALLED_QUORUM = "stalled"       # high watermark not advanced for hw_stall_after_ms
DEGRADED = "degraded"            # a voter lagging, stalled or unreachable, a zombie leader, or an election storm
HEALTHY = "healthy"
QUORUM_STATUSES = (HEALTHY, DEGRADED, NO_MAJORITY, LEADERLESS, STALLED_QUORUM, SPLIT_BRAIN, UNOBSERVED)

_REPLICA_RANK = {CAUGHT_UP: 0, LAGGING: 1, STALLED: 2, UNREACHABLE: 3}
# `unobserved` sits outside the quorum's order as `unknown` does in a replica's: no evidence.
_QUORUM_RANK = {HEALTHY: 0, DEGRADED: 1, STALLED_QUORUM: 2, NO_MAJORITY: 3, LEADERLESS: 4, SPLIT_BRAIN: 5}


def is_improvement(kind: str, old: str, new: str) -> bool:
    """True when `new` is better than `old` (only then does hysteresis delay the change)."""
    rank = _REPLICA_RANK if kind == "replica" else _QUORUM_RANK
    if old not in rank or new not in rank:
        return False  # to or from unknown: no evidence to hold on to
    return rank[new] < rank[old]

# Why a replica is not caught up (`cause`), from the evidence the job has; see replica_verdicts.py.
PARTITIONED = "partitioned"      # alive (its own records arrive) but its fetches do not reach the leader
DOWN = "down"                    # nothing from the node at all, or its records stopped with its fetches
REJECTED = "rejected"            # its fetches reach the leader and are refused (the error is named)
SLOW = "slow"                    # fetches arrive, but seconds apart
BEHIND = "behind"                # fetching often, never reaching the leader's log end
# The cause column says "unknown" too when the evidence does not decide: the same word as the
# UNKNOWN status, a different column.
UNKNOWN_CAUSE = "unknown"        # the evidence does not decide
CAUSES = (PARTITIONED, DOWN, REJECTED, SLOW, BEHIND, UNKNOWN_CAUSE)
