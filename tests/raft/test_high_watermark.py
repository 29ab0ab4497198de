"""The high-watermark rule: majority of voters, only past the epoch start, never backwards."""
from quorum.raft.leader_state import high_watermark_candidate
from quorum.raft.quorum_state_store import ElectionState

from .context import Ctx


def _leader(voters=(0, 1, 2), log_epochs=(1, 1, 1)):
    ctx = Ctx(voters=voters, log_epochs=log_epochs, stored=ElectionState(1, voters=voters))
    ctx.become_leader()
    return ctx


def test_candidate_is_entry_at_index_half_of_voter_offsets_sorted_descending():
    assert high_watermark_candidate([10, 3, 7]) == 7
    assert high_watermark_candidate([10, 3, 7, 9]) == 7
    assert high_watermark_candidate([5, 5, 1, 1, 9]) == 5
    assert high_watermark_candidate([4]) == 4


def test_high_watermark_needs_a_majority_of_voters():
    ctx = _leader(voters=(0, 1, 2, 3, 4))
    leo = ctx.log.end_offset()
    ctx.fetch_from(1, leo, ctx.node.epoch)
    assert ctx.node.high_watermark == 0
    ctx.fetch_from(2, leo, ctx.node.epoch)
    assert ctx.node.high_watermark == leo


def test_high_watermark_not_advanced_for_records_of_older_epochs_only():
    """Raft's figure 8: a majority holding old-epoch records is not enough; the LeaderChange
    record of the new epoch must be replicated first."""
    ctx = _leader()
    start = ctx.node.state.epoch_start_offset
    assert start == 3
    ctx.fetch_from(1, 3, 1)                  # holds every old record, not the LeaderChange
    assert ctx.node.high_watermark == 0
    ctx.fetch_from(1, 4, ctx.node.epoch)
    assert ctx.node.high_watermark == 4


def test_observers_never_count_toward_the_high_watermark():
    ctx = _leader()
    leo = ctx.log.end_offset()
    for observer in (7, 8, 9):
        ctx.fetch_from(observer, leo, ctx.node.epoch)
    assert ctx.node.high_watermark == 0


def test_high_watermark_never_moves_backwards():
    ctx = _leader()
    leo = ctx.log.end_offset()
    ctx.fetch_from(1, leo, ctx.node.epoch)
    ctx.fetch_from(2, leo, ctx.node.epoch)
    assert ctx.node.high_watermark == leo
    ctx.fetch_from(1, 0, 0)                  # a voter that lost its log fetches from zero
    ctx.fetch_from(2, 0, 0)
    assert ctx.node.high_watermark == leo


def test_single_voter_commits_its_own_appends_at_once():
    ctx = Ctx(voters=(0,))
    ctx.become_leader()
    out = ctx.node.append([b"a", b"b"], ctx.now)
    assert [r.value for r in out.committed][-2:] == [b"a", b"b"]
    assert out.append_offsets == (1, 2) and ctx.node.high_watermark == 3


def test_committed_records_are_output_once_in_order():
    ctx = _leader()
    ctx.node.append([b"a"], ctx.now)
    leo = ctx.log.end_offset()
    out = ctx.fetch_from(1, leo, ctx.node.epoch)
    assert [r.offset for r in out.committed] == list(range(leo))
    out = ctx.fetch_from(2, leo, ctx.node.epoch)
    assert out.committed == []
