"""A PySpark streaming data source that reads one Kafka topic with confluent-kafka (librdkafka).

Spark's own Kafka connector is a jar that is not always on the classpath; this source plays
its part with the same option names and the same columns (less `timestampType`/`headers`).

Driver side (`latestOffset`, `partitions`): ends are planned per partition from Fetch high
watermarks (see `high_watermarks`), capped by the read limit; Spark writes each planned
`[start, end)` to its offset log before running the batch and replays exactly that range after a
restart, so with `read` being a pure function of the range every offset is read exactly once.
Executor side (`read`): one task per group of ranges (small ranges share a task, see
`planning.group_ranges`), yielding Arrow record batches.
"""
from __future__ import annotations

import logging
from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadLimit, ReadMaxRows,
                                              SupportsTriggerAvailableNow)

from streaming.source.high_watermarks import HighWatermarkProbe, SourceUnavailable
from streaming.source.options import KafkaSourceOptions
from streaming.source.planning import (OffsetRange, cap_to_limit, group_ranges, make_offset, positions_of,
                                       ranges_between)
from streaming.source.range_reader import SPARK_SCHEMA_DDL, read_range

log = logging.getLogger(__name__)

FORMAT_NAME = "quorum_kafka"


class KafkaDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> str:
        return SPARK_SCHEMA_DDL

    def streamReader(self, schema) -> "KafkaStreamReader":
        return KafkaStreamReader(KafkaSourceOptions.parse(self.options))


class KafkaRangesPartition(InputPartition):
    """One read task: offset ranges of one or more Kafka partitions (see planning.group_ranges)."""

    def __init__(self, ranges: list[OffsetRange]):
        super().__init__(ranges)
        self.ranges = ranges


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: KafkaSourceOptions):
        # Built in the planner and pickled with `read` to executors: no client here, only options.
        self._options = options
        self._probe_client: HighWatermarkProbe | None = None
        self._target: dict[int, int] | None = None  # the availableNow end, once prepared

    @property
    def _probe(self) -> HighWatermarkProbe:
        if self._probe_client is None:
            self._probe_client = HighWatermarkProbe(self._options)
        return self._probe_client

    # -- driver side -------------------------------------------------------------------------

    def initialOffset(self) -> dict:
        partitions = self._probe.partitions()
        earliest = self._probe.earliest(partitions)
        if self._options.starting_offsets == "earliest":
            positions = earliest
        else:
            positions = self._probe.high_watermarks(earliest)
        return make_offset(self._options.topic, positions)

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self._options.max_offsets_per_trigger
        return ReadAllAvailable() if n is None else ReadMaxRows(n)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = positions_of(start, self._options.topic)
        try:
            partitions = self._probe.partitions()
            new = [p for p in partitions if p not in begin]
            if new:
                log.info("topic %s gained partitions %s; reading them from the earliest offset",
                         self._options.topic, new)
                begin.update(self._probe.earliest(new))
            highs = self._probe.high_watermarks(begin)
        except SourceUnavailable as e:
            # The broker is down or slow: plan nothing new; the job reports its input as stalled.
            log.warning("%s; no new records planned this trigger", e)
            return start
        if self._target is not None:
            highs = {p: min(h, self._target.get(p, begin[p])) for p, h in highs.items()}
        max_records = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return make_offset(self._options.topic, cap_to_limit(begin, highs, max_records))

    def prepareForTriggerAvailableNow(self) -> None:
        partitions = self._probe.partitions()
        self._target = self._probe.high_watermarks(self._probe.earliest(partitions))

    def reportLatestOffset(self) -> dict | None:
        known = self._probe_client._known if self._probe_client is not None else {}
        return make_offset(self._options.topic, known) if known else None

    def partitions(self, start: dict, end: dict) -> list[KafkaRangesPartition]:
        begin = positions_of(start, self._options.topic)
        finish = positions_of(end, self._options.topic)
        new = [p for p in finish if p not in begin]
        first = self._probe.earliest(new) if new else {}
        ranges = ranges_between(self._options.topic, begin, finish, first)
        return [KafkaRangesPartition(task) for task in group_ranges(ranges, min_tasks=self._options.min_partitions)]

    def commit(self, end: dict) -> None:
        # Progress lives in Spark's checkpoint; nothing is committed to Kafka.
        pass

    def stop(self) -> None:
        if self._probe_client is not None:
            self._probe_client.close()
            self._probe_client = None

    # -- executor side -----------------------------------------------------------------------

    def read(self, partition: KafkaRangesPartition) -> Iterator[pa.RecordBatch]:
        for rng in partition.ranges:
            yield from read_range(self._options, rng)
