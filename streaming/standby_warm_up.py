"""A standby's warm-up (`streaming run --standby`): the health query run on the live events
topic from its latest offsets, on a throwaway checkpoint with the real one's state layout and
no outputs, until a batch with records has completed, then stopped and deleted. What a job's
first batch pays once per JVM is then paid before the takeover: the Python workers' start, the
stateful processor's planning, code generation, the Kafka consumer and RocksDB's native code."""
from __future__ import annotations

import logging
import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable

from streaming.config import JobConfig
from streaming.state_layout import LAYOUT_FILE

log = logging.getLogger(__name__)

WARM_UP_QUERY = "quorum_health_warm_up"
WARM_UP_TIMEOUT_S = 120.0


def warm_up(spark, cfg: JobConfig, cancelled: Callable[[], bool], timeout_s: float = WARM_UP_TIMEOUT_S) -> bool:
    """Run the warm-up; False when no batch with records completed within `timeout_s` or it was
    `cancelled()` first (a takeover does not wait for it: the standby is ready, only colder)."""
    from streaming.job import prepare_job
    scratch = Path(tempfile.mkdtemp(prefix="quorum-health-warm-up-"))
    try:
        layout = Path(cfg.job.checkpoint_location) / LAYOUT_FILE
        if layout.exists():  # the same processor and buckets as the query it stands by for
            shutil.copy(layout, scratch / LAYOUT_FILE)
        d = cfg.to_dict()
        d["job"]["checkpoint_location"] = str(scratch)
        d["source"]["starting_offsets"] = "latest"
        prepared = prepare_job(spark, JobConfig.from_dict(d))
        query = (prepared.health.writeStream.queryName(WARM_UP_QUERY).outputMode("update")
                 .foreachBatch(lambda batch, _id: batch.toArrow())  # collected as the real writer does
                 .option("checkpointLocation", str(scratch / "health"))
                 .trigger(processingTime=f"{cfg.job.trigger_interval_ms} milliseconds").start())
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline and query.isActive and not cancelled():
                if any(p.get("numInputRows") for p in query.recentProgress):
                    return True
                time.sleep(0.2)
            return False
        finally:
            query.stop()
            # else the job's wait for any query's end returns at once, for this one
            spark.streams.resetTerminated()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
