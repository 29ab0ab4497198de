"""The exposition the job produces: the contract's names, state sets, units, no stale series."""
from __future__ import annotations

import math

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from quorum_metric_names import ALL_METRICS, QUORUM_STATUSES, REPLICA_STATUSES
from streaming.health.config import HealthConfig
from streaming.sinks.monitor import MonitorMetrics
from streaming.sinks.prometheus_metrics import HealthCollector
from streaming.sinks.snapshot import HealthSnapshot

from .health_rows import flagged_cluster, with_quorum_columns


def scrape(snapshot, monitor=None, **kw) -> dict[tuple[str, tuple], float]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(HealthCollector(snapshot, monitor, **kw))
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def sample(samples, name, **labels):
    [value] = [v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= set(ls)]
    return value


def flagged_snapshot(**quorum_columns):
    snap = HealthSnapshot()
    snap.apply(with_quorum_columns(flagged_cluster("c1")[1], **quorum_columns))
    return snap


def quorum_series(samples, name) -> dict[tuple, float]:
    """One family's samples, keyed by their labels other than cluster and partition."""
    return {tuple((k, v) for k, v in ls if k not in ("cluster", "partition")): v
            for (n, ls), v in samples.items() if n == name}


def test_every_contract_metric_is_exported_and_nothing_else():
    monitor = MonitorMetrics(HealthConfig())
    monitor.record_invalid({"invalid_json": 2})
    # a collector whose polls fail: the only time its error is a series
    names = {n for n, _ in scrape(flagged_snapshot(poll_error="timeout", poll_failures=3), monitor)}
    assert names == ALL_METRICS


def test_status_is_a_state_set_with_one_current_status():
    samples = scrape(flagged_snapshot())
    replica3 = {dict(ls)["status"]: v for (n, ls), v in samples.items()
                if n == "quorum_replica_status" and dict(ls)["replica"] == "3"}
    assert replica3 == {s: (1.0 if s == "unreachable" else 0.0) for s in REPLICA_STATUSES}
    quorum = {dict(ls)["status"]: v for (n, ls), v in samples.items() if n == "quorum_status"}
    assert quorum == {s: (1.0 if s == "degraded" else 0.0) for s in QUORUM_STATUSES}


def test_labels_units_and_unknown_values():
    samples = scrape(flagged_snapshot())
    labels = dict(cluster="c1", partition="__cluster_metadata-0", replica="3", role="voter")
    assert sample(samples, "quorum_replica_last_fetch_age_seconds", **labels) == 4.0  # ms -> seconds
    assert sample(samples, "quorum_replica_lag_records", **labels) > 0
    assert sample(samples, "quorum_leader_id", cluster="c1") == 1
    assert sample(samples, "quorum_majority_reachable", cluster="c1") == 1


def test_monitor_metrics_carry_the_group_label_only_when_asked():
    monitor = MonitorMetrics(HealthConfig())
    monitor.record_input(10)
    monitor.record_push_failures(2)
    plain = scrape(HealthSnapshot(), monitor)
    assert sample(plain, "quorum_monitor_input_records_total") == 10
    assert ("quorum_monitor_push_failures_total", ()) in plain
    grouped = scrape(HealthSnapshot(), monitor, monitor_labels={"cluster": "_monitor"})
    assert sample(grouped, "quorum_monitor_push_failures_total", cluster="_monitor") == 2
    assert math.isnan(sample(plain, "quorum_monitor_batch_duration_seconds"))  # no batch yet


def test_an_unobserved_quorum_is_a_status_of_the_state_set():
    samples = scrape(flagged_snapshot(status="unobserved", leader_id=-1))
    quorum = {dict(ls)["status"]: v for (n, ls), v in samples.items() if n == "quorum_status"}
    assert quorum == {s: (1.0 if s == "unobserved" else 0.0) for s in QUORUM_STATUSES}


def test_fault_tolerance_is_exported_and_nan_while_unknown():
    # voter 3 of three unreachable: two reachable, a majority of two, no voter to spare
    assert sample(scrape(flagged_snapshot(fault_tolerance=0)), "quorum_fault_tolerance", cluster="c1") == 0
    assert sample(scrape(flagged_snapshot(fault_tolerance=-1)), "quorum_fault_tolerance", cluster="c1") == -1
    assert math.isnan(sample(scrape(flagged_snapshot(fault_tolerance=None)), "quorum_fault_tolerance", cluster="c1"))


def test_poll_failures_are_nan_without_a_collector_and_counted_with_one():
    assert math.isnan(sample(scrape(flagged_snapshot(poll_failures=None)), "quorum_collector_poll_failures"))
    assert sample(scrape(flagged_snapshot(poll_failures=0)), "quorum_collector_poll_failures") == 0
    assert sample(scrape(flagged_snapshot(poll_failures=4, poll_error="timeout")),
                  "quorum_collector_poll_failures") == 4


def test_the_collectors_error_is_one_series_while_its_polls_fail_and_none_once_they_answer():
    q, rows = flagged_cluster("c1")
    snap = HealthSnapshot()
    snap.apply(with_quorum_columns(rows, poll_error="timeout", poll_failures=2))
    assert quorum_series(scrape(snap), "quorum_collector_poll_error") == {(("error", "timeout"),): 1.0}
    # another error replaces the first: only the current one is a series
    snap.apply(with_quorum_columns(q.rows(1000, proc_ms=2000), poll_error="connection_refused", poll_failures=3))
    assert quorum_series(scrape(snap), "quorum_collector_poll_error") == {(("error", "connection_refused"),): 1.0}
    snap.apply(with_quorum_columns(q.rows(1000, proc_ms=3000), poll_error=None, poll_failures=0))
    samples = scrape(snap)
    assert quorum_series(samples, "quorum_collector_poll_error") == {}
    assert sample(samples, "quorum_collector_poll_failures") == 0
