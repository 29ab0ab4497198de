"""The source's Kafka side against the embedded broker, without Spark."""
from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition

from source_kafka_helpers import produce_in_batches
from streaming.source.high_watermarks import HighWatermarkProbe
from streaming.source.options import KafkaSourceOptions
from streaming.source.planning import OffsetRange
from streaming.source.range_reader import read_range


def options(broker, topic, **extra) -> KafkaSourceOptions:
    return KafkaSourceOptions.parse({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic, **extra})


def test_probe_finds_the_true_log_end_where_list_offsets_latest_stops_at_the_last_batch(broker, topic_factory):
    topic = topic_factory(partitions=1)
    produced = produce_in_batches(broker.bootstrap, topic, batches=20, per_batch=50, partitions=1)
    listed = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "t"})
    _, list_offsets_end = listed.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
    listed.close()
    probe = HighWatermarkProbe(options(broker, topic))
    try:
        assert probe.high_watermarks({0: 0}) == {0: produced}
    finally:
        probe.close()
    # Shows this test exercises the broker defect; if the broker is fixed, this line says so.
    assert list_offsets_end < produced, "ListOffsets(latest) is right now: the defect is gone"


def test_probe_sees_records_written_after_its_previous_answer(broker, topic_factory):
    topic = topic_factory(partitions=2)
    probe = HighWatermarkProbe(options(broker, topic))
    try:
        assert probe.high_watermarks({0: 0, 1: 0}) == {0: 0, 1: 0}
        produce_in_batches(broker.bootstrap, topic, batches=3, per_batch=10, partitions=2)
        assert probe.high_watermarks({0: 0, 1: 0}) == {0: 15, 1: 15}
        produce_in_batches(broker.bootstrap, topic, batches=2, per_batch=10, partitions=2, first=30)
        assert probe.high_watermarks({0: 15, 1: 15}) == {0: 25, 1: 25}
    finally:
        probe.close()


def test_a_range_is_read_exactly_from_start_to_end_across_batch_boundaries(broker, topic_factory):
    topic = topic_factory(partitions=1)
    produce_in_batches(broker.bootstrap, topic, batches=10, per_batch=37, partitions=1)
    batches = list(read_range(options(broker, topic), OffsetRange(topic, 0, 13, 301), chunk=50))
    offsets = [o for b in batches for o in b.column("offset").to_pylist()]
    assert offsets == list(range(13, 301))
    first = batches[0]
    assert first.schema.names == ["key", "value", "topic", "partition", "offset", "timestamp"]
    assert first.column("value")[0].as_py() == b"13" and first.column("topic")[0].as_py() == topic
    assert first.column("timestamp")[0].as_py() is not None
