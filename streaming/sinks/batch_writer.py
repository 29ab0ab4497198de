"""The foreachBatch body: health rows of one micro-batch -> snapshot -> Prometheus, Kafka, console."""
from __future__ import annotations

import json
import logging
import time
from collections import Counter
from typing import Any, Callable

from streaming.health.config import HealthConfig
from streaming.health.schema import DEAD_LETTER_KIND, HEALTH_COLUMNS

from .config import SinkConfig
from .dead_letters import DeadLetterFiles
from .monitor import MonitorMetrics
from .snapshot import HealthSnapshot

log = logging.getLogger(__name__)


class HealthBatchWriter:
    """Callable `(batch_df, batch_id)` for `writeStream.foreachBatch`.

    `monitor` is the job's own health (`MonitorMetrics`): the job reports its input to it
    (`writer.monitor.record_input(...)`); this writer counts the rejects (`dead_letter` and
    `rejected` rows) by reason, records batch timing and push failures, and exports it with the
    rest. `write_rows` is the same without Spark.
    """

    def __init__(self, sink_cfg: SinkConfig, health_cfg: HealthConfig, monitor: MonitorMetrics | None = None,
                 clock: Callable[[], float] = time.time, spool_path: str | None = None,
                 dead_letter_dir: str | None = None):
        self.sink_cfg, self.health_cfg, self.clock = sink_cfg, health_cfg, clock
        self.monitor = monitor or MonitorMetrics(health_cfg, clock=clock)
        # a poller may poll every half of unreachable_after_ms (quorum collect refuses slower)
        self.snapshot = HealthSnapshot(max_cadence_ms=2 * health_cfg.unreachable_after_ms)
        self._event_listeners: list[Callable[[list[dict[str, Any]]], None]] = []
        # the decoder's rejects and the records the state machine refused; without a directory
        # they are only counted
        self.dead_letters = DeadLetterFiles(dead_letter_dir) if dead_letter_dir else None
        self.refused = DeadLetterFiles(f"{dead_letter_dir.rstrip('/')}/stateful") if dead_letter_dir else None
        self._spark = None  # the batch's session: it writes dead letters to a path with a scheme
        self._dead_by_batch: dict[int, int] = {}  # dead letters of the last few batches, for the log
        self.prometheus = self._make_prometheus()
        self.kafka = None
        if sink_cfg.kafka.enabled:
            from .kafka_events import KafkaEventsSink
            self.kafka = KafkaEventsSink(sink_cfg.kafka, spool_path)
        self.console = None
        if sink_cfg.console.enabled:
            from .console import ConsoleSink
            self.console = ConsoleSink(sink_cfg.console)

    def add_event_listener(self, listener: Callable[[list[dict[str, Any]]], None]) -> None:
        """`listener(events)` after every batch, with the health events it applied (transitions,
        reminders, retractions), before the sinks publish them: for the tools and tests that watch
        verdicts as they are made. A listener that raises fails the batch."""
        self._event_listeners.append(listener)

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
        self._spark = batch_df.sparkSession
        # No `select` of the columns in Spark: PySpark makes a JVM call per column named (52),
        # about 75 ms of every micro-batch before its job could start.
        self.write_rows(health_rows(batch_df.toArrow()), batch_id, started)

    def write_rows(self, rows: list[dict[str, Any]], batch_id: int, started: float | None = None) -> None:
        started = self.clock() if started is None else started
        dead = [r for r in rows if r["kind"] == DEAD_LETTER_KIND]
        if dead:
            rows = [r for r in rows if r["kind"] != DEAD_LETTER_KIND]
            # First: a failure here fails the batch, which is replayed; nothing rejected is lost.
            if self.dead_letters is not None:
                self.dead_letters.write(batch_id, [r["dead_letter"] for r in dead], self._spark)
            self.monitor.record_invalid(Counter(r["status"] for r in dead))
        self._dead_by_batch[batch_id] = len(dead)
        for old in [b for b in self._dead_by_batch if b < batch_id - 16]:
            del self._dead_by_batch[old]
        applied = self.snapshot.apply(rows)
        for listener in self._event_listeners:
            listener(applied.events)
        if applied.newest_event_ms is not None:
            self.monitor.mark_input_seen()
        if applied.newest_event_ms is not None and not self.monitor.event_time_reported:
            # The job did not report event times itself: the newest quorum clock stands in.
            self.monitor.input_delay_s = max(0.0, self.clock() - applied.newest_event_ms / 1000.0)
        stalled = self.monitor.input_stalled()
        self._rejected([r for r in rows if r["kind"] == "rejected"], batch_id)
        if applied.held_events_dropped:
            log.warning("%d held health events dropped (a quorum held for too long)", applied.held_events_dropped)
        # Each sink on its own: one that fails is counted and retried, and never stops the others
        # or the query (the Prometheus push, which pages, goes first).
        self.monitor.record_batch(self.clock() - started)
        self._guarded("prometheus", self.prometheus and (
            lambda: self.prometheus.publish(urgent=status_changed(applied.events))))
        self._guarded("kafka", self.kafka and (lambda: self._publish_events(applied.events, batch_id)))
        self._guarded("console", self.console and (
            lambda: self.console.publish(self.snapshot, applied.events, batch_id, stalled)))

    def dead_letters_in(self, batch_id: int | None) -> int:
        """Dead letters written for a recent batch (0 when unknown)."""
        return self._dead_by_batch.get(batch_id, 0) if batch_id is not None else 0

    def _rejected(self, rejected: list[dict[str, Any]], batch_id: int) -> None:
        """Records the state machine refused (an implausible epoch): counted like the decoder's
        rejects, by reason, and written as JSON lines under the dead-letter path's `stateful`
        directory, one file per batch like the decoder's. A write that fails is logged and
        never fails the batch: the refusal is counted and in the log either way."""
        if not rejected:
            return
        for r in rejected:
            log.warning("rejected (%s) in %s %s-%s: %s", r["status"], r["cluster_id"], r["topic"], r["partition"],
                        r["reason"])
        self.monitor.record_invalid(Counter(r["status"] for r in rejected))
        if self.refused is None:
            return
        now_ms = int(self.clock() * 1000)
        lines = [json.dumps({"reason": r["status"], "detail": r["reason"], "cluster_id": r["cluster_id"],
                             "topic": r["topic"], "partition": r["partition"], "dead_lettered_at_ms": now_ms})
                 for r in rejected]
        try:
            self.refused.write(batch_id, lines, self._spark)
        except Exception as e:  # OSError here, a Java exception through Hadoop's file system
            log.warning("cannot write rejected records under %s: %s", self.refused.path, e)

    def _publish_events(self, events: list[dict[str, Any]], batch_id: int) -> None:
        self.kafka.publish(events, batch_id)
        self.monitor.record_health_events(len(self.kafka.pending), self.kafka.dropped_total)
        if self.kafka.pending:
            self.monitor.record_sink_failure("kafka")

    def _guarded(self, sink: str, action) -> None:
        if not action:
            return
        try:
            action()
        except Exception:
            log.exception("sink %s failed for this batch", sink)
            self.monitor.record_sink_failure(sink)

    def flush(self, timeout_s: float | None = 60) -> bool:
        """Wait for the sinks that publish off the batch (the Pushgateway's pusher) to catch up."""
        flush = getattr(self.prometheus, "flush", None)
        return flush(timeout_s) if flush else True

    def close(self) -> None:
        for sink in (self.prometheus, self.kafka, self.console):
            if sink is not None:
                sink.close()


def health_rows(table) -> list[dict[str, Any]]:
    """A health batch's rows (an Arrow table of the health stream's columns, `HEALTH_SCHEMA`)
    as dicts; columns of its own that a frame carries besides are left out."""
    if table.column_names != HEALTH_COLUMNS:
        missing = [c for c in HEALTH_COLUMNS if c not in table.column_names]
        if missing:
            raise ValueError(f"not a health batch: no column {', '.join(missing)} (the writer takes the rows "
                             "of streaming.health.build_health_stream)")
        table = table.select(HEALTH_COLUMNS)
    return table.to_pylist()


def status_changed(events: list[dict[str, Any]]) -> bool:
    """A status or cause changed in a batch: the metrics are pushed at once."""
    return any(e["kind"] in ("transition", "cause") for e in events)
