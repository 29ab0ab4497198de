"""Where each partition ends, learned from Fetch responses (driver side).

Why not ListOffsets(latest)? The embedded broker answers it with the last batch's base offset
+ 1, below records that are already readable: planning ends from it would leave records
behind a batch boundary, and the next plan would start from the same wrong place. The high
watermark that every Fetch response carries is right, and librdkafka keeps the last one it
saw per partition (`get_watermark_offsets(cached=True)`).

So the probe fetches: for each partition it seeks to a known lower bound of the end (the last
high watermark it saw, or the partition's start) and waits for the first answer of that fetch,
a record or the end-of-partition event. Small fetch sizes keep that answer to one small batch,
so the driver does not read the topic a second time.
"""
from __future__ import annotations

import logging
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from streaming.source.options import KafkaSourceOptions, make_consumer

log = logging.getLogger(__name__)


class SourceUnavailable(RuntimeError):
    """The broker or topic did not answer in time."""


class HighWatermarkProbe:
    def __init__(self, options: KafkaSourceOptions):
        self._options = options
        self._consumer: Consumer | None = None
        self._known: dict[int, int] = {}  # last high watermark seen per partition, only grows

    def _client(self) -> Consumer:
        if self._consumer is None:
            self._consumer = make_consumer(self._options.consumer_config(**{
                # One small batch per answer, and no read-ahead: the probe wants watermarks, not data.
                # Short waits and backoffs: an idle partition answers (end of partition) in ~50 ms
                # instead of ~1.1 s with the client's defaults (measured on the embedded broker).
                "fetch.wait.max.ms": 10,
                "fetch.error.backoff.ms": 10,
                "fetch.queue.backoff.ms": 10,
                "max.partition.fetch.bytes": 1024,
                "queued.min.messages": 1,
                "queued.max.messages.kbytes": 64,
            }))
        return self._consumer

    def partitions(self) -> list[int]:
        """The topic's partitions, from metadata."""
        topic = self._options.topic
        try:
            md = self._client().list_topics(topic, timeout=self._options.probe_timeout_s).topics.get(topic)
        except KafkaException as e:
            raise SourceUnavailable(f"cannot read metadata of topic {topic!r} from "
                                    f"{self._options.bootstrap_servers}: {e}") from None
        if md is None or md.error is not None or not md.partitions:
            why = md.error if md is not None and md.error is not None else "no partitions"
            raise SourceUnavailable(f"topic {topic!r} is not available on {self._options.bootstrap_servers}: {why}")
        return sorted(md.partitions)

    def earliest(self, partitions: list[int]) -> dict[int, int]:
        """Each partition's first offset (ListOffsets(earliest) is sound on every broker)."""
        c = self._client()
        out = {}
        for p in partitions:
            try:
                low, _ = c.get_watermark_offsets(TopicPartition(self._options.topic, p),
                                                 timeout=self._options.probe_timeout_s, cached=False)
            except KafkaException as e:
                raise SourceUnavailable(f"cannot list the earliest offset of {self._options.topic}-{p}: {e}") from None
            out[p] = max(low, 0)
        return out

    def high_watermarks(self, lower_bounds: dict[int, int | None]) -> dict[int, int]:
        """The high watermark of each partition as of now. `lower_bounds[p]` is an offset known to
        be at or below the end (None: unknown, the probe then starts at the beginning). A partition
        that does not answer within the probe timeout keeps its last known watermark (or its lower
        bound): the caller then plans no new records for it rather than guessing."""
        topic = self._options.topic
        c = self._client()
        positions = {}
        for p, bound in lower_bounds.items():
            known = self._known.get(p)
            candidates = [v for v in (known, bound) if v is not None]
            positions[p] = max(candidates) if candidates else OFFSET_BEGINNING
        c.assign([TopicPartition(topic, p, off) for p, off in sorted(positions.items())])
        pending = set(positions)
        deadline = time.monotonic() + self._options.probe_timeout_s
        try:
            while pending and time.monotonic() < deadline:
                for msg in c.consume(num_messages=len(pending), timeout=0.02):
                    err = msg.error()
                    if err is not None and err.code() != KafkaError._PARTITION_EOF:
                        if err.code() == KafkaError._AUTO_OFFSET_RESET or err.code() == KafkaError.OFFSET_OUT_OF_RANGE:
                            raise SourceUnavailable(
                                f"{topic}-{msg.partition()}: offset {positions.get(msg.partition())} is out of range "
                                f"(the topic was recreated or records were deleted before being read): {err}")
                        log.warning("probe of %s: %s", topic, err)
                        continue
                    pending.discard(msg.partition())
        finally:
            c.unassign()
        if pending:
            log.warning("no fetch answer within %.1fs for %s partitions %s; planning no new records for them",
                        self._options.probe_timeout_s, topic, sorted(pending))
        out = {}
        for p in positions:
            _, high = c.get_watermark_offsets(TopicPartition(topic, p), cached=True)
            if p in pending or high < 0:
                fallback = [v for v in (self._known.get(p), lower_bounds.get(p)) if v is not None]
                high = max(fallback) if fallback else 0
            self._known[p] = max(high, self._known.get(p, high))
            out[p] = self._known[p]
        return out

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
