"""Raft and KIP-835 metrics, and the state-change events every transition yields."""
import math

from quorum import events
from quorum.contract_records import metrics_record
from quorum.raft.quorum_state_store import ElectionState

from .context import Ctx


def test_state_changes_yield_valid_state_change_events_in_order():
    ctx = Ctx(voters=(0, 1, 2))
    seen = []
    ctx.tick_until(lambda out: seen.extend(ctx.records(out)) or bool(out.messages))
    ctx.become_leader()
    seen += ctx.records()
    changes = [e for e in seen if isinstance(e, events.StateChange)]
    for e in changes:
        events.validate(e)
    assert changes[-1].to_state == "leader" and changes[-1].leader_id == 0 and changes[-1].node_id == 0
    assert changes[0].from_state == "unattached"


def test_metrics_report_state_epoch_offsets_and_kip835_values():
    ctx = Ctx(voters=(0,))
    ctx.become_leader()
    ctx.now += 100
    ctx.node.append([b"a"], ctx.now)
    ctx.now += 40
    mt = ctx.node.metrics(ctx.now)
    assert (mt.current_state, mt.current_leader, mt.current_epoch, mt.current_vote) == ("leader", 0, 1, 0)
    assert mt.high_watermark == 2 and mt.log_end_offset == 2 and mt.log_end_epoch == 1
    assert mt.last_applied_record_offset == 1 and mt.last_committed_record_offset == 1
    assert mt.last_applied_record_timestamp == ctx.now - 40 and mt.last_applied_record_lag_ms == 40
    assert mt.commit_latency_max == 0 and mt.append_records_rate > 0


def test_metrics_before_anything_happened_are_unknown():
    ctx = Ctx()
    mt = ctx.node.metrics(0)
    assert mt.current_state == "unattached" and mt.last_applied_record_offset == -1
    assert mt.last_applied_record_lag_ms == -1 and math.isnan(mt.commit_latency_avg)


def test_election_latency_is_measured_from_election_start_to_leadership():
    ctx = Ctx(voters=(0, 1, 2))
    ctx.now = 0
    ctx.become_leader()
    mt = ctx.node.metrics(ctx.now)
    assert mt.election_latency_max == 0   # every vote answered at the same instant


def test_metrics_record_matches_the_event_contract():
    ctx = Ctx(stored=ElectionState(3, leader_id=2, voters=(0, 1, 2)))
    rec = metrics_record(ctx.node, 1000)
    events.validate(rec)
    assert rec.state == "follower" and rec.leader_id == 2 and rec.voter_set == (0, 1, 2)


def test_outputs_carry_a_metrics_snapshot_at_most_once_per_interval():
    ctx = Ctx()
    assert ctx.tick().metrics.current_epoch == 0
    assert ctx.tick(99).metrics is None
    assert ctx.tick(1).metrics.current_state == "unattached"
