"""The events topic as a streaming DataFrame, read by Spark's Kafka connector (`kafka` format).

`open_stream(spark, options)` takes the connector's own options (`kafka.bootstrap.servers`,
`subscribe`, `startingOffsets`, `maxOffsetsPerTrigger`, `failOnDataLoss`, `kafka.*` client
settings) and returns the columns key, value (binary), topic, partition, offset, timestamp.
Offsets live in the query's checkpoint: a restarted query reads each record exactly once.

The connector is not part of PySpark. Locally the session gets it from the jars deploy/setup.sh
fetched (streaming.spark_session); on a cluster spark-submit brings it with
`--packages org.apache.spark:spark-sql-kafka-0-10_2.13:<Spark version>`.
"""
from __future__ import annotations

import json
import logging
from typing import Mapping

log = logging.getLogger(__name__)

COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp")
STARTING_OFFSETS = ("earliest", "latest")
CONNECTOR_ARTIFACT = "org.apache.spark:spark-sql-kafka-0-10_2.13"
PROVIDER_CLASS = "org.apache.spark.sql.kafka010.KafkaSourceProvider"


class SourceError(RuntimeError):
    """The topic cannot be read as configured."""


def connector_package(spark_version: str) -> str:
    """The connector's Maven coordinates for a Spark version (spark-submit's --packages)."""
    return f"{CONNECTOR_ARTIFACT}:{spark_version}"


def connector_available(spark) -> bool:
    jvm = spark.sparkContext._jvm
    try:
        # Spark's class loader: jars added with spark.jars are not on the JVM's own class path
        loader = jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader()
        jvm.java.lang.Class.forName(PROVIDER_CLASS, False, loader)
        return True
    except Exception:  # Py4J wraps ClassNotFoundException; any failure means "not usable"
        return False


def open_stream(spark, options: Mapping[str, str]):
    """Start reading the topic with the connector's `options`."""
    if not connector_available(spark):
        raise SourceError(f"Spark's Kafka connector is not on the classpath: run spark-submit with "
                          f"--packages {connector_package(spark.version)} (locally, deploy/setup.sh "
                          f"fetches it and the job adds it to its session)")
    log.info("events source: topic %s on %s (Spark's Kafka connector), starting offsets %s for a new "
             "checkpoint, at most %s records a micro-batch, failOnDataLoss %s",
             options.get("subscribe"), options.get("kafka.bootstrap.servers"),
             options.get("startingOffsets", "latest"), options.get("maxOffsetsPerTrigger", "all"),
             options.get("failOnDataLoss", "true"))
    return spark.readStream.format("kafka").options(**options).load().select(*COLUMNS)


def lost_offsets(source_progress: Mapping) -> int:
    """Offsets a micro-batch planned but did not read: records the topic deleted (retention,
    DeleteRecords) before the job got to them, which the connector skips when failOnDataLoss is
    false. A partition new to the batch counts from offset 0, where the connector starts it. The
    events topic is neither compacted nor transactional, so its offsets are dense and every
    planned offset is a record unless it is gone."""
    start, end = _offsets(source_progress.get("startOffset")), _offsets(source_progress.get("endOffset"))
    if not start or not end:
        return 0
    planned = sum(max(0, end_offset - start.get(key, 0)) for key, end_offset in end.items())
    return max(0, planned - int(source_progress.get("numInputRows") or 0))


def _offsets(raw) -> dict[tuple[str, str], int]:
    """The connector's offsets as {(topic, partition): offset}; it writes them as JSON text."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {}
    if not isinstance(raw, Mapping):
        return {}
    return {(topic, partition): int(offset) for topic, partitions in raw.items() if isinstance(partitions, Mapping)
            for partition, offset in partitions.items()}


# Kafka's Java exceptions that say a secured Kafka refuses the source, and what to fix.
REFUSALS = (("TopicAuthorizationException", "authorization failed: {who} needs READ on the topic {topic}"),
            ("GroupAuthorizationException", "authorization failed: {who} needs READ on the consumer group"),
            ("SaslAuthenticationException", "authentication failed as {who}: a wrong user or password, or a "
                                            "mechanism the listener does not enable"),
            ("SSLHandshakeException", "TLS handshake failed: the broker's certificate is not trusted by "
                                      "ssl.truststore.*, or the listener does not speak TLS"))


def refusal(failure_text: str, topic: str, principal: str | None) -> str | None:
    """What a failed query's error says of a secured Kafka refusing the source, or None."""
    who = f"User:{principal}" if principal else "the job's principal"
    for exception, message in REFUSALS:
        if exception in failure_text:
            return message.format(who=who, topic=topic)
    return None
