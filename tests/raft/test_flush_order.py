"""Which messages may leave before their step's log flush (`leaves_before_flush`): the
leader's Fetch answers whose high watermark is already durable, as Kafka's leader lets
parked fetches return before it flushes (KafkaRaftClient.flushLeaderLog: "We update the
end offset before flushing so that parked fetches can return sooner"). A high watermark
above what the leader has flushed must wait: with a single voter an append commits at
once, and an observer told so could apply a record the leader's crash then loses."""
from quorum.raft import messages as m
from quorum.raft.output import leaves_before_flush
from quorum.raft.quorum_state_store import ElectionState

from .context import Ctx, only_partition, vote_request


def _leader(voters):
    ctx = Ctx(voters=voters, log_epochs=(1, 1, 2), stored=ElectionState(2, voters=voters))
    ctx.become_leader()
    return ctx


def _parked_after_append(ctx, replicas):
    leo = ctx.log.end_offset()
    for r in replicas:       # caught up: their next fetches wait for new data
        ctx.fetch_from(r, leo, ctx.node.epoch, max_wait_ms=500)
    for r in replicas:
        ctx.fetch_from(r, leo, ctx.node.epoch, max_wait_ms=500)
    assert ctx.sent(m.FetchResponse) == []
    out = ctx.node.append([b"new"], ctx.now + 5)   # not flushed yet
    assert out.flush_log and ctx.log.flushed_end_offset() == leo
    return out


def test_new_records_reach_parked_followers_before_the_leaders_flush():
    ctx = _leader((0, 1, 2))
    out = _parked_after_append(ctx, (1, 2))
    answers = [msg for msg in out.messages if isinstance(msg.body, m.FetchResponse)]
    assert len(answers) == 2
    assert all([r.value for r in only_partition(a.body).records] == [b"new"] for a in answers)
    assert all(leaves_before_flush(a, ctx.log.flushed_end_offset()) for a in answers)


def test_a_high_watermark_above_the_flushed_log_waits_for_the_flush():
    ctx = _leader((0,))
    out = _parked_after_append(ctx, (7,))             # an observer of a single voter
    (answer,) = [msg for msg in out.messages if isinstance(msg.body, m.FetchResponse)]
    assert only_partition(answer.body).high_watermark == ctx.log.end_offset()   # committed at once
    assert not leaves_before_flush(answer, ctx.log.flushed_end_offset())
    ctx.log.flush()
    assert leaves_before_flush(answer, ctx.log.flushed_end_offset())


def test_only_fetch_answers_leave_early():
    ctx = _leader((0, 1, 2))
    out = ctx.deliver(1, vote_request(1, ctx.node.epoch + 1, 2, 3))
    (vote,) = ctx.sent(m.VoteResponse, out)
    assert not leaves_before_flush(vote, 10**9)
    # a follower's fetch acknowledges its log end: never before its flush
    follower = Ctx(stored=ElectionState(3, leader_id=2, voters=(0, 1, 2)))
    follower.tick()
    (fetch,) = follower.sent(m.FetchRequest)
    assert not leaves_before_flush(fetch, 10**9)
