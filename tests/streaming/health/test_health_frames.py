"""DataFrame-level checks with chispa: the input projection, and the processor run by Spark
over a static DataFrame (transformWithState runs in batch queries too: input handlers only)."""
from __future__ import annotations

import json

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from streaming.event_schema import envelope_spark_schema
from streaming.health import build_health_stream, health_input, packed_input
from streaming.health.config import HealthConfig
from streaming.health.schema import INPUT_COLUMNS, PACKED_COLUMNS, RECORD_JSON, unpack_record

from .quorum_script import QuorumScript

pytestmark = pytest.mark.spark


def events_frame(spark, records):
    schema = envelope_spark_schema()
    rows = [tuple(r.get(f.name) for f in schema.fields) for r in records]
    return spark.createDataFrame(rows, schema)


def test_health_input_keeps_the_processor_columns_of_placeable_records(spark):
    script = QuorumScript()
    good = script.run(200)
    no_time = dict(good[0], time_ms=None)
    no_cluster = dict(good[0], cluster_id=None)
    actual = health_input(events_frame(spark, good + [no_time, no_cluster]))
    present = [c for c in INPUT_COLUMNS if c in events_frame(spark, []).columns]  # no Kafka position here
    expected = events_frame(spark, good).select(*present)
    assert actual.columns == present
    assert_df_equality(actual, expected, ignore_row_order=True)


def test_the_packed_record_unpacks_to_what_the_columns_held(spark):
    # the processor receives each record as one JSON text (Spark's to_json): unpacked, it must be
    # the record the columns held, every input column present, for every record type
    script = QuorumScript()
    records = script.run(3000) + [script.snapshot(), dict(script.poll_error(), leader_id=None)]
    snapshot = records[-2]
    snapshot["voters"][0]["directory_id"] = "SuG--fJgSXqfHAu0xLN_vg"  # one known, the others null
    frame = events_frame(spark, records)
    columns = [r.asDict(recursive=True) for r in health_input(frame).collect()]
    packed = packed_input(frame).collect()
    assert packed[0].asDict().keys() == set(PACKED_COLUMNS)
    unpacked = [unpack_record(r[RECORD_JSON]) for r in packed]
    assert {r["type"] for r in unpacked} == {"fetch", "metrics", "quorum_snapshot", "quorum_poll_error"}
    present = [c for c in INPUT_COLUMNS if c in frame.columns]
    assert all(r.keys() == set(INPUT_COLUMNS) for r in unpacked)

    def in_order(rows):
        return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))
    assert in_order([{c: r[c] for c in present} for r in unpacked]) == in_order(columns)


@pytest.mark.parametrize("api", ["pandas", "row"])
@pytest.mark.parametrize("buckets", [0, 1], ids=["quorum_per_key", "one_bucket"])
def test_processor_in_spark_flags_the_stuck_replica_of_one_quorum_only(spark, api, buckets):
    # Spark 4.2's batch transformWithState opens its state through the state store coordinator,
    # which the session registers with its streaming query manager: create that first
    spark.streams.active
    ok, bad = QuorumScript(cluster="ok"), QuorumScript(cluster="bad")
    records = ok.run(3000) + bad.run(3000)
    bad.mode[3] = "stuck"
    records += ok.run(13_000) + bad.run(13_000)
    health = build_health_stream(events_frame(spark, records), HealthConfig(), api=api, buckets=buckets)
    actual = (health.where(F.col("kind") == "replica")
              .select("cluster_id", "replica_id", "role", "status"))
    expected = spark.createDataFrame(
        [("ok", 1, "voter", "caught_up"), ("ok", 2, "voter", "caught_up"), ("ok", 3, "voter", "caught_up"),
         ("bad", 1, "voter", "caught_up"), ("bad", 2, "voter", "caught_up"), ("bad", 3, "voter", "stalled")],
        actual.schema)
    assert_df_equality(actual, expected, ignore_row_order=True)
    quorum = health.where(F.col("kind") == "quorum").select("cluster_id", "status", "voters_caught_up")
    assert_df_equality(quorum, spark.createDataFrame([("ok", "healthy", 3), ("bad", "degraded", 2)], quorum.schema),
                       ignore_row_order=True)
