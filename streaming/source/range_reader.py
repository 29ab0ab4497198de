"""Read one planned offset range of one partition into Arrow record batches (executor side).

Reads exactly `[start, end)`: records before `start` or from `end` on are dropped, and the read
stops at `end` or at the end-of-partition event past it (offsets can have gaps: compaction,
transaction markers). A read that makes no progress for the stall timeout fails the task, so
Spark retries it instead of the query hanging or silently skipping records.
"""
from __future__ import annotations

import time
from typing import Iterator

import pyarrow as pa
from confluent_kafka import KafkaError, TopicPartition

from streaming.source.options import DEFAULT_POLL_TIMEOUT_S, KafkaSourceOptions, make_consumer
from streaming.source.planning import OffsetRange

ARROW_SCHEMA = pa.schema([
    ("key", pa.binary()),
    ("value", pa.binary()),
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("offset", pa.int64()),
    ("timestamp", pa.timestamp("us", tz="UTC")),
])
SPARK_SCHEMA_DDL = "key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp"
CONSUME_CHUNK = 10_000


class RangeReadError(RuntimeError):
    pass


def read_range(options: KafkaSourceOptions, rng: OffsetRange, chunk: int = CONSUME_CHUNK) -> Iterator[pa.RecordBatch]:
    consumer = make_consumer(options.consumer_config())
    try:
        consumer.assign([TopicPartition(rng.topic, rng.partition, rng.start)])
        position = rng.start
        last_progress = time.monotonic()
        while position < rng.end:
            msgs = consumer.consume(num_messages=min(chunk, rng.end - position), timeout=DEFAULT_POLL_TIMEOUT_S)
            good = []
            for m in msgs:
                err = m.error()
                if err is None:
                    off = m.offset()
                    if rng.start <= off < rng.end:
                        good.append(m)
                    if off + 1 > position:
                        position = off + 1
                elif err.code() == KafkaError._PARTITION_EOF:
                    if m.offset() >= rng.end:  # the partition ends past the range: nothing more to read
                        position = rng.end
                    elif m.offset() < rng.start:
                        raise RangeReadError(
                            f"{rng.topic}-{rng.partition} ends at {m.offset()}, before the planned range "
                            f"[{rng.start}, {rng.end}): the topic was recreated or the broker lost records")
                elif err.fatal() or err.code() in (KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET):
                    raise RangeReadError(f"reading {rng.topic}-{rng.partition} [{rng.start}, {rng.end}) at "
                                         f"{position}: {err}")
            if good:
                last_progress = time.monotonic()
                yield _to_batch(good)
            elif time.monotonic() - last_progress > options.read_stall_timeout_s:
                raise RangeReadError(f"no progress reading {rng.topic}-{rng.partition} at offset {position} "
                                     f"(range [{rng.start}, {rng.end})) for {options.read_stall_timeout_s:.0f}s")
    finally:
        consumer.close()


def _to_batch(msgs: list) -> pa.RecordBatch:
    n = len(msgs)
    topic = msgs[0].topic()
    partition = msgs[0].partition()
    # A timestamp of type NOT_AVAILABLE comes as -1: null, not 1969.
    stamps = [m.timestamp() for m in msgs]
    return pa.RecordBatch.from_arrays([
        pa.array([m.key() for m in msgs], type=pa.binary()),
        pa.array([m.value() for m in msgs], type=pa.binary()),
        pa.array([topic] * n, type=pa.string()),
        pa.array([partition] * n, type=pa.int32()),
        pa.array([m.offset() for m in msgs], type=pa.int64()),
        pa.array([ts * 1000 if kind != 0 and ts >= 0 else None for kind, ts in stamps],
                 type=pa.timestamp("us", tz="UTC")),
    ], schema=ARROW_SCHEMA)
