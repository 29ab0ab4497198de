"""The events source (Spark's Kafka connector) inside Spark Structured Streaming, on Apache Kafka.

Every test checks offsets, not only counts: each (partition, offset) of the topic must be
delivered exactly once, across failed batches and restarts from the checkpoint; records the
topic deleted while the job was down are counted as lost, never read, never stop the job
unless it is told to stop.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from source_kafka_helpers import produce_in_batches
from streaming.source import lost_offsets, open_stream

pytestmark = pytest.mark.spark


def source_options(broker, topic, **extra) -> dict[str, str]:
    return {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic, **extra}


class BatchFiles:
    """A foreachBatch sink writing each batch's (partition, offset, value) to its own directory,
    overwritten if Spark runs the batch again: what is left is what each committed batch read."""

    def __init__(self, root: Path, fail_on_batch: int | None = None):
        self.root = root
        self.fail_on_batch = fail_on_batch

    def __call__(self, batch_df, batch_id: int) -> None:
        (batch_df.select("partition", "offset", "value").write.mode("overwrite")
         .parquet(str(self.root / f"batch={batch_id}")))
        if batch_id == self.fail_on_batch:
            self.fail_on_batch = None
            raise RuntimeError(f"injected failure after writing batch {batch_id}")


def run(spark, options, checkpoint: Path, sink: BatchFiles, **trigger):
    return (open_stream(spark, options).writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(checkpoint)).trigger(**trigger).start())


def delivered(spark, root: Path):
    return spark.read.parquet(str(root)).collect()


def assert_each_offset_exactly_once(rows, produced: int, partitions: int):
    seen = sorted((r["partition"], r["offset"]) for r in rows)
    assert len(seen) == len(set(seen)), "some offsets were delivered twice"
    per_partition = {p: [o for q, o in seen if q == p] for p in range(partitions)}
    for p, offsets in per_partition.items():
        assert offsets == list(range(len(offsets))), f"partition {p} has gaps"
    assert len(seen) == produced
    assert sorted(int(r["value"]) for r in rows) == list(range(produced))


def planned_end(checkpoint: Path, batch_id: int) -> dict[int, int]:
    """The end offsets Spark's offset log holds for one batch (its last line is the connector's
    offset: {topic: {partition: offset}})."""
    last = (checkpoint / "offsets" / str(batch_id)).read_text().strip().splitlines()[-1]
    (partitions,) = json.loads(last).values()
    return {int(p): o for p, o in partitions.items()}


def test_many_batch_topic_is_read_completely_and_exactly_once_across_failure_and_restarts(
        spark, broker, topic_factory, tmp_path):
    topic = topic_factory(partitions=3)
    produced = produce_in_batches(broker.bootstrap, topic, batches=40, per_batch=50, partitions=3)
    options = source_options(broker, topic, startingOffsets="earliest", maxOffsetsPerTrigger="450")
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"

    # Run 1 dies after batch 2 was planned and written but before Spark committed it.
    first = run(spark, options, checkpoint, BatchFiles(out, fail_on_batch=2), availableNow=True)
    with pytest.raises(StreamingQueryException, match="injected failure"):
        first.awaitTermination(120)
    end_of_batch_2 = planned_end(checkpoint, 2)
    assert all(r["numInputRows"] <= 450 for r in first.recentProgress)

    # Run 2 restarts from the checkpoint and keeps running while more records arrive; it is
    # stopped mid-stream. Run 3 reads whatever is left.
    second = run(spark, options, checkpoint, BatchFiles(out), processingTime="200 milliseconds")
    writer = threading.Thread(target=produce_in_batches,
                              args=(broker.bootstrap, topic, 20, 50, 3, produced))
    writer.start()
    writer.join()
    produced += 20 * 50
    second.processAllAvailable()
    second.stop()
    produced = produce_in_batches(broker.bootstrap, topic, batches=5, per_batch=40, partitions=3, first=produced)
    third = run(spark, options, checkpoint, BatchFiles(out), availableNow=True)
    assert third.awaitTermination(120)

    rows = delivered(spark, out)
    assert_each_offset_exactly_once(rows, produced, partitions=3)
    batch_2 = [r for r in spark.read.parquet(str(out)).where("batch = 2").collect()]
    replayed_end = {p: 1 + max(r["offset"] for r in batch_2 if r["partition"] == p)
                    for p in {r["partition"] for r in batch_2}}
    assert replayed_end == {p: e for p, e in end_of_batch_2.items() if p in replayed_end}, \
        "the restarted query did not replay the planned range of the failed batch"


def test_latest_starts_after_what_is_already_there(spark, broker, topic_factory, tmp_path):
    topic = topic_factory(partitions=2)
    before = produce_in_batches(broker.bootstrap, topic, batches=6, per_batch=25, partitions=2)
    query = (open_stream(spark, source_options(broker, topic, startingOffsets="latest"))
             .writeStream.format("memory").queryName("latest_start")
             .option("checkpointLocation", str(tmp_path / "cp")).trigger(processingTime="200 milliseconds").start())
    try:
        query.processAllAvailable()
        produce_in_batches(broker.bootstrap, topic, batches=2, per_batch=30, partitions=2, first=before)
        query.processAllAvailable()
        rows = spark.sql("select partition, offset, cast(value as string) v from latest_start").collect()
    finally:
        query.stop()
    assert sorted(int(r["v"]) for r in rows) == list(range(before, before + 60))
    assert sorted((r["partition"], r["offset"]) for r in rows) == \
        sorted((p, o) for p in range(2) for o in range(75, 105))


def test_max_offsets_per_trigger_bounds_every_batch(spark, broker, topic_factory, tmp_path):
    topic = topic_factory(partitions=2)
    produced = produce_in_batches(broker.bootstrap, topic, batches=10, per_batch=100, partitions=2)
    out = tmp_path / "out"
    query = run(spark, source_options(broker, topic, startingOffsets="earliest", maxOffsetsPerTrigger="300"),
                tmp_path / "cp", BatchFiles(out), availableNow=True)
    assert query.awaitTermination(120)
    sizes = [r["numInputRows"] for r in query.recentProgress if r["numInputRows"]]
    assert sizes == [300, 300, 300, 100]
    assert_each_offset_exactly_once(delivered(spark, out), produced, partitions=2)


def delete_records_before(bootstrap: str, topic: str, offsets: dict[int, int]) -> None:
    """Move each partition's log start, as retention does (Kafka's DeleteRecords)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(topic, p, o) for p, o in offsets.items()])
    for future in futures.values():
        future.result(30)


@pytest.mark.parametrize("fail_on_data_loss", [False, True])
def test_records_deleted_while_the_job_was_down_are_counted_as_lost(
        spark, broker, topic_factory, tmp_path, fail_on_data_loss):
    topic = topic_factory(partitions=2)
    produced = produce_in_batches(broker.bootstrap, topic, batches=2, per_batch=100, partitions=2)
    options = source_options(broker, topic, startingOffsets="earliest",
                             failOnDataLoss=str(fail_on_data_loss).lower())
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"
    first = run(spark, options, checkpoint, BatchFiles(out), availableNow=True)
    assert first.awaitTermination(120)

    # while no query runs: 100 more records a partition, of which retention deletes 30 and 70
    produced = produce_in_batches(broker.bootstrap, topic, batches=2, per_batch=100, partitions=2, first=produced)
    delete_records_before(broker.bootstrap, topic, {0: 130, 1: 170})

    second = run(spark, options, checkpoint, BatchFiles(out), availableNow=True)
    if fail_on_data_loss:
        with pytest.raises(StreamingQueryException, match="(?i)data.*lost|lost.*data|OffsetOutOfRange"):
            second.awaitTermination(120)
        return
    assert second.awaitTermination(120)
    rows = delivered(spark, out)
    offsets = sorted((r["partition"], r["offset"]) for r in rows)
    assert offsets == sorted([(p, o) for p in range(2) for o in range(100)]
                             + [(0, o) for o in range(130, 200)] + [(1, o) for o in range(170, 200)])
    lost = sum(lost_offsets(source) for progress in second.recentProgress for source in progress["sources"])
    assert lost == 30 + 70
