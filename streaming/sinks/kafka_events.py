"""Publish health events (transitions, closed caught-up windows, truncations, forgets) as JSON.

One Kafka record per event, keyed like the events topic (`cluster/topic-partition/replica`, or
`.../quorum` for quorum events) so a consumer sees one replica's history in order. The value is
the event row without its null columns, plus `event` (the kind). Delivery is confirmed at the
end of each batch (`flush`); an undelivered event raises, failing the batch so Spark retries it
rather than losing it.
"""
from __future__ import annotations

import json
from typing import Any

from quorum.events import QUORUM_KEY, key_of

from .config import KafkaSinkConfig

DROP = ("kind", "seq", "proc_ms", "last_input_proc_ms")


def event_key(row: dict[str, Any]) -> bytes:
    replica = QUORUM_KEY if row.get("replica_id") is None else row["replica_id"]
    return key_of(row["cluster_id"], row["topic"], int(row["partition"]), replica)


def event_value(row: dict[str, Any]) -> bytes:
    body = {"event": row["kind"]}
    body.update({k: v for k, v in row.items() if v is not None and k not in DROP})
    return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()


class KafkaEventsSink:
    def __init__(self, cfg: KafkaSinkConfig):
        from confluent_kafka import Producer
        self.cfg = cfg
        conf = {"bootstrap.servers": cfg.bootstrap_servers, "enable.idempotence": True, "linger.ms": 20}
        conf.update(cfg.producer_config)
        self.producer = Producer(conf)
        self.errors: list[str] = []

    def _delivered(self, err, msg) -> None:
        if err is not None:
            self.errors.append(str(err))

    def publish(self, events: list[dict[str, Any]]) -> None:
        for row in events:
            while True:
                try:
                    self.producer.produce(self.cfg.topic, key=event_key(row), value=event_value(row),
                                          on_delivery=self._delivered)
                    break
                except BufferError:  # local queue full: let deliveries drain, then retry
                    self.producer.poll(0.1)
            self.producer.poll(0)
        remaining = self.producer.flush(self.cfg.flush_timeout_s)
        if remaining or self.errors:
            errors, self.errors = self.errors, []
            raise RuntimeError(f"health events topic {self.cfg.topic!r}: {remaining} undelivered, "
                               f"errors: {errors[:3]}")

    def close(self) -> None:
        self.producer.flush(self.cfg.flush_timeout_s)
