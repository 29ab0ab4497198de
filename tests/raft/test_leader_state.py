"""Leader: LeaderChange and NoOp records, check quorum, KIP-836 per-replica state, append."""

import pytest

from quorum.raft import kafka_records, messages as m
from quorum.raft.config import RaftConfig
from quorum.raft.errors import NotLeaderError
from quorum.raft.leader_state import ReplicaProgress
from quorum.raft.quorum_state_store import ElectionState

from .context import Ctx


def test_new_leader_appends_a_leader_change_control_record_naming_its_voters():
    ctx = Ctx(voters=(0, 1, 2))
    ctx.become_leader()
    rec = ctx.log.read(ctx.log.end_offset() - 1, 1)[0]
    assert rec.kind == "leader_change" and rec.is_control and rec.epoch == ctx.node.epoch
    body = kafka_records.read_leader_change(rec.value)
    assert body["leader_id"] == 0 and body["voters"] == [0, 1, 2] and 0 in body["granting_voters"]


def test_leader_appends_noop_after_max_idle_interval_without_appends():
    ctx = Ctx(voters=(0,))
    ctx.become_leader()
    elected = ctx.now
    ctx.out = ctx.node.append([b"a"], elected + 300)
    ctx.tick_until(lambda out: bool(out.appended))
    assert ctx.now == elected + 800 and ctx.out.appended[0].kind == "noop"


def test_noop_can_be_turned_off():
    ctx = Ctx(voters=(0,), config=RaftConfig(max_idle_interval_ms=0))
    ctx.become_leader()
    ctx.tick(10_000)
    assert ctx.out.appended == []


def test_append_on_a_non_leader_raises_not_leader_naming_the_leader():
    ctx = Ctx(stored=ElectionState(3, leader_id=2, voters=(0, 1, 2)))
    with pytest.raises(NotLeaderError) as e:
        ctx.node.append([b"x"], 0)
    assert e.value.leader_id == 2 and e.value.epoch == 3


def test_leader_resigns_without_fetches_from_a_majority_for_one_and_a_half_fetch_timeouts():
    ctx = Ctx(voters=(0, 1, 2))
    ctx.become_leader()
    elected = ctx.now
    ctx.tick_until(lambda out: ctx.node.state_name == "resigned")
    assert ctx.now == elected + 3000
    assert ctx.sent(m.EndQuorumEpochRequest)


def test_fetches_from_a_majority_keep_the_leader_in_office():
    ctx = Ctx(voters=(0, 1, 2, 3, 4))
    ctx.become_leader()
    for t in range(0, 10_000, 1000):
        ctx.now += 1000
        ctx.fetch_from(1 + (t // 1000) % 2, 0, 0)
        ctx.fetch_from(3, 0, 0)
        ctx.tick()
    assert ctx.node.is_leader


def test_single_voter_leader_never_fails_check_quorum():
    ctx = Ctx(voters=(0,))
    ctx.become_leader()
    ctx.tick(60_000)
    assert ctx.node.is_leader


def test_kip836_caught_up_when_fetch_offset_reaches_leader_log_end():
    p = ReplicaProgress(1)
    p.on_valid_fetch(10, 10, now=100)
    assert (p.end_offset, p.last_fetch_timestamp, p.last_caught_up_timestamp, p.last_fetch_leader_leo) == (10, 100, 100, 10)


def test_kip836_caught_up_at_previous_fetch_time_when_reaching_previous_leader_end():
    p = ReplicaProgress(1)
    p.on_valid_fetch(5, 10, now=100)     # behind: not caught up
    assert p.last_caught_up_timestamp == -1
    p.on_valid_fetch(10, 15, now=200)    # reached the leader end of the previous fetch
    assert p.last_caught_up_timestamp == 100 and p.last_fetch_timestamp == 200


def test_kip836_not_caught_up_when_behind_both_ends():
    p = ReplicaProgress(1)
    p.on_valid_fetch(5, 10, now=100)
    p.on_valid_fetch(8, 15, now=200)
    assert p.last_caught_up_timestamp == -1 and p.end_offset == 8


def test_kip836_timestamps_never_go_backwards():
    p = ReplicaProgress(1)
    p.on_valid_fetch(10, 10, now=500)
    p.on_valid_fetch(10, 10, now=400)
    assert p.last_fetch_timestamp == 500 and p.last_caught_up_timestamp == 500


def test_kip836_only_valid_fetches_update_replica_state():
    ctx = Ctx(voters=(0, 1, 2), log_epochs=(1, 1), stored=ElectionState(1, voters=(0, 1, 2)))
    ctx.become_leader()
    ctx.fetch_from(1, 5, 3)              # diverging
    assert ctx.node.state.voter_progress[1].last_fetch_timestamp == -1
