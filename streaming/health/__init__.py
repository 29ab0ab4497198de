"""Per-replica and per-quorum health state (issue 5, "State").

Entry point for the job: `build_health_stream(events_df, health_cfg)`.
"""
from __future__ import annotations

from quorum.events import DEFAULT_MAX_FUTURE_MS

from .config import ConfigError, HealthConfig
from .schema import (HEALTH_COLUMNS, HEALTH_JSON, HEALTH_SCHEMA, INPUT_COLUMNS, KEY_COLUMNS, KINDS,
                     PACKED_HEALTH_SCHEMA, RECORD_JSON)
from .statuses import QUORUM_STATUSES, REPLICA_STATUSES

__all__ = ["build_health_stream", "health_input", "packed_input", "HealthConfig", "ConfigError", "HEALTH_SCHEMA", "HEALTH_COLUMNS", "KINDS",
           "REPLICA_STATUSES", "QUORUM_STATUSES"]


def _usable():
    """A record with no quorum key or no event time cannot be placed (decode rejects those
    already; this keeps the processor safe if it is fed from elsewhere)."""
    from pyspark.sql import functions as F
    usable = F.lit(True)
    for c in KEY_COLUMNS + ["time_ms", "type"]:
        usable = usable & F.col(c).isNotNull()
    return usable


def _present(events_df) -> list[str]:
    return [c for c in INPUT_COLUMNS if c in events_df.columns]


def health_input(events_df):
    """The columns the processor reads, of the records it can use."""
    return events_df.select(*_present(events_df)).where(_usable())


def packed_input(events_df):
    """`health_input`, each record packed into one JSON column next to its quorum key
    (`PACKED_COLUMNS`): the shape the processor receives (see schema.RECORD_JSON for why). A
    frame that is in that shape already (the job's `streaming.decode.route_records`, where
    records Spark did not accept ride raw, to be decided by the processor) is taken as it is."""
    from pyspark.sql import functions as F
    if RECORD_JSON in events_df.columns:
        return events_df.select(*KEY_COLUMNS, RECORD_JSON)
    record = F.to_json(F.struct(*_present(events_df)), {"ignoreNullFields": "true"})
    return health_input(events_df).select(*KEY_COLUMNS, record.alias(RECORD_JSON))


def build_health_stream(events_df, health_cfg: HealthConfig, api: str | None = None,
                        max_future_ms: int = DEFAULT_MAX_FUTURE_MS, buckets: int = 0,
                        state_version: int | None = None):
    """Health rows (schema `HEALTH_SCHEMA`, see schema.py) from the stream of valid events.

    `events_df`: the decoded valid records, columns of `streaming.event_schema.envelope_spark_schema()`
    (extra columns are ignored). The result is a streaming DataFrame in Update output mode that
    emits, on input and on every processing-time tick (`health_cfg.tick_ms`), a snapshot of each
    quorum (`kind` = quorum and replica rows) plus events (transition, window, truncation, forget).
    Feed it to `writeStream.foreachBatch(streaming.sinks.make_batch_writer(...))` with a
    processing-time trigger (timers fire only when micro-batches run) and a checkpoint location
    (the state lives in the RocksDB state store configured by `build_spark`).

    Or `events_df` is the job's routed input (`streaming.decode.route_records`): the records
    Spark did not accept are decided by `quorum.events.decode` in the processor (stamps more than
    `max_future_ms` ahead of the wall clock refused), and the rejects come out as `dead_letter`
    rows.

    `buckets`: 0 keeps one quorum per state key (`processor`); N > 0 keeps the quorums in N
    buckets (`buckets`, the job's layout for a new checkpoint). N must stay the same for the life
    of the checkpoint: `streaming.state_layout.health_state_layout` reads it back. `api`
    ("pandas" or "row") overrides the flavour; the default is the measured choice for the layout
    (`processor.HEALTH_API`, `buckets.BUCKETED_HEALTH_API`). `state_version`: the version the
    checkpoint's quorums were written in (`state.py`; the layout file records it), default this
    job's.

    Note for drivers and tests: with processing-time timers the operator asks for a (no-data)
    micro-batch at every trigger, so `trigger(availableNow=True)` never finishes and
    `query.processAllAvailable()` never returns on this stream. Wait for a condition instead
    (e.g. the batch writer's snapshot, or input rows counted by a StreamingQueryListener).
    """
    from pyspark.sql import functions as F

    from .processor import HEALTH_API, QuorumHealthPandasProcessor, QuorumHealthRowProcessor
    packed_records = packed_input(events_df)
    if buckets > 0:
        from .buckets import (BUCKET_COLUMN, BUCKET_INPUT, BUCKETED_HEALTH_API, BucketedHealthPandasProcessor,
                              BucketedHealthProcessor, bucket_column)
        api = api or BUCKETED_HEALTH_API
        grouped = packed_records.select(bucket_column(buckets), *BUCKET_INPUT).groupBy(BUCKET_COLUMN)
        flavours = {"pandas": BucketedHealthPandasProcessor, "row": BucketedHealthProcessor}
    else:
        api = api or HEALTH_API
        grouped = packed_records.groupBy(*KEY_COLUMNS)
        flavours = {"pandas": QuorumHealthPandasProcessor, "row": QuorumHealthRowProcessor}
    if api not in flavours:
        raise ValueError(f"api must be 'pandas' or 'row', got {api!r}")
    transform = grouped.transformWithStateInPandas if api == "pandas" else grouped.transformWithState
    from .state import STATE_VERSION
    processor = flavours[api](health_cfg, max_future_ms=max_future_ms, state_version=state_version or STATE_VERSION)
    packed = transform(statefulProcessor=processor,
                       outputStructType=PACKED_HEALTH_SCHEMA, outputMode="Update", timeMode="ProcessingTime")
    # FAILFAST: a value that does not fit its column fails the batch, as Arrow did, rather
    # than becoming a silent null.
    row = F.from_json(HEALTH_JSON, HEALTH_SCHEMA, {"mode": "FAILFAST"})
    return packed.select(row.alias("h")).select("h.*")
