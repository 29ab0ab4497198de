"""The collector's one producer of the events topic, for every cluster it watches: librdkafka
(confluent-kafka), which batches and sends on threads of its own in C, so that publishing a
fleet's records (four a cluster a second with node metrics) costs the collector's event loop a
few microseconds each; kafka-python's producer took more CPU than the polls themselves.

`publish()` never blocks: a record goes to librdkafka's queue (at most QUEUE_RECORDS), and one
that does not fit is dropped and counted. While the events Kafka cannot be reached, librdkafka
keeps retrying, and gives up on each record after DELIVERY_TIMEOUT_MS (the oldest first):
those are counted too (`dropped_total`), and the failure is named once in the log, as Kafka's
tools name it (a refused login, an untrusted certificate, a missing WRITE on the topic)."""
from __future__ import annotations

import logging
from typing import Any

from quorum import events
from quorum.kafka_client import kafka_client_properties, kafka_failures

log = logging.getLogger("quorum.kafka_watch.collector")

QUEUE_RECORDS = 100_000  # a minute of a 500-cluster fleet's records
DELIVERY_TIMEOUT_MS = 30_000
LINGER_MS = 20
SERVE_EVERY = 256  # records published between two services of librdkafka's callbacks


class EventsProducer:
    def __init__(self, bootstrap_servers: str, topic: str, properties: dict[str, str] | None = None,
                 client_id: str = "quorum-collector-events"):
        from confluent_kafka import Producer
        self.bootstrap_servers, self.topic = bootstrap_servers, topic
        props = dict(properties or {})
        self.principal = kafka_client_properties.principal(props)
        self.failures = kafka_failures.LibrdkafkaErrors()
        self._producer = Producer({
            "bootstrap.servers": bootstrap_servers, "client.id": client_id, "linger.ms": LINGER_MS,
            # one request in flight: each quorum's records stay in order through retries, with no
            # idempotent producer's rights to ask of the events Kafka (WRITE on the topic is enough)
            "acks": 1, "max.in.flight.requests.per.connection": 1,
            "partitioner": "murmur2_random",  # Kafka's partitioner, as every producer of the events topic
            "message.timeout.ms": DELIVERY_TIMEOUT_MS, "queue.buffering.max.messages": QUEUE_RECORDS,
            # a report for the records given up on alone: a Python callback per record delivered
            # cost the event loop more than the produce call itself
            "on_delivery": self._delivered, "delivery.report.only.error": True,
            "error_cb": self._error,
            "log_level": 0,  # librdkafka's every reconnect; failures are named once, here
            **kafka_client_properties.librdkafka_config(props, "quorum collect's events producer")})
        self._dropped = 0
        self._since_served = 0
        self.last_error: str | None = None

    @property
    def dropped_total(self) -> int:
        return self._dropped

    def publish(self, record: events.Record) -> None:
        try:
            self._producer.produce(self.topic, key=events.record_key(record), value=events.encode(record))
        except BufferError:
            self._dropped += 1
            self._note(f"the producer's queue is full ({QUEUE_RECORDS} records): the events Kafka does not keep up")
        self._since_served += 1
        if self._since_served >= SERVE_EVERY:
            self.serve()

    def serve(self) -> None:
        """Runs the delivery callbacks of what librdkafka has given up on."""
        self._since_served = 0
        self._producer.poll(0)

    def close(self, flush_timeout_s: float = 2.0) -> None:
        """Delivers what is queued for up to `flush_timeout_s`; what is left is dropped."""
        left = self._producer.flush(flush_timeout_s)
        self._dropped += left
        if left and self.last_error is None:
            self.last_error = self._explained() or "not connected"

    def _delivered(self, err: Any, _msg: Any) -> None:
        if err is None:
            return
        self._dropped += 1
        self.failures(err)
        self._note(self._explained() or f"{err.name()}: {err.str()}")

    def _error(self, err: Any) -> None:
        self.failures(err)
        named = self._explained()
        if named:
            self._note(named)

    def _explained(self) -> str | None:
        if self.failures.last is None:
            return None
        return kafka_failures.explain(self.failures.last[0], self.principal, f"WRITE on the topic {self.topic}")

    def _note(self, msg: str) -> None:
        if msg != self.last_error:
            log.warning("events topic %s on %s: %s", self.topic, self.bootstrap_servers, msg)
        self.last_error = msg
