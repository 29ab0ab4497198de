"""The event contract's records (`quorum.events`) of a node built from the Raft core: its
observations become `fetch` and `state_change` records, its metrics a `metrics` record.

The node process and the simulation both publish through here, so what the contract says of
a core node is decided in this one place: its state names, its bounds, and the outcomes a
fetch is recorded with.
"""
from __future__ import annotations

from typing import Iterable

from quorum import events
from quorum.raft.messages import NO_LEADER, Errors
from quorum.raft.node import RaftNode
from quorum.raft.observations import FetchObservation, Observation, StateTransition

# The contract's state names; pre-vote has none there, it is an election attempt.
_CONTRACT_STATE = {"prospective": "candidate"}

# A leader's fetch outcome by the error it answered. INVALID_REQUEST has no outcome in the
# contract: a malformed fetch names offsets outside the log, so it is recorded as out of range.
_LEADER_OUTCOME = {Errors.INVALID_REQUEST: "offset_out_of_range", Errors.FENCED_LEADER_EPOCH: "fenced",
                   Errors.UNKNOWN_LEADER_EPOCH: "unknown_leader_epoch",
                   Errors.INCONSISTENT_CLUSTER_ID: "inconsistent_cluster_id"}


def records(core: RaftNode, observations: Iterable[Observation]) -> list[events.Fetch | events.StateChange]:
    """The records of one `Output.observations`, in order."""
    return [fetch_record(core, o) if isinstance(o, FetchObservation) else state_change_record(core, o)
            for o in observations]


def fetch_outcome(o: FetchObservation) -> str:
    """A fetch record speaks for the leader (its leader_id is the node answering): a node that
    is not the leader records `not_leader`, whichever error Kafka's order of checks (cluster id,
    then epoch, then leadership) put on the wire. A follower's `fenced` would read as a second
    leader of its epoch."""
    if not o.leading:
        return "not_leader"
    if o.error == Errors.NONE:
        return "diverging" if o.diverging else "valid"
    return _LEADER_OUTCOME[o.error]


def fetch_record(core: RaftNode, o: FetchObservation) -> events.Fetch:
    return events.Fetch(
        cluster_id=core.cluster_id, topic=core.topic, partition=core.partition, time_ms=max(o.time_ms, 0),
        leader_id=core.node_id, leader_epoch=o.epoch, replica_id=o.replica_id,
        replica_role="voter" if o.replica_id in core.voters else "observer",
        fetch_offset=max(o.fetch_offset, 0), fetch_epoch=max(o.last_fetched_epoch, 0),
        leader_log_end_offset=o.log_end_offset, high_watermark=min(o.high_watermark, o.log_end_offset),
        outcome=fetch_outcome(o), replica_log_end_offset=o.replica_end_offset,
        last_fetch_timestamp_ms=o.replica_last_fetch_ms, last_caught_up_timestamp_ms=o.replica_last_caught_up_ms)


def state_change_record(core: RaftNode, o: StateTransition) -> events.StateChange:
    return events.StateChange(
        cluster_id=core.cluster_id, topic=core.topic, partition=core.partition, time_ms=max(o.time_ms, 0),
        node_id=core.node_id, from_state=_CONTRACT_STATE.get(o.from_state, o.from_state),
        to_state=_CONTRACT_STATE.get(o.to_state, o.to_state), epoch=o.epoch,
        leader_id=_contract_leader(o.to_state, o.leader_id), reason=o.reason)


def metrics_record(core: RaftNode, now: int, dropped_events_total: int = 0) -> events.Metrics:
    """The node's `metrics` record at `now`."""
    m = core.metrics(now)
    return events.Metrics(
        cluster_id=core.cluster_id, topic=core.topic, partition=core.partition, time_ms=now,
        node_id=core.node_id, state=_CONTRACT_STATE.get(m.current_state, m.current_state),
        leader_id=_contract_leader(m.current_state, m.current_leader), epoch=m.current_epoch,
        log_end_offset=m.log_end_offset, high_watermark=m.high_watermark,
        last_applied_offset=m.last_applied_record_offset,
        last_applied_timestamp_ms=m.last_applied_record_timestamp,
        last_committed_offset=m.last_committed_record_offset,
        last_applied_lag_ms=m.last_applied_record_lag_ms, voter_set=core.voters,
        dropped_events_total=dropped_events_total)


def _contract_leader(state: str, leader_id: int) -> int:
    # The records say -1 for a resigned node, which names itself elsewhere: the health job
    # reads a named leader as a hint of who leads, and a resigned node leads nothing.
    return NO_LEADER if state == "resigned" else leader_id
