"""The clock-skew fault: a node told its clock is off publishes every wall-clock time moved by the
skew, as a node with a wrong clock does, and nothing else in its records."""
from __future__ import annotations

from quorum import events
from quorum.node.faults import Faults


def fetch(**overrides) -> events.Fetch:
    base = dict(cluster_id="c", topic="__cluster_metadata", partition=0, time_ms=10_000, leader_id=1, leader_epoch=3,
                replica_id=2, replica_role="voter", fetch_offset=5, fetch_epoch=3, leader_log_end_offset=5,
                high_watermark=5, outcome="valid", replica_log_end_offset=5, last_fetch_timestamp_ms=10_000,
                last_caught_up_timestamp_ms=-1)
    return events.Fetch(**{**base, **overrides})


def test_a_skewed_node_moves_its_times_and_keeps_never_as_never():
    faults = Faults(clock_skew_ms=-4000)
    moved = faults.stamped(fetch())
    assert (moved.time_ms, moved.last_fetch_timestamp_ms, moved.last_caught_up_timestamp_ms) == (6000, 6000, -1)
    assert (moved.fetch_offset, moved.high_watermark, moved.leader_epoch) == (5, 5, 3)
    events.validate(moved)


def test_no_skew_publishes_the_record_itself_and_clear_ends_a_skew():
    record = fetch()
    assert Faults().stamped(record) is record
    faults = Faults(clock_skew_ms=3000)
    faults.clear()
    assert faults.stamped(record) is record and faults.describe()["clock_skew_ms"] == 0
