"""The foreachBatch body: health rows of one micro-batch -> snapshot -> Prometheus, Kafka, console."""
from __future__ import annotations

import logging
import time
from typing import Any, Callable

from streaming.health.config import HealthConfig
from streaming.health.schema import HEALTH_COLUMNS

from .config import SinkConfig
from .monitor import MonitorMetrics
from .snapshot import HealthSnapshot

log = logging.getLogger(__name__)


class HealthBatchWriter:
    """Callable `(batch_df, batch_id)` for `writeStream.foreachBatch`.

    `monitor` is the job's own health (`MonitorMetrics`): the job reports input and rejects to it
    (`writer.monitor.record_input(...)`, `record_invalid(...)`); this writer records batch timing
    and push failures, and exports it with the rest. `write_rows` is the same without Spark.
    """

    def __init__(self, sink_cfg: SinkConfig, health_cfg: HealthConfig, monitor: MonitorMetrics | None = None,
                 clock: Callable[[], float] = time.time):
        self.sink_cfg, self.health_cfg, self.clock = sink_cfg, health_cfg, clock
        self.monitor = monitor or MonitorMetrics(health_cfg, clock=clock)
        self.snapshot = HealthSnapshot()
        self.prometheus = self._make_prometheus()
        self.kafka = None
        if sink_cfg.kafka.enabled:
            from .kafka_events import KafkaEventsSink
            self.kafka = KafkaEventsSink(sink_cfg.kafka)
        self.console = None
        if sink_cfg.console.enabled:
            from .console import ConsoleSink
            self.console = ConsoleSink(sink_cfg.console)

    def _make_prometheus(self):
        mode = self.sink_cfg.prometheus.mode
        if mode == "pushgateway":
            from .pushgateway import PushgatewaySink
            return PushgatewaySink(self.sink_cfg.prometheus, self.snapshot, self.monitor)
        if mode == "exporter":
            from .exporter import ExporterSink
            return ExporterSink(self.sink_cfg.prometheus, self.snapshot, self.monitor)
        return None

    def __call__(self, batch_df, batch_id: int) -> None:
        started = self.clock()
        table = batch_df.select(*HEALTH_COLUMNS).toArrow()
        self.write_rows(table.to_pylist(), batch_id, started)

    def write_rows(self, rows: list[dict[str, Any]], batch_id: int, started: float | None = None) -> None:
        started = self.clock() if started is None else started
        applied = self.snapshot.apply(rows)
        if applied.newest_event_ms is not None:
            self.monitor.mark_input_seen()
        if applied.newest_event_ms is not None and not self.monitor.event_time_reported:
            # The job did not report event times itself: the newest quorum clock stands in.
            self.monitor.input_delay_s = max(0.0, self.clock() - applied.newest_event_ms / 1000.0)
        stalled = self.monitor.input_stalled()
        if self.kafka is not None and applied.events:
            self.kafka.publish(applied.events)
        if self.console is not None:
            self.console.publish(self.snapshot, applied.events, batch_id, stalled)
        self.monitor.record_batch(self.clock() - started)
        if self.prometheus is not None:
            self.prometheus.publish(applied.changed_clusters, applied.vanished_clusters)

    def close(self) -> None:
        for sink in (self.prometheus, self.kafka, self.console):
            if sink is not None:
                sink.close()
