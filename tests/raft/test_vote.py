"""Vote request and response handling: KIP-595's numbered rules, one test per rule."""
from quorum.raft import messages as m
from quorum.raft.config import RaftConfig
from quorum.raft.quorum_state_store import ElectionState

from .context import Ctx, only_partition, vote_request, vote_response


def test_rule1_reject_vote_when_a_larger_epoch_is_known():
    ctx = Ctx(stored=ElectionState(5))
    ctx.deliver(1, vote_request(1, 4, 3, 10))
    part = only_partition(ctx.sent(m.VoteResponse)[0].body)
    # Kafka answers a stale vote FENCED_LEADER_EPOCH (KafkaRaftClientTest.testHandleInvalidVoteRequestWithOlderEpoch)
    assert not part.vote_granted and part.leader_epoch == 5 and part.error_code == m.Errors.FENCED_LEADER_EPOCH
    assert ctx.store.read().epoch == 5


def test_rule2_one_vote_per_epoch_only_the_same_candidate_again():
    ctx = Ctx(stored=ElectionState(3))
    ctx.deliver(1, vote_request(1, 4, 0, 0))
    assert only_partition(ctx.out.messages[0].body).vote_granted
    ctx.deliver(2, vote_request(2, 4, 0, 0))
    assert not only_partition(ctx.out.messages[0].body).vote_granted
    ctx.deliver(1, vote_request(1, 4, 0, 0))   # a retry by the same candidate is granted again
    assert only_partition(ctx.out.messages[0].body).vote_granted


def test_rule2_vote_survives_restart_because_it_is_persisted_before_answering():
    ctx = Ctx(stored=ElectionState(3))
    ctx.deliver(1, vote_request(1, 4, 0, 0))
    assert ctx.out.quorum_state == ElectionState(4, -1, 1, (0, 1, 2))
    assert ctx.store.read().voted_id == 1
    again = Ctx(stored=ctx.store.read())
    again.deliver(2, vote_request(2, 4, 0, 0))
    assert not only_partition(again.out.messages[0].body).vote_granted


def test_rule3_1_candidate_not_in_voter_set_is_rejected_but_its_epoch_accepted():
    ctx = Ctx(stored=ElectionState(3))
    ctx.deliver(9, vote_request(9, 7, 0, 0))
    assert not only_partition(ctx.out.messages[0].body).vote_granted
    assert ctx.node.epoch == 7 and ctx.store.read() == ElectionState(7, -1, -1, (0, 1, 2))


def test_rule3_2_reject_candidate_with_older_last_epoch():
    ctx = Ctx(stored=ElectionState(3), log_epochs=(1, 1, 3))
    ctx.deliver(1, vote_request(1, 4, 2, 10))
    assert not only_partition(ctx.out.messages[0].body).vote_granted
    assert ctx.store.read().voted_id == -1 and ctx.node.epoch == 4   # epoch bumped, no vote


def test_rule3_2_reject_candidate_with_same_epoch_shorter_log():
    ctx = Ctx(stored=ElectionState(3), log_epochs=(1, 1, 3))
    ctx.deliver(1, vote_request(1, 4, 3, 2))
    assert not only_partition(ctx.out.messages[0].body).vote_granted


def test_rule3_2_grant_candidate_with_equal_or_longer_log():
    ctx = Ctx(stored=ElectionState(3), log_epochs=(1, 1, 3))
    ctx.deliver(1, vote_request(1, 4, 3, 3))
    assert only_partition(ctx.out.messages[0].body).vote_granted
    assert ctx.node.state_name == "voted"


def test_step_down_on_larger_epoch_leader_grants_and_becomes_voted():
    ctx = Ctx(voters=(0, 1, 2))
    ctx.become_leader()
    epoch = ctx.node.epoch
    ctx.deliver(1, vote_request(1, epoch + 1, epoch, ctx.log.end_offset()))
    assert only_partition(ctx.out.messages[0].body).vote_granted
    assert not ctx.node.is_leader and ctx.node.state_name == "voted"


def test_leader_rejects_vote_in_its_own_epoch():
    ctx = Ctx()
    ctx.become_leader()
    ctx.deliver(1, vote_request(1, ctx.node.epoch, ctx.node.epoch - 1, 99))
    assert not only_partition(ctx.out.messages[0].body).vote_granted and ctx.node.is_leader


def test_follower_rejects_vote_in_the_epoch_of_its_leader():
    ctx = Ctx(stored=ElectionState(4, leader_id=2, voters=(0, 1, 2)))
    ctx.deliver(1, vote_request(1, 4, 3, 99))
    assert not only_partition(ctx.out.messages[0].body).vote_granted


def test_candidate_votes_for_itself_after_persisting_before_sending_requests():
    ctx = Ctx(config=RaftConfig(pre_vote=False))
    ctx.tick_until(lambda out: bool(ctx.sent(m.VoteRequest, out)))
    assert ctx.out.quorum_state == ElectionState(1, -1, 0, (0, 1, 2))
    reqs = ctx.sent(m.VoteRequest)
    assert sorted(r.destination for r in reqs) == [1, 2]
    assert all(only_partition(r.body).candidate_epoch == 1 for r in reqs)


def test_candidate_becomes_leader_with_majority_of_votes():
    ctx = Ctx(voters=(0, 1, 2, 3, 4), config=RaftConfig(pre_vote=False))
    ctx.tick_until(lambda out: bool(ctx.sent(m.VoteRequest, out)))
    reqs = ctx.sent(m.VoteRequest)
    ctx.answer(reqs[0], vote_response(True, -1, 1))
    assert ctx.node.state_name == "candidate"
    ctx.answer(reqs[1], vote_response(True, -1, 1))
    assert ctx.node.is_leader and ctx.store.read().leader_id == 0


def test_duplicate_vote_response_counts_once():
    ctx = Ctx(voters=(0, 1, 2, 3, 4), config=RaftConfig(pre_vote=False))
    ctx.tick_until(lambda out: bool(ctx.sent(m.VoteRequest, out)))
    req = ctx.sent(m.VoteRequest)[0]
    ctx.answer(req, vote_response(True, -1, 1))
    ctx.answer(req, vote_response(True, -1, 1))
    assert ctx.node.state_name == "candidate"


def test_vote_response_ignored_when_no_longer_candidate():
    ctx = Ctx(config=RaftConfig(pre_vote=False))
    ctx.tick_until(lambda out: bool(ctx.sent(m.VoteRequest, out)))
    reqs = ctx.sent(m.VoteRequest)
    ctx.deliver(2, vote_request(2, 5, 4, 9))            # moves to epoch 5, votes for 2
    ctx.answer(reqs[0], vote_response(True, -1, 1))
    assert ctx.node.state_name == "voted" and ctx.node.epoch == 5


def test_vote_response_with_larger_epoch_steps_candidate_down():
    ctx = Ctx(config=RaftConfig(pre_vote=False))
    ctx.tick_until(lambda out: bool(ctx.sent(m.VoteRequest, out)))
    ctx.answer(ctx.sent(m.VoteRequest)[0], vote_response(False, 2, 3))
    assert ctx.node.state_name == "follower" and ctx.node.leader_id == 2 and ctx.node.epoch == 3


def test_two_voter_candidate_backs_off_at_once_on_rejection():
    ctx = Ctx(voters=(0, 1), config=RaftConfig(pre_vote=False))
    ctx.tick_until(lambda out: bool(ctx.sent(m.VoteRequest, out)))
    deadline_before = ctx.node.state.election_deadline
    ctx.answer(ctx.sent(m.VoteRequest)[0], vote_response(False, -1, 1))
    st = ctx.node.state
    assert st.backoff_until is not None and st.backoff_until <= ctx.now + RaftConfig().election_backoff_max_ms
    assert st.backoff_until < deadline_before


def test_election_timeout_has_jitter_between_timeout_and_twice_timeout():
    deadlines = {Ctx(seed=s).node.next_deadline() for s in range(20)}
    assert all(1000 <= d <= 2000 for d in deadlines) and len(deadlines) > 5


def test_candidate_retries_after_election_timeout_with_a_new_epoch():
    ctx = Ctx(config=RaftConfig(pre_vote=False))
    ctx.tick_until(lambda out: bool(ctx.sent(m.VoteRequest, out)))
    assert ctx.node.epoch == 1
    ctx.tick_until(lambda out: bool(ctx.sent(m.VoteRequest, out)))
    assert ctx.node.epoch == 2 and ctx.store.read().voted_id == 0


def test_inconsistent_cluster_id_vote_is_refused_without_state_change():
    ctx = Ctx(stored=ElectionState(3))
    ctx.deliver(1, vote_request(1, 9, 9, 9, cluster_id="other"))
    assert ctx.out.messages[0].body.error_code == m.Errors.INCONSISTENT_CLUSTER_ID
    assert ctx.node.epoch == 3 and ctx.out.quorum_state is None


def test_vote_for_unknown_partition_is_answered_unknown_topic_or_partition():
    ctx = Ctx()
    body = m.VoteRequest("test-cluster", (m.VoteTopicRequest("other-topic", (m.VotePartitionRequest(
        0, 1, 1, 0, 0),)),))
    ctx.deliver(1, body)
    assert ctx.out.messages[0].body.error_code == m.Errors.UNKNOWN_TOPIC_OR_PARTITION


def test_malformed_vote_requests_are_invalid_request_and_change_nothing():
    # Mirrors KafkaRaftClientTest.testInvalidVoteRequest: negative offset or epoch, a last epoch
    # at or above the candidate epoch (a pre-vote: above it), a negative candidate id.
    for body in (vote_request(1, 5, -1, 0), vote_request(1, 5, 0, -1), vote_request(1, 5, 5, 0),
                 vote_request(1, 5, 6, 0, pre_vote=True), vote_request(-1, 5, 0, 0)):
        ctx = Ctx(stored=ElectionState(3))
        ctx.deliver(1, body)
        part = only_partition(ctx.out.messages[0].body)
        assert part.error_code == m.Errors.INVALID_REQUEST and not part.vote_granted
        assert ctx.node.epoch == 3 and ctx.out.quorum_state is None


def test_stale_pre_vote_is_fenced_leader_epoch():
    # Mirrors KafkaRaftClientPreVoteTest.testHandleInvalidPreVoteRequestWithOlderEpoch.
    ctx = Ctx(stored=ElectionState(5))
    ctx.deliver(1, vote_request(1, 4, 3, 10, pre_vote=True))
    part = only_partition(ctx.out.messages[0].body)
    assert part.error_code == m.Errors.FENCED_LEADER_EPOCH and not part.vote_granted and part.leader_epoch == 5
