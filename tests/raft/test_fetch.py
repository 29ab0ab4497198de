"""Fetch as the leader answers it: epoch checks, the divergence check with the epoch cache,
long poll, and the fetch events of the event contract."""
from quorum import events
from quorum.raft import messages as m
from quorum.raft.config import RaftConfig
from quorum.raft.log import LogRecord
from quorum.raft.quorum_state_store import ElectionState

from .context import Ctx, fetch_request, only_partition


def _leader(log_epochs=(1, 1, 2, 2, 2, 4), voters=(0, 1, 2), config=None):
    ctx = Ctx(voters=voters, log_epochs=log_epochs, stored=ElectionState(4, voters=voters), config=config)
    ctx.become_leader()
    return ctx


def _answer(ctx):
    (resp,) = ctx.sent(m.FetchResponse)
    return only_partition(resp.body)


def test_fetch_with_older_epoch_is_fenced_and_names_the_leader():
    ctx = _leader()
    ctx.fetch_from(1, 0, 0, epoch=ctx.node.epoch - 1)
    part = _answer(ctx)
    assert part.error_code == m.Errors.FENCED_LEADER_EPOCH
    assert part.current_leader == m.LeaderIdAndEpoch(0, ctx.node.epoch)


def test_fetch_with_newer_epoch_is_unknown_leader_epoch():
    ctx = _leader()
    ctx.fetch_from(1, 0, 0, epoch=ctx.node.epoch + 1)
    assert _answer(ctx).error_code == m.Errors.UNKNOWN_LEADER_EPOCH


def test_fetch_to_non_leader_is_not_leader_or_follower_with_the_known_leader():
    ctx = Ctx(stored=ElectionState(3, leader_id=2, voters=(0, 1, 2)))
    ctx.fetch_from(1, 0, 0, epoch=3)
    part = _answer(ctx)
    assert part.error_code == m.Errors.NOT_LEADER_OR_FOLLOWER
    assert part.current_leader == m.LeaderIdAndEpoch(2, 3)
    assert ctx.records()[0].outcome == "not_leader"


def test_follower_fences_a_stale_fetch_as_kafka_does_but_records_it_as_not_leader():
    # KafkaRaftClientTest: a follower checks the request's epoch before its own leadership, so
    # a fetch of an older epoch gets FENCED_LEADER_EPOCH from it too. Its fetch record must not
    # name it as the leader answering (the monitor would count a second leader of the epoch).
    ctx = Ctx(stored=ElectionState(3, leader_id=2, voters=(0, 1, 2)))
    ctx.fetch_from(1, 0, 0, epoch=2)
    assert _answer(ctx).error_code == m.Errors.FENCED_LEADER_EPOCH
    assert [e.outcome for e in ctx.records()] == ["not_leader"]


def test_follower_answers_another_clusters_fetch_inconsistent_and_records_not_leader():
    ctx = Ctx(stored=ElectionState(3, leader_id=2, voters=(0, 1, 2)))
    ctx.deliver(1, fetch_request(3, 0, 0, 1, cluster_id="another-cluster"))
    (resp,) = ctx.sent(m.FetchResponse)
    assert resp.body.error_code == m.Errors.INCONSISTENT_CLUSTER_ID
    assert [e.outcome for e in ctx.records()] == ["not_leader"]


def test_consistent_fetch_returns_records_from_fetch_offset():
    ctx = _leader()
    ctx.fetch_from(1, 2, 1)
    part = _answer(ctx)
    assert part.diverging_epoch is None and part.error_code == 0
    assert [r.offset for r in part.records] == list(range(2, ctx.log.end_offset()))


def test_fetch_epoch_absent_from_leader_log_answers_largest_smaller_epoch_and_its_end():
    ctx = _leader()
    ctx.fetch_from(1, 5, 3)               # epoch 3 never existed on the leader
    part = _answer(ctx)
    assert part.diverging_epoch == m.EpochEndOffset(2, 5) and part.records == ()
    assert ctx.records()[0].outcome == "diverging"


def test_fetch_offset_beyond_end_of_its_epoch_diverges():
    ctx = _leader()
    ctx.fetch_from(1, 4, 1)               # epoch 1 ends at offset 2 on the leader
    assert _answer(ctx).diverging_epoch == m.EpochEndOffset(1, 2)


def test_fetch_epoch_below_every_leader_epoch_truncates_to_zero():
    ctx = _leader(log_epochs=(3, 3))
    ctx.fetch_from(1, 1, 1)
    assert _answer(ctx).diverging_epoch == m.EpochEndOffset(0, 0)


def test_malformed_fetches_are_invalid_requests():
    # Mirrors KafkaRaftClientTest.testInvalidFetchRequest: negative offset, negative last
    # fetched epoch, a last fetched epoch above the request's epoch, a negative max wait.
    ctx = _leader()
    epoch = ctx.node.epoch
    for offset, last_epoch, req_epoch, wait in ((-5, 0, epoch, 0), (0, -1, epoch, 0), (0, epoch + 1, epoch, 0),
                                                (0, 0, epoch, -1)):
        ctx.fetch_from(1, offset, last_epoch, epoch=req_epoch, max_wait_ms=wait)
        assert _answer(ctx).error_code == m.Errors.INVALID_REQUEST
        assert ctx.records()[-1].outcome == "offset_out_of_range"
    assert ctx.node.state.voter_progress[1].last_fetch_timestamp == -1


def test_caught_up_fetch_is_held_until_new_data_then_answered():
    ctx = _leader()
    leo = ctx.log.end_offset()
    ctx.fetch_from(1, leo, ctx.node.epoch, max_wait_ms=500)
    ctx.fetch_from(2, leo, ctx.node.epoch, max_wait_ms=500)   # advances the high watermark: both answered
    ctx.fetch_from(1, leo, ctx.node.epoch, max_wait_ms=500)
    assert ctx.sent(m.FetchResponse) == []                     # parked: nothing new
    ctx.out = ctx.node.append([b"new"], ctx.now + 5)
    (resp,) = ctx.sent(m.FetchResponse)
    assert [r.value for r in only_partition(resp.body).records] == [b"new"]


def test_caught_up_fetch_is_answered_empty_after_the_long_poll():
    ctx = _leader(config=RaftConfig(max_idle_interval_ms=0))
    leo = ctx.log.end_offset()
    ctx.fetch_from(1, leo, ctx.node.epoch, max_wait_ms=500)
    ctx.fetch_from(2, leo, ctx.node.epoch, max_wait_ms=500)
    ctx.fetch_from(1, leo, ctx.node.epoch, max_wait_ms=500)
    ctx.tick(499)
    assert ctx.sent(m.FetchResponse) == []
    ctx.tick(1)
    (resp,) = ctx.sent(m.FetchResponse)
    assert only_partition(resp.body).records == ()


def test_every_handled_fetch_yields_a_valid_fetch_event():
    ctx = _leader()
    leo = ctx.log.end_offset()
    ctx.fetch_from(1, 2, 1)
    (e,) = ctx.records()
    assert isinstance(e, events.Fetch)
    events.validate(e)
    assert (e.replica_id, e.fetch_offset, e.fetch_epoch, e.leader_log_end_offset, e.outcome, e.replica_role) == \
        (1, 2, 1, leo, "valid", "voter")
    ctx.fetch_from(7, 0, 0)
    assert ctx.records()[0].replica_role == "observer"


def test_a_fetch_event_carries_the_leaders_kip836_view_of_the_replica_after_it():
    ctx = _leader()
    leo = ctx.log.end_offset()
    ctx.fetch_from(1, 1, 1)                                  # behind: fetched, not caught up
    (e,) = ctx.records()
    assert (e.replica_log_end_offset, e.last_fetch_timestamp_ms, e.last_caught_up_timestamp_ms) == (1, ctx.now, -1)
    first = ctx.now
    ctx.tick(10)
    ctx.fetch_from(1, leo, ctx.node.epoch)                   # at the end the leader had at the last fetch
    (e,) = ctx.records()
    assert (e.replica_log_end_offset, e.last_fetch_timestamp_ms, e.last_caught_up_timestamp_ms) == \
        (leo, ctx.now, ctx.now)
    ctx.fetch_from(1, 0, 0, epoch=ctx.node.epoch - 1)          # fenced: the view stays what it was
    (e,) = ctx.records()
    assert e.outcome == "fenced" and e.replica_log_end_offset == leo and e.last_fetch_timestamp_ms > first
    ctx.fetch_from(2, 0, 0, epoch=ctx.node.epoch - 1)          # no valid fetch of replica 2 yet: unknown
    (e,) = ctx.records()
    assert (e.replica_log_end_offset, e.last_fetch_timestamp_ms, e.last_caught_up_timestamp_ms) == (-1, -1, -1)


def test_fetch_with_inconsistent_cluster_id_is_refused_top_level():
    ctx = _leader()
    ctx.deliver(1, fetch_request(ctx.node.epoch, 0, 0, 1, cluster_id="other"))
    (resp,) = ctx.sent(m.FetchResponse)
    assert resp.body.error_code == m.Errors.INCONSISTENT_CLUSTER_ID
    assert ctx.records()[0].outcome == "inconsistent_cluster_id"


def test_fetch_response_carries_records_with_their_epochs_and_kinds():
    ctx = _leader()
    ctx.fetch_from(1, 0, 0)
    recs = _answer(ctx).records
    assert all(isinstance(r, LogRecord) for r in recs)
    assert recs[-1].kind == "leader_change" and recs[-1].epoch == ctx.node.epoch


def test_held_fetches_are_answered_not_leader_when_leadership_ends():
    ctx = _leader()
    leo = ctx.log.end_offset()
    ctx.fetch_from(1, leo, ctx.node.epoch, max_wait_ms=500)
    ctx.fetch_from(2, leo, ctx.node.epoch, max_wait_ms=500)
    ctx.fetch_from(1, leo, ctx.node.epoch, max_wait_ms=500)
    assert ctx.sent(m.FetchResponse) == []
    ctx.out = ctx.node.resign(ctx.now)
    (resp,) = ctx.sent(m.FetchResponse)
    assert resp.destination == 1 and only_partition(resp.body).error_code == m.Errors.NOT_LEADER_OR_FOLLOWER


def test_fetch_offset_past_the_leaders_log_end_diverges_instead_of_out_of_range():
    # Mirrors KafkaRaftClientTest.testLeaderImmediatelySendsDivergingEpoch / the facts file: a
    # deposed leader's uncommitted tail is answered DivergingEpoch, so the follower truncates.
    ctx = _leader()
    leo, epoch = ctx.log.end_offset(), ctx.node.epoch
    ctx.fetch_from(1, leo + 400, epoch)
    part = _answer(ctx)
    assert part.error_code == m.Errors.NONE and part.diverging_epoch == m.EpochEndOffset(epoch, leo)
    assert ctx.records()[-1].outcome == "diverging"


def test_fetch_whose_last_epoch_is_ahead_of_the_leaders_log_diverges():
    # Mirrors KafkaRaftClientTest.testLeaderImmediatelySendsDivergingEpoch (last fetched epoch
    # newer than any the leader wrote, within the request epoch): largest epoch at or below it.
    ctx = _leader(log_epochs=(1, 1, 2), config=RaftConfig(max_idle_interval_ms=0))
    epoch = ctx.node.epoch                      # 5: its LeaderChange record is at offset 3
    ctx.fetch_from(1, 3, epoch - 1)             # a tail of epoch 4 the leader never had
    assert _answer(ctx).diverging_epoch == m.EpochEndOffset(2, 3)


def test_only_valid_fetches_count_for_check_quorum_and_endorsement():
    # Mirrors KafkaRaftClientTest.testCheckQuorum / LeaderState.updateReplicaState: only a
    # fetch consistent with the leader's log moves the check-quorum timer and endorses.
    ctx = _leader()
    st = ctx.node.state
    deadline = st.check_quorum_deadline
    ctx.now += 100
    ctx.fetch_from(1, ctx.log.end_offset() + 5, ctx.node.epoch)    # diverging
    assert st.check_quorum_deadline == deadline and 1 not in st.endorsed
    ctx.fetch_from(1, 0, 0)                                        # valid
    assert st.check_quorum_deadline == ctx.now + 3000 and 1 in st.endorsed
