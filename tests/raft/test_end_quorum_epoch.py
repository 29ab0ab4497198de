"""EndQuorumEpoch: graceful resignation and the successor backoff formula."""
from quorum.raft import messages as m
from quorum.raft.config import RaftConfig
from quorum.raft.quorum_state_store import ElectionState

from .context import Ctx, end_request, epoch_response, only_partition


def _leader_with_progress(config=None):
    ctx = Ctx(voters=(0, 1, 2, 3), config=config)
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
    assert ctx.node.state_name == "resigned" and ctx.node.leader_id == 0


def test_resigned_leader_resends_end_quorum_epoch_until_every_voter_answered():
    # Mirrors KafkaRaftClientTest.testEndQuorumEpochRetriesWhileResigned: a lost request is
    # sent again after the request timeout, an error answer after retry.backoff.ms, an
    # acknowledged voter never again.
    ctx = _leader_with_progress(RaftConfig(request_timeout_ms=500))
    ctx.out = ctx.node.resign(ctx.now)
    reqs = {r.destination: r for r in ctx.sent(m.EndQuorumEpochRequest)}
    epoch = ctx.node.epoch
    ctx.answer(reqs[1], epoch_response(m.EndQuorumEpochResponse, 0, epoch))                 # acknowledged
    ctx.answer(reqs[2], epoch_response(m.EndQuorumEpochResponse, 0, epoch, m.Errors.INVALID_REQUEST))
    assert ctx.node.next_deadline() == ctx.now + 20                                       # retry.backoff.ms
    ctx.tick(20)
    assert [r.destination for r in ctx.sent(m.EndQuorumEpochRequest)] == [2]
    ctx.tick(500 - 20)                                                                    # request timeout for 3
    assert [r.destination for r in ctx.sent(m.EndQuorumEpochRequest)] == [3]


def test_leader_restarted_as_resigned_sends_end_quorum_epoch():
    # Mirrors KafkaRaftClientTest.testInitializeAsResignedLeaderFromStateStore: a restart with a
    # stored leadership of its own comes back resigned and tells the other voters at once.
    ctx = Ctx(stored=ElectionState(7, leader_id=0, voted_id=0, voters=(0, 1, 2)))
    assert ctx.node.next_deadline() == ctx.now
    ctx.tick()
    reqs = ctx.sent(m.EndQuorumEpochRequest)
    assert sorted(r.destination for r in reqs) == [1, 2]
    assert only_partition(reqs[0].body).leader_epoch == 7 and only_partition(reqs[0].body).preferred_successors == (1, 2)


def test_first_successor_starts_election_at_once_skipping_pre_vote():
    ctx = Ctx(stored=ElectionState(4, leader_id=2, voters=(0, 1, 2)))
    ctx.deliver(2, end_request(2, 4, (0, 1)))
    assert only_partition(ctx.sent(m.EndQuorumEpochResponse)[0].body).error_code == m.Errors.NONE
    assert ctx.node.state_name == "candidate" and ctx.node.epoch == 5
    assert all(not only_partition(r.body).pre_vote for r in ctx.sent(m.VoteRequest))


def test_successor_backoff_is_kafkas_strict_exponential_of_the_backoff_max():
    # Mirrors KafkaRaftClientTest.testHandleEndQuorumRequestWithLowerPriorityToBecomeLeader:
    # position p of n successors waits min(B, (B >> (n-1)) << (p-1)), B = election backoff max.
    for n, position, expected in ((2, 1, 500), (3, 1, 250), (3, 2, 500), (4, 3, 500), (5, 2, 124), (5, 4, 496)):
        successors = tuple(range(10, 10 + n))
        me = successors[position]
        voters = successors + (2,)
        ctx = Ctx(node_id=me, voters=voters, stored=ElectionState(4, leader_id=2, voters=voters))
        ctx.deliver(2, end_request(2, 4, successors))
        assert ctx.node.state_name == "follower"
        assert ctx.node.next_deadline() == ctx.now + expected, (n, position)
        ctx.tick(expected)
        assert ctx.node.state_name == "candidate"


def test_voter_not_named_as_successor_waits_the_backoff_max():
    # Kafka: a voter missing from the preferred successors waits election.backoff.max.ms
    # (the core used to answer INCONSISTENT_VOTER_SET and never campaign early).
    ctx = Ctx(stored=ElectionState(4, leader_id=2, voters=(0, 1, 2)))
    ctx.deliver(2, end_request(2, 4, (1,)))
    assert only_partition(ctx.out.messages[0].body).error_code == m.Errors.NONE
    assert ctx.node.next_deadline() == ctx.now + 1000


def test_unattached_voter_answering_end_quorum_epoch_names_the_resigning_leader():
    # Mirrors KafkaRaftClientTest.testEndQuorumStartsNewElectionImmediatelyIfFollowerUnattached: the request
    # tells who led the epoch; the node follows it and applies the successor backoff.
    ctx = Ctx(stored=ElectionState(4, voters=(0, 1, 2)))
    ctx.deliver(2, end_request(2, 4, (1, 0)))
    part = only_partition(ctx.sent(m.EndQuorumEpochResponse)[0].body)
    assert part.error_code == m.Errors.NONE and part.leader_id == 2
    assert ctx.node.state_name == "follower" and ctx.node.leader_id == 2
    assert ctx.node.next_deadline() == ctx.now + 1000 >> 1


def test_end_quorum_epoch_with_invalid_leader_is_invalid_request():
    ctx = Ctx(stored=ElectionState(4, leader_id=2, voters=(0, 1, 2)))
    ctx.deliver(2, end_request(-1, 4, (0,)))
    assert only_partition(ctx.out.messages[0].body).error_code == m.Errors.INVALID_REQUEST
    assert ctx.node.leader_id == 2


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
