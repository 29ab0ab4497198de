"""Fixtures of the job's tests."""
from __future__ import annotations

import json

import pytest


@pytest.fixture
def run_one_stateful_batch(spark):
    """A query checkpoint written by a streaming aggregation (stateful, like the health stage)
    run for one batch with `partitions` state partitions: `run_one_stateful_batch(dir, n)`."""

    def run(tmp_path, partitions: int) -> str:
        data = tmp_path / "in"
        data.mkdir()
        (data / "a.json").write_text("\n".join(json.dumps({"k": i % 3}) for i in range(10)))
        checkpoint = str(tmp_path / "checkpoint")
        previous = spark.conf.get("spark.sql.shuffle.partitions")
        spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
        try:
            query = (spark.readStream.schema("k INT").json(str(data)).groupBy("k").count()
                     .writeStream.format("noop").outputMode("update").option("checkpointLocation", checkpoint)
                     .trigger(availableNow=True).start())
            query.awaitTermination(120)
        finally:
            spark.conf.set("spark.sql.shuffle.partitions", previous)
        return checkpoint

    return run


@pytest.fixture
def recording_writer():
    """`recording_writer(cfg)`: the job's real batch writer, also keeping every event it applied
    (transitions and the rest) in `seen_events`."""
    from streaming.job import job_batch_writer

    def make(cfg):
        writer = job_batch_writer(cfg)
        writer.seen_events = []
        writer.add_event_listener(writer.seen_events.extend)
        return writer

    return make
