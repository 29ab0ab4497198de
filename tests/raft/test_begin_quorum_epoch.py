"""BeginQuorumEpoch: acceptance, conflicts, endorsements and resends."""
from quorum.raft import messages as m
from quorum.raft.quorum_state_store import ElectionState

from .context import Ctx, begin_request, epoch_response, only_partition


def test_voter_accepts_begin_quorum_epoch_with_newer_epoch_and_fetches():
    ctx = Ctx(stored=ElectionState(2, voters=(0, 1, 2)))
    ctx.deliver(1, begin_request(1, 3))
    assert only_partition(ctx.sent(m.BeginQuorumEpochResponse)[0].body).error_code == m.Errors.NONE
    assert ctx.node.state_name == "follower" and ctx.store.read() == ElectionState(3, 1, -1, (0, 1, 2))
    (fetch,) = ctx.sent(m.FetchRequest)
    assert fetch.destination == 1


def test_begin_quorum_epoch_with_older_epoch_is_fenced():
    ctx = Ctx(stored=ElectionState(5, voters=(0, 1, 2)))
    ctx.deliver(1, begin_request(1, 4))
    part = only_partition(ctx.out.messages[0].body)
    assert part.error_code == m.Errors.FENCED_LEADER_EPOCH and part.leader_epoch == 5


def test_begin_quorum_epoch_conflicting_with_known_leader_of_same_epoch_is_rejected():
    ctx = Ctx(stored=ElectionState(5, leader_id=2, voters=(0, 1, 2)))
    ctx.deliver(1, begin_request(1, 5))
    assert only_partition(ctx.out.messages[0].body).error_code == m.Errors.INVALID_REQUEST
    assert ctx.node.leader_id == 2


def test_voted_voter_follows_whoever_wins_its_epoch():
    ctx = Ctx(stored=ElectionState(5, voted_id=2, voters=(0, 1, 2)))
    ctx.deliver(1, begin_request(1, 5))
    assert ctx.node.leader_id == 1 and ctx.store.read().voted_id == 2


def test_leader_sends_begin_quorum_epoch_to_all_voters_on_election():
    ctx = Ctx(voters=(0, 1, 2, 3, 4))
    ctx.become_leader()
    assert sorted(x.destination for x in ctx.sent(m.BeginQuorumEpochRequest)) == [1, 2, 3, 4]


def test_leader_resends_begin_quorum_epoch_every_half_fetch_timeout_to_non_endorsers():
    ctx = Ctx(voters=(0, 1, 2, 3, 4))
    ctx.become_leader()
    begins = ctx.sent(m.BeginQuorumEpochRequest)
    epoch = ctx.node.epoch
    ctx.answer(next(b for b in begins if b.destination == 1),
               epoch_response(m.BeginQuorumEpochResponse, 0, epoch))
    ctx.fetch_from(2, 0, 0)                   # a fetch in the new epoch also endorses
    elected = ctx.now
    ctx.tick_until(lambda out: bool(ctx.sent(m.BeginQuorumEpochRequest, out)))
    assert ctx.now == elected + 1000
    assert sorted(x.destination for x in ctx.sent(m.BeginQuorumEpochRequest)) == [3, 4]


def test_begin_quorum_epoch_response_with_newer_epoch_makes_leader_follow():
    ctx = Ctx()
    ctx.become_leader()
    begin = ctx.sent(m.BeginQuorumEpochRequest)[0]
    ctx.answer(begin, epoch_response(m.BeginQuorumEpochResponse, 2, ctx.node.epoch + 3,
                                     m.Errors.FENCED_LEADER_EPOCH))
    assert ctx.node.state_name == "follower" and ctx.node.leader_id == 2
