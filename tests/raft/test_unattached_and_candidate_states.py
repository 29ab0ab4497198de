"""Unattached (with or without a vote) and candidate states, and restarts into them."""
from quorum.raft import messages as m
from quorum.raft.config import RaftConfig
from quorum.raft.quorum_state_store import ElectionState

from .context import Ctx, begin_request, fetch_response


def test_fresh_voter_starts_unattached_in_epoch_zero():
    ctx = Ctx()
    assert (ctx.node.state_name, ctx.node.epoch, ctx.node.leader_id) == ("unattached", 0, -1)


def test_restart_with_a_vote_comes_back_voted_in_that_epoch():
    ctx = Ctx(stored=ElectionState(4, voted_id=2, voters=(0, 1, 2)))
    assert ctx.node.state_name == "voted" and ctx.node.state.voted_id == 2


def test_restart_with_a_known_leader_comes_back_following_it():
    ctx = Ctx(stored=ElectionState(4, leader_id=2, voters=(0, 1, 2)))
    ctx.tick()
    assert ctx.node.state_name == "follower" and ctx.sent(m.FetchRequest)[0].destination == 2


def test_unattached_learns_leader_from_begin_quorum_epoch():
    ctx = Ctx()
    ctx.deliver(2, begin_request(2, 1))
    assert ctx.node.state_name == "follower" and ctx.node.leader_id == 2


def test_candidate_learns_leader_of_its_epoch_from_a_response():
    ctx = Ctx(config=RaftConfig(pre_vote=False))
    ctx.tick_until(lambda out: bool(ctx.sent(m.VoteRequest, out)))
    ctx.deliver(2, begin_request(2, 1))
    assert ctx.node.state_name == "follower" and ctx.node.leader_id == 2 and ctx.store.read().voted_id == 0


def test_lost_candidate_backs_off_then_retries_with_pre_vote():
    ctx = Ctx(voters=(0, 1, 2))
    ctx.tick_until(lambda out: bool(ctx.sent(m.VoteRequest, out)))
    from .context import vote_response
    ctx.answer(ctx.sent(m.VoteRequest)[0], vote_response(True, -1, 0))   # pre-vote won
    assert ctx.node.state_name == "candidate"
    for r in ctx.sent(m.VoteRequest):
        ctx.answer(r, vote_response(False, -1, 1))
    st = ctx.node.state
    assert st.backoff_until is not None
    ctx.tick_until(lambda out: bool(ctx.sent(m.VoteRequest, out)))
    assert ctx.node.state_name == "prospective" and ctx.now >= st.backoff_until


def test_observer_never_campaigns_and_finds_the_leader_through_a_voter():
    ctx = Ctx(node_id=5, voters=(0, 1, 2))
    ctx.tick()
    (req,) = ctx.sent(m.FetchRequest)
    assert req.destination in (0, 1, 2)
    ctx.answer(req, fetch_response(1, 3, 0, error=m.Errors.NOT_LEADER_OR_FOLLOWER))
    assert ctx.node.state_name == "observer" and ctx.node.leader_id == 1 and ctx.node.epoch == 3
    ctx.tick(100_000)
    assert not ctx.sent(m.VoteRequest)


def test_voter_that_lost_its_disk_only_follows():
    ctx = Ctx(may_vote=False)
    ctx.tick(10_000)
    assert ctx.node.state_name == "observer" and not ctx.sent(m.VoteRequest)


def _prospective(stored):
    ctx = Ctx(voters=(0, 1, 2, 3, 4), stored=stored)
    ctx.tick_until(lambda out: bool(ctx.sent(m.VoteRequest, out)))
    assert ctx.node.state_name == "prospective"
    return ctx


def test_prospective_whose_election_times_out_goes_back_to_its_known_leader_and_fetches():
    # Mirrors Kafka 4.x KafkaRaftClientPreVoteTest's prospective election-timeout cases
    # (pollProspective -> prospectiveTransitionAfterElectionLoss): no endless pre-vote rounds.
    ctx = _prospective(ElectionState(4, leader_id=2, voters=(0, 1, 2, 3, 4)))
    ctx.tick_until(lambda out: ctx.node.state_name != "prospective")
    assert ctx.node.state_name == "follower" and ctx.node.leader_id == 2 and ctx.node.epoch == 4
    assert [r.destination for r in ctx.sent(m.FetchRequest)] == [2]


def test_prospective_without_a_known_leader_times_out_to_unattached():
    ctx = _prospective(ElectionState(4, voters=(0, 1, 2, 3, 4)))
    ctx.tick_until(lambda out: ctx.node.state_name != "prospective")
    assert ctx.node.state_name == "unattached" and ctx.node.epoch == 4


def test_candidate_whose_election_times_out_goes_to_prospective_at_once():
    # Kafka 4.x pollCandidate: "Election was not granted, transitioning to prospective" (no
    # backoff after a timeout; the pre-vote round is the pause). Backoff follows rejections only.
    ctx = Ctx(voters=(0, 1, 2))
    ctx.tick_until(lambda out: bool(ctx.sent(m.VoteRequest, out)))
    from .context import vote_response
    ctx.answer(ctx.sent(m.VoteRequest)[0], vote_response(True, -1, 0))
    st = ctx.node.state
    assert ctx.node.state_name == "candidate"
    ctx.tick(st.election_deadline - ctx.now)
    assert ctx.node.state_name == "prospective" and ctx.node.state.retries == 1


def test_candidate_backoff_after_rejection_grows_with_the_elections_lost():
    # Mirrors KafkaRaftClientTest.testRetryElection: binary exponential backoff,
    # a random multiple of retry.backoff.ms below 2^retries of them, counted across pre-votes.
    ctx = Ctx(voters=(0, 1, 2), seed=3)
    from .context import vote_response
    limits = []
    for _ in range(4):
        ctx.tick_until(lambda out: bool(ctx.sent(m.VoteRequest, out)) and ctx.node.state_name == "prospective")
        ctx.answer(ctx.sent(m.VoteRequest)[0], vote_response(True, -1, ctx.node.epoch))
        st = ctx.node.state
        for r in ctx.sent(m.VoteRequest):
            ctx.answer(r, vote_response(False, -1, st.epoch))
        assert st.backoff_until is not None
        limits.append((st.retries, st.backoff_until - ctx.now))
    for retries, waited in limits:
        assert waited % 20 == 0 and waited < 20 * (2 << (retries - 1))
    assert [r for r, _ in limits] == [1, 2, 3, 4]
