"""The Prometheus metric families, rendered from the health snapshot (health_families) and the
monitor.

Names are the agreed contract (docs/metrics.md). Families are built
fresh at every collection from the current snapshot, never kept as client-library children, so
a replica or quorum that is gone from the snapshot is gone from the output: no stale series.
"""
from __future__ import annotations

from typing import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.registry import Collector

from .exposition_cache import FamilyList, HealthExposition
from .health_families import health_families, value_or_nan
from .monitor import MonitorMetrics
from .snapshot import HealthSnapshot


def monitor_families(monitor: MonitorMetrics, extra_labels: dict[str, str] | None = None) -> list[Metric]:
    """The job's own health. `extra_labels` adds e.g. cluster="_monitor" for the Pushgateway group."""
    names = list(extra_labels or {})
    values = [extra_labels[n] for n in names]
    snap = monitor.snapshot()
    records = CounterMetricFamily("quorum_monitor_input_records", "Records read from the events topic.",
                                  labels=names)
    records.add_metric(values, snap["input_records_total"])
    invalid = CounterMetricFamily("quorum_monitor_invalid_records", "Records dead-lettered, by ContractError code.",
                                  labels=names + ["reason"])
    for reason, n in sorted(snap["invalid_records_total"].items()):
        invalid.add_metric(values + [reason], n)
    failures = CounterMetricFamily("quorum_monitor_push_failures", "Pushgateway pushes that failed.", labels=names)
    failures.add_metric(values, snap["push_failures_total"])
    sink_failures = CounterMetricFamily("quorum_monitor_sink_failures", "Batches whose output to a sink failed.",
                                        labels=names + ["sink"])
    for sink in sorted({"prometheus", "kafka", "console"} | set(snap["sink_failures_total"])):
        sink_failures.add_metric(values + [sink], snap["sink_failures_total"].get(sink, 0))
    dropped = CounterMetricFamily("quorum_monitor_health_events_dropped",
                                  "Health events dropped because the health topic's buffer was full.", labels=names)
    dropped.add_metric(values, snap["health_events_dropped_total"])
    out: list[Metric] = [records, invalid, failures, sink_failures, dropped]
    for name, doc, value in (
            ("quorum_monitor_batch_duration_seconds", "Wall time of the last micro-batch.", snap["batch_duration_s"]),
            ("quorum_monitor_input_delay_seconds", "Now minus the newest event time in the last batch.",
             snap["input_delay_s"]),
            ("quorum_monitor_last_batch_timestamp_seconds", "Unix time of the last completed batch.",
             snap["last_batch_s"]),
            ("quorum_monitor_input_stalled", "1 when no input record arrived for the stall threshold.",
             1 if snap["input_stalled"] else 0),
            ("quorum_monitor_health_events_pending", "Health events waiting for the health topic.",
             snap["health_events_pending"])):
        fam = GaugeMetricFamily(name, doc, labels=names)
        fam.add_metric(values, value_or_nan(value))
        out.append(fam)
    return out


class HealthCollector(Collector):
    """Everything the job exports, for a registry served by the driver (exporter mode) or pushed.

    `exposition` is the same text as the library renders from `collect`, with the health
    families' lines kept between renders (exposition_cache.py): what a scrape serves."""

    def __init__(self, snapshot: HealthSnapshot, monitor: MonitorMetrics | None, cluster: str | None = None,
                 monitor_labels: dict[str, str] | None = None):
        self.snapshot, self.monitor, self.cluster, self.monitor_labels = snapshot, monitor, cluster, monitor_labels
        self._health = HealthExposition()

    def collect(self) -> Iterator[Metric]:
        yield from health_families(self.snapshot.views(self.cluster))
        yield from self._monitor_families()

    def _monitor_families(self) -> list[Metric]:
        return monitor_families(self.monitor, self.monitor_labels) if self.monitor is not None else []

    def exposition(self, openmetrics: bool = False) -> bytes:
        """The text format's body (OpenMetrics' with `openmetrics`), as `generate_latest` of a
        registry holding this collector gives it; the job's own few series are rendered by the
        library each time (they move with every batch), after the health families."""
        health = self._health.render(self.snapshot.views(self.cluster), openmetrics)
        own = FamilyList(self._monitor_families())
        tail = generate_openmetrics(own) if openmetrics else generate_latest(own)
        return health + tail

