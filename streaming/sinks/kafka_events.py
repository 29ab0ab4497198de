"""Publish health events (transitions, closed caught-up windows, truncations, forgets, voter-set
changes, incarnations, rejected records) as JSON on a Kafka topic, exactly once for a consumer
that drops what it has seen.

Every event carries its quorum (`cluster_id`, `topic`, `partition`), `seq` (the quorum's event
sequence number, kept in the state store: a batch replayed after a restart repeats the same
numbers) and `batch_id` (the micro-batch that produced it); `held: true` marks events reached
while the whole input was stalled and published once it resumed. A consumer keeps, per quorum,
the highest `seq` it processed and drops anything at or below it. Records are keyed by quorum
(`cluster/topic-partition`, as on the events topic), so one quorum's events stay in order in one
partition.

A topic that cannot be reached never stops the job: events wait in a bounded buffer (the
oldest dropped first, counted) and are retried at every batch; the buffer is spooled to a file
next to the checkpoint, so a restart does not lose what was not yet delivered (a consumer drops
the duplicates a restart may cause).
"""
from __future__ import annotations

import json
import logging
import os
from collections import OrderedDict
from pathlib import Path
from typing import Any

from quorum.events import quorum_key

from quorum.kafka_client import kafka_client_properties, kafka_failures

from .config import KafkaSinkConfig

log = logging.getLogger(__name__)

DROP = ("kind", "event_seq", "seq", "proc_ms", "last_input_proc_ms", "silent")


def event_key(row: dict[str, Any]) -> bytes:
    return quorum_key(row["cluster_id"], row["topic"], int(row["partition"]))


def event_value(row: dict[str, Any], batch_id: int | None = None) -> bytes:
    body = {"event": row["kind"], "seq": row.get("event_seq")}
    if batch_id is not None:
        body["batch_id"] = batch_id
    body.update({k: v for k, v in row.items() if v is not None and k not in DROP})
    return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()


class KafkaEventsSink:
    def __init__(self, cfg: KafkaSinkConfig, spool_path: str | Path | None = None):
        from confluent_kafka import Producer
        self.cfg = cfg
        self.failures = kafka_failures.LibrdkafkaErrors()
        self.principal = kafka_client_properties.principal(cfg.client_properties())
        conf = {"bootstrap.servers": cfg.bootstrap_servers, "enable.idempotence": True, "linger.ms": 20,
                "message.timeout.ms": int(cfg.delivery_timeout_s * 1000), "error_cb": self.failures,
                **cfg.producer_settings()}
        self.producer = Producer(conf)
        self.spool = Path(spool_path) if spool_path else None
        # id -> [key, value, in flight]; insertion order is publication order
        self.pending: OrderedDict[int, list] = OrderedDict()
        self.next_id = 0
        self.dropped_total = 0
        self.healthy = True  # the last batch's events were all delivered
        self._load_spool()

    # --- buffer -----------------------------------------------------------------------------------

    def _add(self, key: bytes, value: bytes) -> None:
        self.pending[self.next_id] = [key, value, False]
        self.next_id += 1
        while len(self.pending) > self.cfg.buffer_events:
            self.pending.popitem(last=False)
            self.dropped_total += 1

    def _delivered(self, ident: int):
        def callback(err, msg) -> None:
            entry = self.pending.get(ident)
            if err is None:
                if entry is not None:
                    del self.pending[ident]
            else:
                self.failures(err)  # a refused login or a missing ACL, kept for the log
                if entry is not None:
                    entry[2] = False  # to be produced again at the next batch
        return callback

    # --- publishing -----------------------------------------------------------------------------

    def publish(self, events: list[dict[str, Any]], batch_id: int | None = None) -> None:
        """Queue one batch's events and try to deliver everything pending. Never raises."""
        for row in events:
            self._add(event_key(row), event_value(row, batch_id))
        for ident, entry in list(self.pending.items()):
            if entry[2]:
                continue  # still in the producer's hands
            try:
                self.producer.produce(self.cfg.topic, key=entry[0], value=entry[1], on_delivery=self._delivered(ident))
                entry[2] = True
            except BufferError:  # the producer's own queue is full: the rest waits for the next batch
                break
            except Exception as e:  # a producer that cannot take records must not stop the job
                log.warning("health events topic %r: %s", self.cfg.topic, e)
                break
        # Wait for deliveries while the topic answers; while it does not, do not hold up the job.
        self.producer.flush(self.cfg.flush_timeout_s if self.healthy else 0)
        self.healthy = not self.pending
        if not self.healthy:
            why = ""
            if self.failures.last is not None:  # a secured Kafka that refuses the producer, said so
                needs = f"WRITE on the topic {self.cfg.topic}"
                why = f": {kafka_failures.explain(self.failures.last[0], self.principal, needs)}"
            log.warning("health events topic %r: %d events not yet delivered (%d dropped so far)%s",
                        self.cfg.topic, len(self.pending), self.dropped_total, why)
        self._write_spool()

    # --- spool -------------------------------------------------------------------------------------

    def _write_spool(self) -> None:
        if self.spool is None:
            return
        try:
            if not self.pending:
                self.spool.unlink(missing_ok=True)
                return
            self.spool.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.spool.with_suffix(".tmp")
            with open(tmp, "w") as f:
                for key, value, _ in self.pending.values():
                    f.write(json.dumps([key.decode(), value.decode()]) + "\n")
            os.replace(tmp, self.spool)
        except OSError as e:
            log.warning("cannot spool undelivered health events to %s: %s", self.spool, e)

    def _load_spool(self) -> None:
        if self.spool is None or not self.spool.exists():
            return
        for line in self.spool.read_text().splitlines():
            try:
                key, value = json.loads(line)
            except ValueError:
                continue  # a torn last line
            self._add(key.encode(), value.encode())
        log.info("health events: %d undelivered events from %s to publish again", len(self.pending), self.spool)

    def close(self) -> None:
        if self.producer is None:
            return
        self.producer.flush(self.cfg.flush_timeout_s if self.healthy else 0)
        self._write_spool()
        self.producer = None  # librdkafka's client goes with its last reference (and stops retrying)
