"""The console view: compact, flagged things first-class, healthy replicas hidden by default."""
from __future__ import annotations

import io

from streaming.sinks.config import ConsoleSinkConfig
from streaming.sinks.console import ConsoleSink, render
from streaming.sinks.snapshot import HealthSnapshot

from .health_rows import flagged_cluster, with_quorum_columns


def test_console_shows_the_quorum_the_flagged_replica_and_the_transition():
    snap = HealthSnapshot()
    applied = snap.apply(flagged_cluster("c1")[1])
    text = render(snap, applied.events, batch_id=7, stalled=False)
    lines = text.splitlines()
    assert lines[0] == "-- batch 7"
    assert lines[1].startswith("c1 __cluster_metadata-0  DEGRADED") and "voters 2/3 caught up" in lines[1]
    assert [ln for ln in lines if ln.startswith("    ")] == [ln for ln in lines if "unreachable" in ln
                                                          and ln.startswith("    ")]
    assert "    voter       3  unreachable" in text
    assert "  * c1 __cluster_metadata-0 replica 3: caught_up -> unreachable" in text
    assert "caught_up " not in "\n".join(ln for ln in lines if ln.startswith("    "))


def test_console_sink_says_when_the_input_is_stalled():
    out = io.StringIO()
    sink = ConsoleSink(ConsoleSinkConfig(enabled=True, show_healthy=True), out)
    snap = HealthSnapshot()
    snap.apply(flagged_cluster("c1")[1])
    sink.publish(snap, [], batch_id=3, stalled=True)
    text = out.getvalue()
    assert text.startswith("-- batch 3  INPUT STALLED")
    assert "voter       2  caught_up" in text  # show_healthy lists the healthy ones too


def test_console_shows_the_fault_tolerance_and_the_collectors_error_only_while_its_polls_fail():
    q, rows = flagged_cluster("c1")
    snap = HealthSnapshot()
    snap.apply(with_quorum_columns(rows, status="unobserved", fault_tolerance=None, poll_error="timeout",
                                   poll_failures=5))
    quorum_line = render(snap, [], batch_id=1, stalled=False).splitlines()[1]
    assert quorum_line.startswith("c1 __cluster_metadata-0  UNOBSERVED")
    assert "fault tolerance -" in quorum_line and quorum_line.endswith("collector: timeout (5 failed polls)")
    snap.apply(with_quorum_columns(q.rows(1000, proc_ms=2000), fault_tolerance=0, poll_error=None, poll_failures=0))
    quorum_line = render(snap, [], batch_id=2, stalled=False).splitlines()[1]
    assert "2 reachable, fault tolerance 0" in quorum_line and "collector" not in quorum_line
