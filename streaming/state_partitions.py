"""The number of state partitions a query's checkpoint was started with.

Spark writes `spark.sql.shuffle.partitions` into every batch's offsets file and, on a restart,
keeps the checkpoint's value whatever the session says: the state store is split that way for the
life of the checkpoint. `spark.shuffle_partitions` in the job config therefore only takes effect
for a new checkpoint. `check_state_partitions` says so in the log when the two differ, naming
both numbers, so an operator who raised it knows it has not changed anything yet.
"""
from __future__ import annotations

import json
import logging

from streaming.checkpoint_files import numbered_files, read_text

log = logging.getLogger(__name__)

SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"


def _latest_offsets_text(spark, query_checkpoint: str) -> str | None:
    """The newest `offsets/N` file of a query checkpoint (its first two lines); None for a new
    checkpoint."""
    offsets = query_checkpoint.rstrip("/") + "/offsets"
    batches = numbered_files(spark, offsets)
    return read_text(spark, f"{offsets}/{batches[-1]}", max_lines=2) if batches else None


def checkpoint_state_partitions(spark, query_checkpoint: str) -> int | None:
    """The state partitions recorded in a query's checkpoint, or None when it has none yet."""
    text = _latest_offsets_text(spark, query_checkpoint)
    if text is None:
        return None
    lines = text.splitlines()  # "v1", then the batch's metadata as JSON
    if len(lines) < 2:
        return None
    value = json.loads(lines[1]).get("conf", {}).get(SHUFFLE_PARTITIONS)
    return int(value) if value is not None else None


def check_state_partitions(spark, query_checkpoint: str, configured: int) -> int:
    """The number of state partitions the query will run with: the checkpoint's if it has one
    (with a warning naming both numbers when it differs from `configured`), else `configured`."""
    recorded = checkpoint_state_partitions(spark, query_checkpoint)
    if recorded is None:
        log.info("new checkpoint %s: %d state partitions", query_checkpoint, configured)
        return configured
    if recorded != configured:
        log.warning("spark.shuffle_partitions is %d but the checkpoint %s was started with %d state partitions: "
                    "Spark keeps %d for as long as this checkpoint is used (start a new checkpoint to change it, "
                    "see docs/deployment.md)", configured, query_checkpoint, recorded, recorded)
    return recorded
