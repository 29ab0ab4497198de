"""The events' Spark schema, derived from the event contract (quorum/events.py: `field_specs`,
`envelope_fields`) so nothing is written twice. It lives with the job, not the contract, because
every quorum node imports the contract and a node runs without Spark."""
from __future__ import annotations

from pyspark.sql import types as T

from quorum.events import SnapshotReplica, envelope_fields, field_specs

_HEAD = [T.StructField("type", T.StringType()), T.StructField("version", T.LongType())]


def _spark_type(kind: str) -> T.DataType:
    if kind == "string":
        return T.StringType()
    if kind == "long":
        return T.LongType()
    if kind == "long_list":
        return T.ArrayType(T.LongType())
    if kind == "replica_list":
        return T.ArrayType(spark_schema(SnapshotReplica))
    raise AssertionError(kind)


def spark_schema(cls: type) -> T.StructType:
    """The Spark StructType of one record type (or SnapshotReplica), with `type` and `version`
    first for the record types. Fields are nullable: Spark's JSON reader yields null for a
    missing or mistyped field and validation turns that into a named reject."""
    head = [] if cls is SnapshotReplica else list(_HEAD)
    return T.StructType(head + [T.StructField(fs.name, _spark_type(fs.kind)) for fs in field_specs(cls)])


def envelope_spark_schema() -> T.StructType:
    """One schema that parses any record type: `type`, `version`, then the union of all fields."""
    return T.StructType(list(_HEAD) + [T.StructField(name, _spark_type(fs.kind))
                                       for name, fs in envelope_fields().items()])
