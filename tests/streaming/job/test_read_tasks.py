"""How many tasks read a micro-batch: one per Kafka partition with new records, and a busy
partition's range split so that no task takes more than `READ_TASK_RECORDS` of it."""
from __future__ import annotations

import pytest
from confluent_kafka import Producer

from streaming.config import JobConfig
from streaming.config import READ_TASK_RECORDS
from streaming.source import open_stream

pytestmark = pytest.mark.spark


def produce(bootstrap: str, topic: str, per_partition: dict[int, int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for partition, count in per_partition.items():
        for n in range(count):
            producer.produce(topic, value=b"{}", key=str(n).encode(), partition=partition)
            if n % 10_000 == 0:
                producer.poll(0)
    assert producer.flush(30) == 0, "records left unsent"


def read_tasks(spark, cfg: JobConfig, checkpoint) -> list[tuple[int, dict[int, int]]]:
    """Per micro-batch: its read tasks, and the records each Kafka partition gave it."""
    batches = []

    def record(batch_df, batch_id):
        counts = {r["partition"]: r["count"] for r in batch_df.groupBy("partition").count().collect()}
        batches.append((batch_df.rdd.getNumPartitions(), counts))

    query = (open_stream(spark, cfg.source.reader_options()).writeStream.foreachBatch(record)
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert not query.isActive, "the query did not read the topic within 120 s"
    return batches


def test_a_quiet_partition_is_read_by_one_task_and_a_busy_one_by_several(spark, broker, topic_factory, tmp_path):
    topic = topic_factory(partitions=3)
    busy = 2 * READ_TASK_RECORDS + 1
    produce(broker.bootstrap, topic, {0: busy, 1: 13})  # partition 2 gets nothing
    cfg = JobConfig.from_dict({"source": {"bootstrap_servers": broker.bootstrap, "topic": topic,
                                          "starting_offsets": "earliest", "max_offsets_per_trigger": None}})

    # one batch: three tasks for the busy partition, one for the quiet one, none for the empty one
    assert read_tasks(spark, cfg, tmp_path / "checkpoint") == [(4, {0: busy, 1: 13})]

    # a batch of a dozen records from one partition (one idle quorum's second): one task
    produce(broker.bootstrap, topic, {1: 13})
    assert read_tasks(spark, cfg, tmp_path / "checkpoint") == [(1, {1: 13})]
