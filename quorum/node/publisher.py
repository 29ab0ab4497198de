"""Publishing event records to the events topic without ever holding up the Raft loop.

`publish()` only appends to a bounded in-memory buffer and returns. A background thread
moves records from the buffer to kafka-python's producer (which batches and reconnects
on its own) and re-creates the producer if the broker was unreachable at start. When the
buffer is full the oldest record is dropped; records the producer gives up on (broker
down longer than the delivery timeout) are dropped too. Both are counted in
`dropped_total`, which the node puts in every `metrics` record (`dropped_events_total`),
so a gap in the events is itself visible in the events.
"""
from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Any

from quorum import events
from quorum.kafka_client import kafka_failures

log = logging.getLogger(__name__)
BOOTSTRAP_TIMEOUT_MS = 5000  # a producer that cannot connect is retried (and its failure said) this often
DIAGNOSE_EVERY_S = 30.0  # a failing producer's own login is tried at most this often

DEFAULT_BUFFER_RECORDS = 10_000
DEFAULT_LINGER_MS = 20
DEFAULT_DELIVERY_TIMEOUT_MS = 30_000


class EventPublisher:
    def __init__(self, bootstrap_servers: str, topic: str, *, buffer_records: int = DEFAULT_BUFFER_RECORDS,
                 linger_ms: int = DEFAULT_LINGER_MS, delivery_timeout_ms: int = DEFAULT_DELIVERY_TIMEOUT_MS,
                 client_config: dict[str, Any] | None = None, client_id: str = "quorum-node",
                 principal: str | None = None):
        if buffer_records <= 0:
            raise ValueError("buffer_records must be positive")
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.linger_ms = linger_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.client_config = dict(client_config or {})
        self.principal = principal
        self._diagnosis: tuple[float, str | None] = (-DIAGNOSE_EVERY_S, None)  # (when, what) of the last login probe
        self.client_id = client_id
        self._buffer: collections.deque[tuple[bytes, bytes]] = collections.deque()
        self._capacity = buffer_records
        self._lock = threading.Lock()
        self._wakeup = threading.Event()
        self._stopping = threading.Event()
        self._dropped = 0
        self.sent = 0            # records the broker acknowledged
        self.connected = False
        self.last_error: str | None = None
        self._thread = threading.Thread(target=self._run, name="event-publisher", daemon=True)

    # --- called from the Raft loop: never blocks --------------------------------------------------

    def publish(self, record: events.Record) -> None:
        self.publish_raw(events.record_key(record), events.encode(record))

    def publish_raw(self, key: bytes, value: bytes) -> None:
        with self._lock:
            if len(self._buffer) >= self._capacity:
                self._buffer.popleft()
                self._dropped += 1
            self._buffer.append((key, value))
        self._wakeup.set()

    @property
    def dropped_total(self) -> int:
        return self._dropped

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    # --- lifecycle ----------------------------------------------------------------------------------

    def start(self) -> "EventPublisher":
        # kafka-python loaded here, before the thread imports it: two threads importing its
        # modules at once deadlock (the caller's admin client, say)
        import kafka  # noqa: F401
        self._thread.start()
        return self

    def close(self, flush_timeout_s: float = 2.0) -> None:
        """Try to deliver what is buffered for up to `flush_timeout_s`, then stop."""
        deadline = time.monotonic() + flush_timeout_s
        while self._buffer and self.connected and time.monotonic() < deadline:
            self._wakeup.set()
            time.sleep(0.01)
        self._flush_deadline = deadline
        self._stopping.set()
        self._wakeup.set()
        self._thread.join(flush_timeout_s + 1)
        with self._lock:
            undelivered, self._dropped = len(self._buffer), self._dropped + len(self._buffer)
            self._buffer.clear()
        if undelivered and self.last_error is None:
            named = self._diagnosed()  # the producer never got as far as an error of its own
            self.last_error = kafka_failures.explain(named, self.principal) if named else "not connected"

    # --- background thread --------------------------------------------------------------------------

    def _make_producer(self):
        from kafka import KafkaProducer
        return KafkaProducer(
            bootstrap_servers=self.bootstrap_servers, acks=1,
            enable_idempotence=False, linger_ms=self.linger_ms, max_block_ms=1000, bootstrap_timeout_ms=BOOTSTRAP_TIMEOUT_MS,
            delivery_timeout_ms=self.delivery_timeout_ms, request_timeout_ms=min(10_000, self.delivery_timeout_ms),
            max_in_flight_requests_per_connection=1,  # keep per-key order across retries
            reconnect_backoff_max_ms=1000, **{"client_id": self.client_id, **self.client_config})

    def _run(self) -> None:
        producer = None
        backoff = 0.1
        while not self._stopping.is_set() or (producer is not None and self._buffer
                                              and time.monotonic() < getattr(self, "_flush_deadline", 0)):
            if producer is None:
                try:
                    producer = self._make_producer()
                    self.connected = True
                    backoff = 0.1
                except Exception as e:  # broker down or misconfigured: retry, keep buffering
                    self._note_error(e)
                    self._stopping.wait(backoff)
                    backoff = min(backoff * 2, 2.0)
                    continue
            self._wakeup.wait(0.1)
            self._wakeup.clear()
            while True:
                with self._lock:
                    if not self._buffer:
                        break
                    key, value = self._buffer.popleft()
                try:
                    fut = producer.send(self.topic, key=key, value=value)
                    fut.add_callback(self._on_sent).add_errback(self._on_failed)
                except Exception as e:  # metadata unavailable within max_block_ms: put it back
                    self._note_error(e)
                    with self._lock:
                        if len(self._buffer) >= self._capacity:
                            self._dropped += 1
                        else:
                            self._buffer.appendleft((key, value))
                    self.connected = False
                    self._stopping.wait(0.2)
                    break
        if producer is not None:
            try:
                producer.close(timeout=1)
            except Exception:
                pass

    def _on_sent(self, _metadata) -> None:
        self.sent += 1
        self.connected = True

    def _on_failed(self, exc) -> None:
        with self._lock:
            self._dropped += 1
        self._note_error(exc)

    def _diagnosed(self) -> str | None:
        """Why a secured Kafka refuses the producer, which sees only timeouts: one login of its
        own (kafka_login_probe.py), tried at most every DIAGNOSE_EVERY_S."""
        when, what = self._diagnosis
        if time.monotonic() - when >= DIAGNOSE_EVERY_S:
            found = kafka_failures.diagnose(self.bootstrap_servers, self.client_config, 2.0)
            self._diagnosis = (time.monotonic(), found[0] if found else None)
        return self._diagnosis[1]

    def _note_error(self, e: BaseException) -> None:
        named = kafka_failures.name_of(e) or self._diagnosed()
        msg = kafka_failures.explain(named, self.principal, f"WRITE on the topic {self.topic}") if named \
            else f"{type(e).__name__}: {e}"
        if msg != self.last_error:
            log.warning("events topic %s on %s: %s (buffering, dropping oldest when full)",
                        self.topic, self.bootstrap_servers, msg)
        self.last_error = msg
