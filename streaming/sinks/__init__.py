"""Outputs of the health stream (issue 5, "Outputs"): Prometheus, a Kafka topic, the console.

For the job:
    writer = make_batch_writer(sink_cfg, health_cfg)
    health_df.writeStream.foreachBatch(writer).trigger(processingTime=...).start()
    writer.monitor.record_input(n_records, newest_event_ms)   # per batch, from the source side
    writer.monitor.record_invalid({"invalid_json": 3, ...})  # per batch, dead letters by code
    listen_to_progress(spark, writer.monitor)                # optional, instead of record_input
    writer.close()                                            # on shutdown
"""
from __future__ import annotations

from streaming.health.config import HealthConfig

from .batch_writer import HealthBatchWriter
from .config import ConsoleSinkConfig, KafkaSinkConfig, PrometheusSinkConfig, SinkConfig
from .monitor import MonitorMetrics, listen_to_progress

__all__ = ["make_batch_writer", "HealthBatchWriter", "MonitorMetrics", "listen_to_progress", "SinkConfig",
           "PrometheusSinkConfig", "KafkaSinkConfig", "ConsoleSinkConfig"]


def make_batch_writer(sink_cfg: SinkConfig, health_cfg: HealthConfig,
                      monitor: MonitorMetrics | None = None, spool_path: str | None = None,
                      dead_letter_dir: str | None = None) -> HealthBatchWriter:
    """The foreachBatch function for `build_health_stream`'s output: a callable
    `(batch_df, batch_id) -> None` that also carries `.monitor` (the job's own health metrics,
    exported with the rest) and `.close()`. Starts the /metrics server in exporter mode.
    `spool_path`: where the health topic's undelivered events survive a restart;
    `dead_letter_dir`: where the decoder's rejects go, and those the state machine refuses (under
    `stateful/`), one file per batch (the job sets it from `dead_letters.path`)."""
    return HealthBatchWriter(sink_cfg, health_cfg, monitor, spool_path=spool_path, dead_letter_dir=dead_letter_dir)
