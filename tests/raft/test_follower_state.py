"""Follower: fetching, truncation on divergence, the high watermark it learns, fetch timeout."""
import pytest

from quorum.raft import messages as m
from quorum.raft.config import RaftConfig
from quorum.raft.errors import SafetyError
from quorum.raft.quorum_state_store import ElectionState

from .context import Ctx, fetch_response, only_partition, records


def _follower(log_epochs=(), epoch=4, leader=2, voters=(0, 1, 2), **kw):
    ctx = Ctx(voters=voters, log_epochs=log_epochs, stored=ElectionState(epoch, leader_id=leader, voters=voters), **kw)
    ctx.tick()
    return ctx


def test_follower_fetches_from_its_log_end_with_the_last_epoch():
    ctx = _follower(log_epochs=(1, 1, 3))
    (req,) = ctx.sent(m.FetchRequest)
    part = only_partition(req.body)
    assert req.destination == 2 and (part.fetch_offset, part.last_fetched_epoch, part.current_leader_epoch) == (3, 3, 4)
    assert req.body.replica_id == 0 and req.body.cluster_id == "test-cluster"


def test_follower_appends_fetched_records_and_asks_for_a_flush_before_the_next_fetch():
    ctx = _follower()
    out = ctx.answer(ctx.sent(m.FetchRequest)[0], fetch_response(2, 4, 0, records(0, (4, 4))))
    assert out.flush_log and [r.offset for r in out.appended] == [0, 1]
    assert only_partition(ctx.sent(m.FetchRequest)[0].body).fetch_offset == 2


def test_follower_high_watermark_is_the_leaders_capped_at_its_log_end():
    ctx = _follower()
    out = ctx.answer(ctx.sent(m.FetchRequest)[0], fetch_response(2, 4, 5, records(0, (4, 4))))
    assert ctx.node.high_watermark == 2 and [r.offset for r in out.committed] == [0, 1]


def test_follower_truncates_to_the_diverging_epoch_end_offset():
    ctx = _follower(log_epochs=(1, 1, 2, 2, 3))
    out = ctx.answer(ctx.sent(m.FetchRequest)[0], fetch_response(2, 4, 0, diverging=m.EpochEndOffset(2, 3)))
    assert out.truncated_to == 3 and ctx.log.end_offset() == 3
    assert only_partition(ctx.sent(m.FetchRequest)[0].body).fetch_offset == 3


def test_follower_truncates_to_its_own_end_of_the_epoch_when_shorter():
    ctx = _follower(log_epochs=(1, 1, 3))
    ctx.answer(ctx.sent(m.FetchRequest)[0], fetch_response(2, 4, 0, diverging=m.EpochEndOffset(2, 9)))
    assert ctx.log.end_offset() == 2   # its records of epoch <= 2 end at offset 2


def test_follower_refuses_to_truncate_below_its_high_watermark():
    ctx = _follower()
    ctx.answer(ctx.sent(m.FetchRequest)[0], fetch_response(2, 4, 2, records(0, (4, 4))))
    with pytest.raises(SafetyError):
        ctx.answer(ctx.sent(m.FetchRequest)[0], fetch_response(2, 4, 2, diverging=m.EpochEndOffset(1, 0)))


def test_follower_ignores_duplicate_and_stale_fetch_responses():
    ctx = _follower()
    first = ctx.sent(m.FetchRequest)[0]
    ctx.answer(first, fetch_response(2, 4, 0, records(0, (4,))))
    out = ctx.answer(first, fetch_response(2, 4, 0, records(0, (4,))))   # duplicate
    assert out.appended == [] and out.messages == [] and ctx.log.end_offset() == 1


def test_follower_backs_off_after_an_error_response():
    ctx = _follower()
    ctx.answer(ctx.sent(m.FetchRequest)[0], fetch_response(2, 4, 0, error=m.Errors.NOT_LEADER_OR_FOLLOWER))
    assert ctx.sent(m.FetchRequest) == []
    ctx.tick(20)
    assert len(ctx.sent(m.FetchRequest)) == 1


def test_follower_resends_a_fetch_lost_past_the_request_timeout():
    ctx = _follower(epoch=4)
    ctx.answer(ctx.sent(m.FetchRequest)[0], fetch_response(2, 4, 0))
    ctx.tick(1999)
    assert ctx.sent(m.FetchRequest) == []
    ctx.tick(1)
    assert ctx.sent(m.FetchRequest) or ctx.node.state_name == "prospective"


def test_voter_follower_starts_pre_vote_after_fetch_timeout():
    ctx = _follower()
    ctx.answer(ctx.sent(m.FetchRequest)[0], fetch_response(2, 4, 0))
    ctx.tick_until(lambda out: bool(ctx.sent(m.VoteRequest, out)))
    assert ctx.node.state_name == "prospective" and ctx.node.epoch == 4


def test_fetch_response_naming_newer_leader_switches_leader():
    ctx = _follower()
    ctx.answer(ctx.sent(m.FetchRequest)[0], fetch_response(1, 6, 0, error=m.Errors.FENCED_LEADER_EPOCH))
    assert ctx.node.leader_id == 1 and ctx.node.epoch == 6 and ctx.store.read().leader_id == 1
    assert ctx.sent(m.FetchRequest)[0].destination == 1


def test_follower_retry_backoff_doubles_with_each_error_answer_up_to_the_backoff_max():
    # Near KafkaRaftClientTest.testObserverHandleRetryFetchToLeader (a failed fetch backs off); the core doubles retry.backoff.ms
    # per error answer in a row (20, 40, 80, ... capped at election.backoff.max.ms = 1000).
    ctx = _follower(config=RaftConfig(fetch_timeout_ms=10_000))
    waits = []
    for _ in range(8):
        ctx.answer(ctx.sent(m.FetchRequest)[0], fetch_response(2, 4, 0, error=m.Errors.UNKNOWN_LEADER_EPOCH))
        waits.append(ctx.node.next_deadline() - ctx.now)
        ctx.tick(waits[-1])
    assert waits == [20, 40, 80, 160, 320, 640, 1000, 1000]
    ctx.answer(ctx.sent(m.FetchRequest)[0], fetch_response(2, 4, 0))       # success resets it
    ctx.answer(ctx.sent(m.FetchRequest)[0], fetch_response(2, 4, 0, error=m.Errors.UNKNOWN_LEADER_EPOCH))
    assert ctx.node.next_deadline() - ctx.now == 20


def test_observer_past_its_fetch_timeout_keeps_its_leader_and_asks_any_voter():
    # Mirrors KafkaRaftClientTest.testObserverSendDiscoveryFetchAfterFetchTimeout: an observer
    # does not drop to unattached (leader -1); it fetches from any voter until one answers.
    ctx = _follower(node_id=5)
    ctx.answer(ctx.sent(m.FetchRequest)[0], fetch_response(2, 4, 0))
    ctx.tick_until(lambda out: any(r.destination != 2 or ctx.now >= 2000 for r in ctx.sent(m.FetchRequest, out)))
    assert ctx.node.state_name == "observer" and ctx.node.leader_id == 2 and ctx.node.epoch == 4
    req = ctx.sent(m.FetchRequest)[0]
    if req.destination != 2:                 # a follower's answer names the leader: nothing changes
        ctx.answer(req, fetch_response(2, 4, 0, error=m.Errors.NOT_LEADER_OR_FOLLOWER))
        assert ctx.node.leader_id == 2
    else:                                    # the leader's answer resets the fetch timeout
        ctx.answer(req, fetch_response(2, 4, 0))
        assert ctx.node.state.fetch_deadline == ctx.now + 2000
