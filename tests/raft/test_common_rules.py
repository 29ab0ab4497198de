"""Rules shared by every RPC: cluster id checked on every request, leader id and epoch on every
response, batched topics/partitions."""
import pytest

from quorum.raft import messages as m
from quorum.raft.quorum_state_store import ElectionState

from .context import Ctx, begin_request, end_request, fetch_request, only_partition, vote_request


@pytest.mark.parametrize("request_body", [
    vote_request(1, 9, 9, 9, cluster_id="other"),
    begin_request(1, 9, cluster_id="other"),
    end_request(1, 9, (0,), cluster_id="other"),
    fetch_request(9, 0, 0, 1, cluster_id="other"),
], ids=["vote", "begin_quorum_epoch", "end_quorum_epoch", "fetch"])
def test_every_request_with_another_cluster_id_is_inconsistent_cluster_id_and_changes_nothing(request_body):
    ctx = Ctx(stored=ElectionState(3, leader_id=2, voters=(0, 1, 2)))
    ctx.deliver(1, request_body)
    (resp,) = ctx.out.messages
    assert resp.body.error_code == m.Errors.INCONSISTENT_CLUSTER_ID
    assert ctx.node.epoch == 3 and ctx.node.leader_id == 2 and ctx.out.quorum_state is None


@pytest.mark.parametrize("request_body", [
    vote_request(1, 2, 0, 0), begin_request(1, 2), end_request(1, 2, (0,)), fetch_request(2, 0, 0, 1),
], ids=["vote", "begin_quorum_epoch", "end_quorum_epoch", "fetch"])
def test_every_response_carries_the_responders_leader_and_epoch(request_body):
    ctx = Ctx(stored=ElectionState(3, leader_id=2, voters=(0, 1, 2)))
    ctx.deliver(1, request_body)
    part = only_partition(ctx.out.messages[0].body)
    leader = part.current_leader if isinstance(part, m.FetchPartitionData) else part
    assert (leader.leader_id, leader.leader_epoch) == (2, 3)


def test_responses_reuse_the_request_correlation_id_and_go_back_to_the_sender():
    ctx = Ctx()
    ctx.deliver(2, vote_request(2, 1, 0, 0), correlation_id=4242)
    (resp,) = ctx.out.messages
    assert (resp.correlation_id, resp.destination, resp.source) == (4242, 2, 0)


def test_messages_for_another_node_are_ignored():
    ctx = Ctx()
    out = ctx.node.handle(m.Message(1, 7, 1, vote_request(1, 5, 0, 0)), 0)
    assert out.messages == [] and ctx.node.epoch == 0
