"""The job's own health: input volume, rejects, batch timing, input stalls, push failures.

One `MonitorMetrics` per job, on the driver. The job (source and decode side) reports what
only it knows — `record_input(records, newest_event_ms)` and `record_invalid({reason: n})`
per micro-batch — and the batch writer reports batch timing and push failures. A query
listener can feed it instead: `listen_to_progress(spark, monitor)` reads input rows and batch
duration from each query progress (`observe_progress`).

`input_stalled()` is the job saying "I see nothing at all" (broker down, topic idle): no input
record for `input_stall_after_ms`. While it holds, the batch writer keeps the last verdicts
instead of publishing silence-derived ones (see snapshot.py).
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Mapping

from streaming.health.config import HealthConfig


class MonitorMetrics:
    def __init__(self, health_cfg: HealthConfig, clock: Callable[[], float] = time.time):
        self.cfg = health_cfg
        self.clock = clock
        self._lock = threading.Lock()  # the listener thread and the batch thread both report
        self.started_s = clock()
        self.input_records_total = 0
        self.invalid_records_total: dict[str, int] = {}
        self.batch_duration_s: float | None = None
        self.input_delay_s: float | None = None
        self.last_batch_s: float | None = None
        self.last_input_s: float | None = None
        self.push_failures_total = 0
        self.sink_failures_total: dict[str, int] = {}   # sink -> batches whose output failed
        self.health_events_pending = 0                  # health events not yet delivered
        self.health_events_dropped_total = 0            # health events dropped from a full buffer
        self.event_time_reported = False  # the job passes event times; else the writer estimates

    # --- reported by the job ------------------------------------------------------------------

    def record_input(self, records: int, newest_event_ms: int | None = None) -> None:
        """Records read in one micro-batch (valid and invalid) and the newest event time among them."""
        with self._lock:
            self.input_records_total += int(records)
            now = self.clock()
            if records > 0:
                self.last_input_s = now
            if newest_event_ms is not None and newest_event_ms >= 0:
                self.event_time_reported = True
                self.input_delay_s = max(0.0, now - newest_event_ms / 1000.0)

    def mark_input_seen(self) -> None:
        """Some quorum had input in this batch (the writer sees it in the health rows), so the
        input is alive even if the job does not call `record_input`."""
        with self._lock:
            self.last_input_s = self.clock()

    def record_invalid(self, counts_by_reason: Mapping[str, int]) -> None:
        """Dead-lettered records of one micro-batch, by `ContractError.code`."""
        with self._lock:
            for reason, n in counts_by_reason.items():
                self.invalid_records_total[reason] = self.invalid_records_total.get(reason, 0) + int(n)

    def record_batch(self, duration_s: float) -> None:
        with self._lock:
            self.batch_duration_s = float(duration_s)
            self.last_batch_s = self.clock()

    def record_push_failures(self, n: int = 1) -> None:
        with self._lock:
            self.push_failures_total += n

    def record_sink_failure(self, sink: str) -> None:
        with self._lock:
            self.sink_failures_total[sink] = self.sink_failures_total.get(sink, 0) + 1

    def record_health_events(self, pending: int, dropped_total: int) -> None:
        with self._lock:
            self.health_events_pending, self.health_events_dropped_total = pending, dropped_total

    def observe_progress(self, progress: Mapping[str, Any]) -> None:
        """Feed from a StreamingQueryProgress (as a dict, e.g. `json.loads(progress.json)`)."""
        self.record_input(int(progress.get("numInputRows") or 0))
        duration_ms = (progress.get("durationMs") or {}).get("triggerExecution")
        if duration_ms is not None:
            self.record_batch(duration_ms / 1000.0)

    # --- read by the sinks ----------------------------------------------------------------------

    def input_stalled(self) -> bool:
        since = self.last_input_s if self.last_input_s is not None else self.started_s
        return (self.clock() - since) * 1000.0 >= self.cfg.input_stall_after_ms

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {"input_records_total": self.input_records_total,
                    "invalid_records_total": dict(self.invalid_records_total),
                    "batch_duration_s": self.batch_duration_s, "input_delay_s": self.input_delay_s,
                    "last_batch_s": self.last_batch_s, "input_stalled": self.input_stalled(),
                    "push_failures_total": self.push_failures_total,
                    "sink_failures_total": dict(self.sink_failures_total),
                    "health_events_pending": self.health_events_pending,
                    "health_events_dropped_total": self.health_events_dropped_total}


def listen_to_progress(spark, monitor: MonitorMetrics):
    """Feeds every query's progress to `monitor` until the returned listener's `remove()`."""
    from streaming.progress_listener import ProgressListener
    return ProgressListener(spark, monitor.observe_progress)
