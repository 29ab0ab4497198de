"""What the core reports having seen, in its own terms, besides what the caller must do.

The core knows nothing of the event contract (`quorum.events`): a shell that publishes
records turns these into them (`quorum.contract_records`), deciding there how the contract
names and bounds each fact. Times are the `now` the core was given.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union


@dataclass(frozen=True, slots=True)
class StateTransition:
    """The node changed state, epoch or leader. States are raft-metrics' `current-state`
    names (prospective, voted and observer included); a resigned node names itself as the
    leader of its epoch, as its answers do."""
    time_ms: int
    from_state: str
    to_state: str
    epoch: int       # after the transition
    leader_id: int   # after the transition (-1 unknown)
    reason: str


@dataclass(frozen=True, slots=True)
class FetchObservation:
    """A replica's Fetch as this node answered it, leader or not."""
    time_ms: int
    epoch: int                 # this node's epoch
    leading: bool              # whether this node led that epoch
    replica_id: int
    fetch_offset: int          # as requested (may be malformed: negative)
    last_fetched_epoch: int    # as requested (may be malformed: negative)
    log_end_offset: int        # this node's, when the fetch arrived
    high_watermark: int        # this node's, once it handled the fetch
    error: int                 # the `Errors` code answered (INCONSISTENT_CLUSTER_ID at the top level)
    diverging: bool = False    # answered with a DivergingEpoch
    # the leader's KIP-836 view of the replica once it handled the fetch (-1 unknown)
    replica_end_offset: int = -1
    replica_last_fetch_ms: int = -1
    replica_last_caught_up_ms: int = -1


Observation = Union[StateTransition, FetchObservation]
