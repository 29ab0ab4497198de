"""DataFrame-level checks with chispa: the input projection, and the processor run by Spark
over a static DataFrame (transformWithState runs in batch queries too: input handlers only)."""
from __future__ import annotations

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from quorum.events import envelope_spark_schema
from streaming.health import build_health_stream, health_input
from streaming.health.config import HealthConfig
from streaming.health.schema import INPUT_COLUMNS

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


@pytest.mark.parametrize("api", ["pandas", "row"])
def test_processor_in_spark_flags_the_stuck_replica_of_one_quorum_only(spark, api):
    ok, bad = QuorumScript(cluster="ok"), QuorumScript(cluster="bad")
    records = ok.run(3000) + bad.run(3000)
    bad.mode[3] = "stuck"
    records += ok.run(13_000) + bad.run(13_000)
    health = build_health_stream(events_frame(spark, records), HealthConfig(), api=api)
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
