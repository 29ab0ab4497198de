"""EndQuorumEpoch: graceful resignation and the successor backoff formula."""
from quorum.raft import messages as m
from quorum.raft.quorum_state_store import ElectionState

from .context import Ctx, end_request, epoch_response, only_partition


def _leader_with_progress():
    ctx = Ctx(voters=(0, 1, 2, 3))
    ctx.become_leader()
    leo = ctx.log.end_offset()
    ctx.fetch_from(1, 0, 0)
    ctx.fetch_from(2, leo, ctx.node.epoch)
    ctx.fetch_from(3, 0, 0)
    return ctx


def test_resigning_leader_sends_end_quorum_epoch_with_successors_by_replicated_offset():
    ctx = _leader_with_progress()
    ctx.out = ctx.node.resign(ctx.now)
    reqs = ctx.sent(m.EndQuorumEpochRequest)
    assert sorted(r.destination for r in reqs) == [1, 2, 3]
    assert only_partition(reqs[0].body).preferred_successors == (2, 1, 3)
    assert ctx.node.state_name == "resigned" and ctx.node.leader_id == -1


def test_first_successor_starts_election_at_once_skipping_pre_vote():
    ctx = Ctx(stored=ElectionState(4, leader_id=2, voters=(0, 1, 2)))
    ctx.deliver(2, end_request(2, 4, (0, 1)))
    assert only_partition(ctx.sent(m.EndQuorumEpochResponse)[0].body).error_code == m.Errors.NONE
    assert ctx.node.state_name == "candidate" and ctx.node.epoch == 5
    assert all(not only_partition(r.body).pre_vote for r in ctx.sent(m.VoteRequest))


def test_successor_at_position_n_waits_min_1000_retry_backoff_times_2_pow_n_minus_1():
    for position, expected in ((1, 20), (2, 40), (3, 80), (7, 1000)):
        successors = [9] * position
        successors = tuple(range(10, 10 + position)) + (0,)
        voters = (0,) + tuple(range(10, 10 + position)) + (2,)
        ctx = Ctx(voters=voters, stored=ElectionState(4, leader_id=2, voters=voters))
        ctx.deliver(2, end_request(2, 4, successors))
        assert ctx.node.state_name == "follower"
        assert ctx.node.next_deadline() == ctx.now + expected, position
        ctx.tick(expected)
        assert ctx.node.state_name == "candidate"


def test_end_quorum_epoch_not_naming_the_voter_is_inconsistent_voter_set():
    ctx = Ctx(stored=ElectionState(4, leader_id=2, voters=(0, 1, 2)))
    ctx.deliver(2, end_request(2, 4, (1,)))
    assert only_partition(ctx.out.messages[0].body).error_code == m.Errors.INCONSISTENT_VOTER_SET


def test_end_quorum_epoch_with_older_epoch_is_fenced():
    ctx = Ctx(stored=ElectionState(6, leader_id=1, voters=(0, 1, 2)))
    ctx.deliver(2, end_request(2, 4, (0,)))
    assert only_partition(ctx.out.messages[0].body).error_code == m.Errors.FENCED_LEADER_EPOCH
    assert ctx.node.leader_id == 1


def test_end_quorum_epoch_response_with_newer_leader_makes_resigned_node_follow():
    ctx = _leader_with_progress()
    ctx.out = ctx.node.resign(ctx.now)
    req = ctx.sent(m.EndQuorumEpochRequest)[0]
    ctx.answer(req, epoch_response(m.EndQuorumEpochResponse, 1, ctx.node.epoch + 1, m.Errors.FENCED_LEADER_EPOCH))
    assert ctx.node.state_name == "follower" and ctx.node.leader_id == 1
