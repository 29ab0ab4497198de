"""DescribeQuorum with KIP-836 state, answered by the leader only."""
from quorum.raft import messages as m
from quorum.raft.quorum_state_store import ElectionState

from .context import Ctx, describe_request, only_partition


def _leader():
    ctx = Ctx(voters=(0, 1, 2))
    ctx.become_leader()
    return ctx


def test_leader_reports_itself_with_now_for_both_timestamps():
    ctx = _leader()
    ctx.now += 1234
    ctx.deliver(99, describe_request())
    part = only_partition(ctx.out.messages[0].body)
    me = part.current_voters[0]
    assert part.error_code == 0 and part.leader_id == 0 and part.leader_epoch == ctx.node.epoch
    assert (me.replica_id, me.log_end_offset, me.last_fetch_timestamp, me.last_caught_up_timestamp) == \
        (0, ctx.log.end_offset(), ctx.now, ctx.now)


def test_voters_never_heard_from_are_reported_unknown():
    ctx = _leader()
    ctx.deliver(99, describe_request())
    others = only_partition(ctx.out.messages[0].body).current_voters[1:]
    assert [(r.replica_id, r.log_end_offset, r.last_fetch_timestamp, r.last_caught_up_timestamp) for r in others] == \
        [(1, -1, -1, -1), (2, -1, -1, -1)]


def test_voter_and_observer_state_after_fetches():
    ctx = _leader()
    leo = ctx.log.end_offset()
    ctx.now += 10
    ctx.fetch_from(1, leo, ctx.node.epoch)
    ctx.fetch_from(5, 0, 0)
    ctx.deliver(99, describe_request())
    part = only_partition(ctx.out.messages[0].body)
    assert part.current_voters[1] == m.DescribeQuorumReplica(1, leo, ctx.now, ctx.now)
    assert part.observers == (m.DescribeQuorumReplica(5, 0, ctx.now, -1),)


def test_observers_are_forgotten_after_300_seconds_without_a_fetch():
    ctx = _leader()
    ctx.fetch_from(5, 0, 0)
    ctx.now += 299_999
    assert ctx.node.describe_quorum(ctx.now).observers
    ctx.now += 1
    assert ctx.node.describe_quorum(ctx.now).observers == ()


def test_non_leader_answers_not_leader_or_follower_with_the_leader_it_knows():
    ctx = Ctx(stored=ElectionState(3, leader_id=2, voters=(0, 1, 2)))
    ctx.deliver(99, describe_request())
    part = only_partition(ctx.out.messages[0].body)
    assert part.error_code == m.Errors.NOT_LEADER_OR_FOLLOWER and (part.leader_id, part.leader_epoch) == (2, 3)


def test_new_leader_reports_high_watermark_minus_one_until_it_commits_in_its_epoch():
    # Mirrors KafkaRaftClientTest.testDescribeQuorumWithOnlyStaticVoters / LeaderStateTest:
    # a leader's high watermark is unknown until a record of its own epoch is committed.
    ctx = _leader()
    assert ctx.node.describe_quorum(ctx.now).high_watermark == -1
    ctx.fetch_from(1, ctx.log.end_offset(), ctx.node.epoch)
    assert ctx.node.describe_quorum(ctx.now).high_watermark == ctx.log.end_offset()
