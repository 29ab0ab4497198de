"""Resigned: graceful or forced former leaders, and restarting as resigned."""
from quorum.raft import messages as m
from quorum.raft.quorum_state_store import ElectionState

from .context import Ctx, only_partition, vote_request


def test_restart_with_stored_leadership_comes_back_resigned_in_that_epoch():
    ctx = Ctx(stored=ElectionState(7, leader_id=0, voted_id=0, voters=(0, 1, 2)))
    assert ctx.node.state_name == "resigned" and ctx.node.epoch == 7 and ctx.node.leader_id == -1


def test_resigned_node_never_votes_for_another_candidate_in_its_epoch():
    ctx = Ctx(stored=ElectionState(7, leader_id=0, voted_id=0, voters=(0, 1, 2)))
    ctx.deliver(1, vote_request(1, 7, 99, 99))
    assert not only_partition(ctx.out.messages[0].body).vote_granted


def test_resigned_node_grants_votes_in_a_later_epoch():
    ctx = Ctx(stored=ElectionState(7, leader_id=0, voted_id=0, voters=(0, 1, 2)))
    ctx.deliver(1, vote_request(1, 8, 0, 0))
    assert only_partition(ctx.out.messages[0].body).vote_granted and ctx.node.epoch == 8


def test_resigned_node_starts_an_election_after_the_election_timeout():
    ctx = Ctx(stored=ElectionState(7, leader_id=0, voted_id=0, voters=(0, 1, 2)))
    ctx.tick_until(lambda out: bool(ctx.sent(m.VoteRequest, out)))
    assert ctx.node.state_name == "prospective" and 1000 <= ctx.now <= 2000


def test_resigned_node_does_not_answer_fetches_as_leader():
    ctx = Ctx(stored=ElectionState(7, leader_id=0, voted_id=0, voters=(0, 1, 2)))
    ctx.fetch_from(1, 0, 0, epoch=7)
    part = only_partition(ctx.sent(m.FetchResponse)[0].body)
    assert part.error_code == m.Errors.NOT_LEADER_OR_FOLLOWER and part.current_leader.leader_id == -1
