"""Resigned: graceful or forced former leaders, and restarting as resigned."""
from quorum.contract_records import metrics_record
from quorum.raft import messages as m
from quorum.raft.quorum_state_store import ElectionState

from .context import Ctx, only_partition, vote_request


def test_restart_with_stored_leadership_comes_back_resigned_in_that_epoch():
    ctx = Ctx(stored=ElectionState(7, leader_id=0, voted_id=0, voters=(0, 1, 2)))
    assert ctx.node.state_name == "resigned" and ctx.node.epoch == 7 and ctx.node.leader_id == 0


def test_resigned_node_never_votes_for_another_candidate_in_its_epoch():
    ctx = Ctx(stored=ElectionState(7, leader_id=0, voted_id=0, voters=(0, 1, 2)))
    ctx.deliver(1, vote_request(1, 7, 6, 99))
    assert not only_partition(ctx.out.messages[0].body).vote_granted


def test_resigned_node_grants_votes_in_a_later_epoch():
    ctx = Ctx(stored=ElectionState(7, leader_id=0, voted_id=0, voters=(0, 1, 2)))
    ctx.deliver(1, vote_request(1, 8, 0, 0))
    assert only_partition(ctx.out.messages[0].body).vote_granted and ctx.node.epoch == 8


def test_resigned_node_goes_unattached_in_the_next_epoch_after_the_election_timeout():
    # Mirrors Kafka 4.x KafkaRaftClient.pollResigned / ResignedStateTest: after its election
    # timeout the resigned leader bumps the epoch (no answer may name it as leader any more),
    # then campaigns when that state's own election timer expires.
    ctx = Ctx(stored=ElectionState(7, leader_id=0, voted_id=0, voters=(0, 1, 2)))
    ctx.tick_until(lambda out: ctx.node.state_name != "resigned")
    assert ctx.node.state_name == "unattached" and ctx.node.epoch == 8 and 1000 <= ctx.now <= 2000
    assert ctx.store.read() == ElectionState(8, -1, -1, (0, 1, 2))
    ctx.tick_until(lambda out: bool(ctx.sent(m.VoteRequest, out)))
    assert ctx.node.state_name == "prospective" and ctx.node.epoch == 8


def test_resigned_node_does_not_answer_fetches_as_leader_but_names_itself():
    # Mirrors ResignedStateTest.testResignedState (election() names the local id as leader):
    # the answer says NOT_LEADER_OR_FOLLOWER and names this node, as does current-leader.
    ctx = Ctx(stored=ElectionState(7, leader_id=0, voted_id=0, voters=(0, 1, 2)))
    ctx.fetch_from(1, 0, 0, epoch=7)
    part = only_partition(ctx.sent(m.FetchResponse)[0].body)
    assert part.error_code == m.Errors.NOT_LEADER_OR_FOLLOWER and part.current_leader.leader_id == 0
    assert ctx.node.metrics(ctx.now).current_leader == 0
    assert metrics_record(ctx.node, ctx.now).leader_id == -1   # the event contract keeps -1
