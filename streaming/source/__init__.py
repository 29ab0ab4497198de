"""The events topic as a streaming DataFrame: this project's Python source or Spark's native one.

`open_stream(spark, kind, options)` returns the columns key, value (binary), topic, partition,
offset, timestamp whichever source reads them. `kind`:
  - `python`: the confluent-kafka data source in `kafka_source` (always available);
  - `native`: Spark's `kafka` format (needs the spark-sql-kafka connector on the classpath);
  - `auto`:   native when its connector is on the classpath, python otherwise.
"""
from __future__ import annotations

import logging
from typing import Mapping

from streaming.source.kafka_source import FORMAT_NAME, KafkaDataSource
from streaming.source.options import KafkaSourceOptions, SourceOptionError
from streaming.source.range_reader import SPARK_SCHEMA_DDL

log = logging.getLogger(__name__)

SOURCE_KINDS = ("auto", "python", "native")
COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp")
NATIVE_PROVIDER_CLASS = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
# Options only this project's source understands; Spark's Kafka source would reject them.
_PYTHON_ONLY_OPTIONS = ("readstalltimeoutseconds", "probetimeoutseconds")

__all__ = ["open_stream", "native_kafka_available", "resolve_kind", "register", "KafkaDataSource",
           "KafkaSourceOptions", "SourceOptionError", "SOURCE_KINDS", "COLUMNS", "SPARK_SCHEMA_DDL"]


def native_kafka_available(spark) -> bool:
    try:
        spark.sparkContext._jvm.java.lang.Class.forName(NATIVE_PROVIDER_CLASS)
        return True
    except Exception:  # Py4J wraps ClassNotFoundException; any failure means "not usable"
        return False


def resolve_kind(spark, kind: str) -> str:
    if kind not in SOURCE_KINDS:
        raise SourceOptionError(f"source kind must be one of {', '.join(SOURCE_KINDS)} (got {kind!r})")
    if kind == "auto":
        return "native" if native_kafka_available(spark) else "python"
    if kind == "native" and not native_kafka_available(spark):
        raise SourceOptionError("source kind 'native' needs Spark's Kafka connector on the classpath "
                                "(spark-sql-kafka-0-10); use 'python' or 'auto'")
    return kind


def register(spark) -> None:
    spark.dataSource.register(KafkaDataSource)


def open_stream(spark, kind: str, options: Mapping[str, str]):
    """Start reading the topic; `options` use the native format's names (see `options`)."""
    KafkaSourceOptions.parse(options)  # fail fast with the option's name, whatever the kind
    chosen = resolve_kind(spark, kind)
    log.info("events source: %s (asked: %s)", chosen, kind)
    if chosen == "python":
        register(spark)
        df = spark.readStream.format(FORMAT_NAME).options(**options).load()
    else:
        native = {k: v for k, v in options.items() if k.lower() not in _PYTHON_ONLY_OPTIONS}
        df = spark.readStream.format("kafka").options(**native).load()
    return df.select(*COLUMNS)
