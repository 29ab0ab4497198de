"""The health processors under PySpark's TwsTester (it runs a processor's handlers as Spark
does, with in-memory state and a settable clock), with the processing clock they also read."""
from __future__ import annotations

import base64
import json
from typing import Any

import pandas as pd
from pyspark.sql import Row
from pyspark.sql.streaming.tws_tester import TwsTester

from quorum.events import DEFAULT_MAX_FUTURE_MS
from streaming.health.buckets import (BUCKET_INPUT, BUCKET_STATE, BucketedHealthPandasProcessor, BucketedHealthProcessor,
                                     quorum_name)
from streaming.health.config import HealthConfig
from streaming.health.processor import QuorumHealthPandasProcessor, QuorumHealthRowProcessor
from streaming.health.schema import (HEALTH_COLUMNS, HEALTH_JSON, INPUT_COLUMNS, KEY_COLUMNS, PACKED_COLUMNS,
                                     RECORD_JSON, pack_record, unpack_health_row)

from .quorum_script import KEY

APIS = ["pandas", "row", "bucket", "bucket-pandas"]
BUCKETED = ("bucket", "bucket-pandas")
BUCKET = (7,)  # the bucket key under which the bucketed flavours get every quorum here


class Harness:
    """One processor under TwsTester, with the processing clock the processor also reads."""

    def __init__(self, api: str, cfg: HealthConfig | None = None, max_future_ms: int = DEFAULT_MAX_FUTURE_MS):
        self.api, self.cfg, self.proc_ms = api, cfg or HealthConfig(), 1_000_000
        cls = {"pandas": QuorumHealthPandasProcessor, "row": QuorumHealthRowProcessor,
               "bucket": BucketedHealthProcessor, "bucket-pandas": BucketedHealthPandasProcessor}[api]
        self.processor = cls(self.cfg, wall_clock_ms=lambda: self.proc_ms, max_future_ms=max_future_ms)
        self.offset = 0
        self.tester = TwsTester(self.processor, timeMode="ProcessingTime", outputMode="Update")
        self.tester.setProcessingTime(self.proc_ms)

    def _rows(self, out) -> list[dict[str, Any]]:
        """The packed rows as Spark expands them (every schema column)."""
        if isinstance(out, pd.DataFrame):  # no rows at all: a frame without columns
            texts = out[HEALTH_JSON].tolist() if HEALTH_JSON in out.columns else []
        else:
            texts = [r[HEALTH_JSON] for r in out]
        assert all(set(json.loads(t)) <= set(HEALTH_COLUMNS) for t in texts)
        return [unpack_health_row(t) for t in texts]

    def feed(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The records as the processor receives them: key columns and the packed record."""
        return self.feed_texts(KEY, _packed(records))

    def feed_raw(self, key: tuple, values: list[bytes | None]) -> list[dict[str, Any]]:
        """Records as they ride when Spark's fast path did not accept them: their bytes and
        Kafka position, for the processor to decide."""
        texts = []
        for value in values:
            wrapper = {"_quorum": dict(zip(KEY_COLUMNS, key))}
            if value is not None:  # Spark's to_json leaves a null out
                wrapper["_raw"] = base64.b64encode(value).decode()
            texts.append(json.dumps({**wrapper, "_key": "aw==", "_topic": "events", "_kafka_partition": 0,
                                     "_offset": self.offset, "_timestamp_ms": 1_000}))
            self.offset += 1
        return self.feed_texts(key, texts)

    def feed_quorums(self, records: dict[tuple, list[dict[str, Any]]]) -> list[dict[str, Any]]:
        """Several quorums' records in one call: the bucketed flavours get them all under their
        one bucket key, the others one call per quorum key."""
        if self.api not in BUCKETED:
            return [row for key, its in records.items() for row in self.feed_texts(key, _packed(its))]
        packed = [dict(zip(KEY_COLUMNS, key), **{RECORD_JSON: t}) for key, its in records.items() for t in _packed(its)]
        return self._test(BUCKET, packed)

    def spark_batch(self, proc_ms: int, records: dict[tuple, list[dict[str, Any]]]) -> list[dict[str, Any]]:
        """A micro-batch in Spark's order: its input at the batch's time, then the timers due by
        then (TwsTester's `setProcessingTime` would fire the timers first)."""
        self.proc_ms = self.tester._currentProcessingTimeMs = proc_ms
        rows = self.feed_quorums(records) if records else []
        return rows + self._rows(self.tester._handleExpiredTimers())

    def feed_texts(self, key: tuple, texts: list[str]) -> list[dict[str, Any]]:
        packed = [dict(zip(KEY_COLUMNS, key), **{RECORD_JSON: t}) for t in texts]
        return self._test(BUCKET if self.api in BUCKETED else key, packed)

    def _test(self, key: tuple, packed: list[dict[str, Any]]) -> list[dict[str, Any]]:
        columns = BUCKET_INPUT if self.api in BUCKETED else PACKED_COLUMNS  # as build_health_stream sends them
        packed = [{c: r[c] for c in columns} for r in packed]
        if self.api in ("pandas", "bucket-pandas"):
            return self._rows(self.tester.testInPandas(key, pd.DataFrame(packed, columns=columns)))
        return self._rows(self.tester.test(key, [Row(**r) for r in packed]))

    def stored(self, key: tuple) -> dict[str, Any] | None:
        """The quorum's state as the processor keeps it, None when it keeps none."""
        if self.api in BUCKETED:
            value = self.tester.peekValueState(BUCKET_STATE, BUCKET)
            return None if value is None else json.loads(value[0])["quorums"].get(quorum_name(key))
        assert not self.tester.peekMapState("replicas", key)  # the layout before, emptied
        value = self.tester.peekValueState("quorum", key)
        return None if value is None else json.loads(value[0])

    def advance(self, ms: int) -> list[dict[str, Any]]:
        """Let processing time pass with no input, one tick at a time; rows of every tick."""
        rows = []
        for _ in range(ms // self.cfg.tick_ms):
            self.proc_ms += self.cfg.tick_ms
            rows += self._rows(self.tester.setProcessingTime(self.proc_ms))
        return rows



def _packed(records: list[dict[str, Any]]) -> list[str]:
    return [pack_record({c: r.get(c) for c in INPUT_COLUMNS}) for r in records]
