"""Producing test records in many separate Kafka batches."""
from __future__ import annotations

from confluent_kafka import Producer


def produce_in_batches(bootstrap: str, topic: str, batches: int, per_batch: int, partitions: int,
                       first: int = 0) -> int:
    """Write `batches * per_batch` records, flushing after each batch so that every partition's
    log holds many record batches. Values are b"<n>" with n counting from `first`; returns the next n."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
    n = first
    for _ in range(batches):
        for _ in range(per_batch):
            producer.produce(topic, value=str(n).encode(), key=str(n).encode(), partition=n % partitions)
            n += 1
        assert producer.flush(30) == 0, "records left unsent"
    return n
