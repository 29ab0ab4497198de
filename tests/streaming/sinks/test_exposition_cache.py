"""The exposition a scrape serves is prometheus_client's own rendering of the same registry, byte
for byte, in both text formats, through a fleet's batches: transitions, a collector's error
coming and going, a replica and a quorum forgotten, label values that need escapes."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from streaming.health.config import HealthConfig
from streaming.sinks.monitor import MonitorMetrics
from streaming.sinks.prometheus_metrics import HealthCollector
from streaming.sinks.snapshot import HealthSnapshot, QuorumView

from .health_rows import ScriptedQuorum, with_quorum_columns

# cluster ids a label value must escape: a quote, a backslash, a newline
CLUSTERS = ['plain-0', 'quo"te', 'back\\slash', 'new\nline', 'plain-1', 'plain-2']


def assert_served_as_the_library_renders(collector: HealthCollector) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    text = generate_latest(registry)
    assert collector.exposition() == text
    assert collector.exposition(openmetrics=True) == generate_openmetrics(registry)
    assert collector.exposition() == text  # the kept text, served again
    return text.decode()


def fleet_batch(fleet: dict[str, ScriptedQuorum], ms: int, proc_ms: int) -> list[dict]:
    return [r for q in fleet.values() for r in q.rows(ms, proc_ms=proc_ms)]


def test_the_cached_exposition_is_the_librarys_through_a_fleets_batches():
    snapshot, monitor = HealthSnapshot(), MonitorMetrics(HealthConfig())
    monitor.record_invalid({"invalid_json": 2})
    collector = HealthCollector(snapshot, monitor)
    assert_served_as_the_library_renders(collector)  # nothing seen yet: headers only

    # with a run id, a replica's row comes only when what it shows changed (as the job's processor
    # sends them): its kept lines serve while its quorum's move
    fleet = {c: ScriptedQuorum(c, observers=(4,) if i % 2 else (), run_id=7 if i < 3 else None)
             for i, c in enumerate(CLUSTERS)}
    snapshot.apply(fleet_batch(fleet, 3000, 1000))
    text = assert_served_as_the_library_renders(collector)
    assert 'cluster="quo\\"te"' in text and 'cluster="back\\\\slash"' in text and 'cluster="new\\nline"' in text

    # a voter of two quorums stops fetching: unreachable, with its cause
    fleet["quo\"te"].script.mode[3] = "silent"
    fleet["plain-2"].script.mode[2] = "silent"
    snapshot.apply(fleet_batch(fleet, 4000, 2000))
    text = assert_served_as_the_library_renders(collector)
    assert 'quorum_replica_status{cluster="quo\\"te",partition="__cluster_metadata-0",replica="3",role="voter",' \
           'status="unreachable"} 1.0' in text

    # a collector's polls fail in one quorum (its error needs an escape too), then answer again
    rows = fleet_batch(fleet, 1000, 3000)
    snapshot.apply(with_quorum_columns(rows, poll_error='refused "x"\\y', poll_failures=2))
    text = assert_served_as_the_library_renders(collector)
    assert 'error="refused \\"x\\"\\\\y"' in text
    snapshot.apply(fleet_batch(fleet, 1000, 4000))
    assert "quorum_collector_poll_error{" not in assert_served_as_the_library_renders(collector)

    # an observer stops fetching and is forgotten after 300 s: its series go
    fleet["new\nline"].script.mode[4] = "silent"
    rows = fleet_batch(fleet, 301_000, 5000)
    assert any(r["kind"] == "forget" and r["replica_id"] == 4 for r in rows)
    snapshot.apply(rows)
    text = assert_served_as_the_library_renders(collector)
    assert 'cluster="new\\nline",partition="__cluster_metadata-0",replica="4"' not in text
    assert 'cluster="quo\\"te",partition="__cluster_metadata-0",replica="4"' in text

    # a quorum forgotten whole: every series of it goes
    gone = {"kind": "forget", "cluster_id": "back\\slash", "topic": "__cluster_metadata", "partition": 0,
            "seq": 10**6, "now_ms": 0, "proc_ms": 6000, "last_input_proc_ms": 6000, "silent": False,
            "replica_id": None}
    del fleet["back\\slash"]
    snapshot.apply([gone] + fleet_batch(fleet, 1000, 6000))
    text = assert_served_as_the_library_renders(collector)
    assert 'back\\\\slash' not in text


def test_the_pushgateways_collector_with_its_group_label_is_the_librarys_too():
    snapshot, monitor = HealthSnapshot(), MonitorMetrics(HealthConfig())
    monitor.record_push_failures(1)
    snapshot.apply(ScriptedQuorum("c1", observers=(4,)).rows(3000))
    assert_served_as_the_library_renders(HealthCollector(snapshot, monitor, monitor_labels={"cluster": "_monitor"}))


def test_a_quorum_without_replicas_has_its_quorum_series_alone():
    snapshot = HealthSnapshot()
    [quorum] = [r for r in ScriptedQuorum("bare").rows(3000) if r["kind"] == "quorum"]
    snapshot.quorums[("bare", quorum["topic"], 0)] = QuorumView(quorum, {})
    text = assert_served_as_the_library_renders(HealthCollector(snapshot, None))
    assert 'quorum_status{cluster="bare"' in text and "quorum_replica_status{" not in text
