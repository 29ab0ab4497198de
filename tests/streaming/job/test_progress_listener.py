"""The job's query listener: every progress of a running query reaches the callback as the dict
Spark's progress JSON gives (name, batch id, observed metrics), a failing callback does not stop
the query, and after `remove()` nothing more arrives."""
from __future__ import annotations

import threading

import pytest
from pyspark.sql import functions as F

from prometheus_tools import wait_for
from streaming.progress_listener import ProgressListener

pytestmark = pytest.mark.spark


def test_progress_arrives_as_spark_json_until_removed(spark, tmp_path):
    seen: list[dict] = []
    lock = threading.Lock()

    def on_progress(progress: dict) -> None:
        with lock:
            seen.append(progress)
        if len(seen) == 1:
            raise RuntimeError("a callback's failure is logged, not raised into Spark")

    listener = ProgressListener(spark, on_progress)
    rows = (spark.readStream.format("rate").option("rowsPerSecond", 20).load()
            .observe("counted", F.count(F.lit(1)).alias("rows")))
    query = (rows.writeStream.queryName("listened").format("noop")
             .option("checkpointLocation", str(tmp_path / "cp")).trigger(processingTime="200 milliseconds").start())
    try:
        wait_for(lambda: sum(p["numInputRows"] for p in list(seen)) > 0 and len(seen) >= 3, 60,
                   "three progress events, one with input")
        listener.remove()
        # Spark records a batch's progress before posting it: anything posted later is newer
        last = query.lastProgress["batchId"]
        wait_for(lambda: query.lastProgress["batchId"] >= last + 3, 60, "three more batches")
        assert query.isActive and query.exception() is None
    finally:
        query.stop()
    assert max(p["batchId"] for p in seen) <= last, "progress arrived after remove()"
    assert all(p["name"] == "listened" for p in seen)
    assert [p["batchId"] for p in seen] == sorted({p["batchId"] for p in seen})
    with_input = [p for p in seen if p["numInputRows"] > 0]
    assert all(p["observedMetrics"]["counted"]["rows"] == p["numInputRows"] for p in with_input)
