"""The health state as types: what the state store keeps is read back as it was written, a
quorum saved before the types (version 1, `data/quorum_state_v1.json`, written by the job as it
was then, mid-fault) is read and judged on exactly as then, and a field this job does not know
fails where it is read, not later as a wrong verdict."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from streaming.health import codec
from streaming.health.config import HealthConfig
from streaming.health.state import (STATE_VERSION, VERSION_BEFORE_TYPES, QuorumState, ReplicaState, StateError,
                                    decode, new_state)
from streaming.health.tracker import QuorumTracker

from .tracker_harness import DEMO_START, demo_timeline

DATA = Path(__file__).parent / "data"
SAVED_AT_MS = 85_000  # the demo's voter 3 cut off (75-95 s), the quorum degraded
# Fields a quorum saved by an older job may lack: each was added to the state after its first release.
ADDED_LATER = {"quorum": ("nodes_heard_ms", "fetch_publishers", "last_input_wall_ms", "emitted_run", "previous_leader"),
               "replica": ("gap_peak_ms", "refused_ms", "periodic_ms", "back_ms", "silent_ms")}


def saved_v1() -> dict:
    return json.loads((DATA / "quorum_state_v1.json").read_text())


def continue_demo(state: QuorumState) -> list[list]:
    """The demo's records from SAVED_AT_MS to 110 s folded into `state`, as the job folds them."""
    records, _ = demo_timeline(3)
    cfg, out, end = HealthConfig(), [], DEMO_START + SAVED_AT_MS
    batch = [r for t, r in records if t >= end]
    for _ in range((110_000 - SAVED_AT_MS) // 500):
        end += 500
        now = [dict(r) for r in batch if r["time_ms"] < end and r.get("_taken") is None]
        for r in batch:
            if r["time_ms"] < end:
                r["_taken"] = True
        tracker = QuorumTracker(cfg, state, run_id=7)
        tracker.apply_all(now)
        out += [[r["now_ms"] - DEMO_START, r["kind"], r.get("replica_id"), r.get("status"), r.get("cause")]
                for r in tracker.evaluate(None) if r["kind"] in ("quorum", "replica", "transition", "cause")]
    return out


def test_a_quorum_saved_before_the_types_is_read_and_judged_on_as_then():
    state = decode(saved_v1(), VERSION_BEFORE_TYPES)
    assert state.replicas["3"].status.status == "unreachable" and state.replicas["3"].status.cause == "partitioned"
    assert state.status.status == "degraded"
    rows = continue_demo(state)
    assert rows == json.loads((DATA / "quorum_state_v1_continued.json").read_text())
    # and what that is: voter 3 stays cut off until the partition heals, then comes back; nothing else moves
    transitions = [(r[2], r[3]) for r in rows if r[1] == "transition"]
    assert transitions[0] == (3, "caught_up") and (None, "healthy") in transitions
    assert {rid for rid, _ in transitions} == {3, None}


def test_what_is_written_is_read_back_the_same():
    state = decode(saved_v1(), VERSION_BEFORE_TYPES)
    written = codec.dumps(state)
    again = decode(codec.loads(written), STATE_VERSION)
    assert again == state
    assert codec.dumps(again) == written
    # the shape did not change: version 2 writes what version 1 wrote, and the fields version 1
    # left out when they held their default (a held status's `initial`, the wall clock of input)
    assert without_defaults(codec.loads(written)) == without_defaults(saved_v1())


def without_defaults(value):
    """A stored quorum without the fields at their defaults, at any depth."""
    if isinstance(value, dict):
        return {k: without_defaults(v) for k, v in value.items()
                if not (k == "initial" and v is False) and not (k == "last_input_wall_ms" and v == -1)}
    return value


def test_a_quorum_saved_before_later_fields_takes_their_defaults():
    value = saved_v1()
    for name in ADDED_LATER["quorum"]:
        value.pop(name, None)
    for replica in value["replicas"].values():
        for name in ADDED_LATER["replica"]:
            replica.pop(name, None)
    state = decode(value, VERSION_BEFORE_TYPES)
    assert (state.nodes_heard_ms, state.fetch_publishers, state.emitted_run) == (-1, [], None)
    assert state.replicas["3"].refused_ms == -1 and state.replicas["3"].gap_peak_ms == -1
    # judged on: the cut-off voter is still what it was
    rows = continue_demo(state)
    first = [r for r in rows if r[1] == "replica" and r[2] == 3][0]
    assert first[3:] == ["unreachable", "partitioned"]


def test_a_field_no_longer_kept_is_dropped_from_version_1_and_refused_in_version_2():
    value = saved_v1()
    value["retired_field"] = 1
    value["replicas"]["2"]["retired_too"] = 2
    state = decode(copy.deepcopy(value), VERSION_BEFORE_TYPES)
    assert not hasattr(state, "retired_field")
    with pytest.raises(StateError, match="retired_field"):
        decode(value, STATE_VERSION)
    del value["retired_field"]
    with pytest.raises(StateError, match=r"ReplicaState has fields this job does not know: \['retired_too'\]"):
        decode(value, STATE_VERSION)


def test_a_misspelt_field_fails_where_it_is_written():
    state, replica = new_state("c", "t", 0), ReplicaState("voter")
    with pytest.raises(AttributeError):
        state.leader_alive = 5  # the field is leader_alive_ms
    with pytest.raises(AttributeError):
        replica.last_fetch_ms = 5  # the field is last_fetch


def test_a_version_this_job_does_not_know_is_refused():
    with pytest.raises(StateError, match="version 3"):
        decode(saved_v1(), 3)
