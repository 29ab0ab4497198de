"""The health state of one quorum, as types: what `QuorumTracker` keeps between micro-batches.

Every field is named once, here: a misspelt one fails where it is written (slotted classes take
no other attribute). The state store keeps a quorum as one JSON value (processor.py, buckets.py):
`encode` writes it, field names as keys, the small fixed-size records (a node's report, a
refusal, a lag sample) as arrays; `decode` reads it back. The clock (clocks.py) and the caught-up
windows (windows.py) stay the plain values their own modules keep.

Versions (the checkpoint's layout file records the one its state was written in, see
streaming/state_layout.py):
- 1: written before these types, as dicts with the same keys; fields added since are missing from
  a quorum saved before them, and take their defaults; keys no longer kept are dropped.
- 2: these types. Every field is present, and a key no field names is an error, said as such.
A quorum read in version 1 is written back in version 2's shape, which version 1's reader reads.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

from . import clocks as C
from . import windows as W

STATE_VERSION = 2  # what this code writes
VERSION_BEFORE_TYPES = 1  # a checkpoint whose layout file names no version


class StateError(ValueError):
    """A stored quorum this code cannot read."""


@dataclass(slots=True)
class Verdict:
    """A status as held by hysteresis (tracker's `settle`): a replica's or the quorum's."""
    status: str
    since: int
    reason: str
    silent: bool  # entered while the quorum was silent: no evidence, so it clears at once
    pending_since: int = -1  # when a better status was first seen (it applies after recovery_hold_ms)
    initial: bool = False  # the first verdict, `unknown`: its first good successor is news to nobody
    cause: str | None = None


@dataclass(slots=True)
class LeaderView:
    """The current leader's view of its replicas: its stamps live on its own clock."""
    node: int
    epoch: int
    stamp: int   # its clock's now, as last heard
    since: int   # its clock when the view began
    via: str     # "node" (its own records) or "poll" (a DescribeQuorum snapshot)
    offset: int  # maps its stamps to quorum time (see tracker's `leader_clock`)


@dataclass(slots=True)
class PollState:
    """The collector's last DescribeQuorum poll."""
    interval: int = -1
    ok_ms: int = -1
    failures: int = 0
    error: str | None = None
    blind: bool = False  # the failure says nothing of the quorum, only of the collector's path
    answered_by: int = -1


class Report(NamedTuple):
    """A node's latest word on itself: its epoch, state and leader, when (quorum time), its high
    watermark and the one before."""
    epoch: int
    state: str
    leader: int
    heard_ms: int
    hw: int
    previous_hw: int


class Refusal(NamedTuple):
    """The leader's last refusal of a replica's fetches: the error, its stamp, how many in a row."""
    outcome: str
    stamp: int
    count: int


class LagSample(NamedTuple):
    """Two lag samples a few seconds apart, (leader stamp, records behind) each: the trend's base."""
    then_ms: int
    then_lag: int
    now_ms: int
    now_lag: int


@dataclass(slots=True)
class ReplicaState:
    """One replica's health state, kept per quorum. Fetch and caught-up times are the current leader's clock stamps (LeaderView)."""
    role: str
    dir: str | None = None
    leo: int = -1
    fetch_leader_leo: int = -1
    last_fetch: int = -1
    last_caught_up: int = -1
    first_fetch: int = -1
    own_leo: int = -1
    diverged_from: int = -1
    seen_ms: int = -1
    windows: dict[str, Any] = field(default_factory=W.new_windows)
    truncations: int = 0
    truncated_records: int = 0
    status: Verdict | None = None
    sig: list | None = None  # what its last emitted row showed (rows.py)
    # Evidence for the cause (replica_verdicts.py): the node's own last record and last metrics
    # (quorum time) and the metrics' spacing, the leader's last refusal of its fetches, the
    # spacing of its valid fetches (leader clock, smoothed, and its recent longest), a past lag
    # to measure the trend against, its campaigns.
    own_ms: int = -1
    periodic_ms: int = -1
    own_gap_ms: int = -1
    rejected: Refusal | None = None
    gap_ms: int = -1
    gap_peak_ms: int = -1
    lag_ref: LagSample | None = None
    campaigns: int = 0
    campaign_epoch: int = -1
    back_ms: int = -1     # when its own records last resumed after a silence
    silent_ms: int = -1   # and how long that silence was
    refused_ms: int = -1  # quorum time the collector last found its metrics endpoint refusing


@dataclass(slots=True)
class QuorumState:
    cluster_id: str
    topic: str
    partition: int
    seq: int = 0
    event_seq: int = 0
    clock: dict[str, Any] = field(default_factory=C.new_clock)
    started_ms: int = -1
    last_event_ms: int = -1
    last_input_proc_ms: int = -1
    last_input_wall_ms: int = -1
    last_eval_ms: int = -1
    timer_ms: int = -1
    emitted_run: int | None = None  # the job run that has had every replica row (tracker.py)
    incarnation: int = 0
    epoch: int = -1
    epoch_first_ms: int = -1
    elections: int = 0
    epoch_changes: list[int] = field(default_factory=list)
    leader: int = -1
    leader_alive_ms: int = -1
    leader_alive_allowance_ms: int = 0
    previous_leader: int = -1  # the last epoch's leader: a partition that cut it off is named by it
    leader_changes: int = 0
    leader_change_times: list[int] = field(default_factory=list)
    view: LeaderView | None = None
    claims: dict[str, dict[str, int]] = field(default_factory=dict)  # epoch -> node -> quorum ms of its claim
    support: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)  # epoch -> leader -> voter -> ms
    reports: dict[str, Report] = field(default_factory=dict)  # node -> its latest report
    hw: int = -1
    hw_advanced_ms: int = -1
    leader_leo: int = -1
    voter_set: list[int] | None = None
    voter_set_changes: int = 0
    poll: PollState | None = None
    nodes_heard_ms: int = -1  # the last record a node wrote itself (fetch, metrics, state change)
    fetch_publishers: list[int] = field(default_factory=list)  # nodes seen publishing the fetches they answer
    replicas: dict[str, ReplicaState] = field(default_factory=dict)
    status: Verdict | None = None


def new_state(cluster_id: str, topic: str, partition: int) -> QuorumState:
    return QuorumState(cluster_id, topic, int(partition))


# --- the state store's JSON ------------------------------------------------------------------

def encode_default(value: Any) -> Any:
    """For orjson, which writes the dataclasses itself: the named tuples as arrays."""
    if isinstance(value, tuple):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not part of the health state")


_ORDER = {cls: tuple(f.name for f in fields(cls)) for cls in (QuorumState, ReplicaState, Verdict, LeaderView,
                                                               PollState)}
_NAMES = {cls: frozenset(names) for cls, names in _ORDER.items()}


def _fields(cls: type, value: dict[str, Any], strict: bool) -> dict[str, Any]:
    extra = value.keys() - _NAMES[cls]
    if extra:
        if strict:
            raise StateError(f"a stored {cls.__name__} has fields this job does not know: {sorted(extra)} "
                             f"(written by a newer version of the job?)")
        value = {k: v for k, v in value.items() if k in _NAMES[cls]}
    return value


def _make(cls: type, value: dict[str, Any], strict: bool):
    """`cls` from its stored fields. Every quorum is read in every micro-batch, so the usual case
    is fast: what this code wrote has every field in order, and is passed by position (a tenth of
    the cost of keywords); other values by keyword, checked for fields `cls` does not know only
    when the constructor refuses them."""
    if tuple(value) == _ORDER[cls]:
        return cls(*value.values())
    try:
        return cls(**value)
    except TypeError:
        return cls(**_fields(cls, value, strict))


def _replica(value: dict[str, Any], strict: bool) -> ReplicaState:
    r = _make(ReplicaState, value, strict)
    if r.status is not None:
        r.status = _make(Verdict, r.status, strict)
    if r.rejected is not None:
        r.rejected = Refusal(*r.rejected)
    if r.lag_ref is not None:
        r.lag_ref = LagSample(*r.lag_ref)
    return r


def decode(value: dict[str, Any], version: int = STATE_VERSION) -> QuorumState:
    """A quorum as the state store keeps it (parsed JSON), written in `version`."""
    if version not in (VERSION_BEFORE_TYPES, STATE_VERSION):
        raise StateError(f"health state version {version} is not one this job reads "
                         f"({VERSION_BEFORE_TYPES} or {STATE_VERSION})")
    strict = version == STATE_VERSION
    try:
        s = _make(QuorumState, value, strict)
        if s.status is not None:
            s.status = _make(Verdict, s.status, strict)
        if s.view is not None:
            s.view = _make(LeaderView, s.view, strict)
        if s.poll is not None:
            s.poll = _make(PollState, s.poll, strict)
        s.reports = {n: Report(*r) for n, r in s.reports.items()}
        s.replicas = {rid: _replica(r, strict) for rid, r in s.replicas.items()}
        return s
    except TypeError as e:  # a field missing that has no default, or a value of the wrong shape
        raise StateError(f"a stored quorum cannot be read in health state version {version}: {e}") from e
