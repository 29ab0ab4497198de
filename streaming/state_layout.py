"""How a checkpoint keeps its health state: the number of quorum buckets, fixed for its life.

A quorum's state lives in the bucket its key hashes to (streaming/health/buckets.py), so the
number of buckets must never change under a checkpoint. The job chooses it when it starts a new
checkpoint (`BUCKETS_PER_STATE_PARTITION` per state partition, so every partition gets several),
writes it beside the query's checkpoint, in `<checkpoint>/health-state-layout.json`, and reads
it back on every restart. A checkpoint started before the buckets (it has micro-batches and no
such file) keeps one quorum per state key, as it was written: it goes on so, and the log says
how to move to the buckets.
"""
from __future__ import annotations

import json
import logging

from streaming.checkpoint_files import numbered_files, read_text, write_text

log = logging.getLogger(__name__)

LAYOUT_FILE = "health-state-layout.json"
BUCKETS_PER_STATE_PARTITION = 8
QUORUM_PER_KEY = 0  # the layout before the buckets


def new_checkpoint_buckets(state_partitions: int) -> int:
    """The number of buckets a new checkpoint keeps its quorums in, on `state_partitions`."""
    return BUCKETS_PER_STATE_PARTITION * state_partitions


class StateLayoutError(ValueError):
    """The checkpoint's layout file cannot be read: the job cannot know where its state is."""


def health_state_buckets(spark, checkpoint: str, query_checkpoint: str, state_partitions: int) -> int:
    """The number of buckets the health state of `query_checkpoint` is kept in (0: one quorum
    per key), as recorded in `checkpoint`'s layout file; chosen and recorded when there is none."""
    path = f"{checkpoint.rstrip('/')}/{LAYOUT_FILE}"
    text = read_text(spark, path)
    if text is not None:
        buckets = _parse(path, text)
        log.info("checkpoint %s keeps the health state %s", checkpoint, _describe(buckets))
        return buckets
    if numbered_files(spark, query_checkpoint.rstrip("/") + "/offsets"):
        buckets = QUORUM_PER_KEY
        log.warning("checkpoint %s was started before the health state was kept in buckets: it keeps one quorum "
                    "per state key, as written (about five state-store round trips per quorum and micro-batch); "
                    "start a new checkpoint to keep quorums in buckets (see docs/deployment.md)", checkpoint)
    else:
        buckets = new_checkpoint_buckets(state_partitions)
        log.info("new checkpoint %s: the health state %s", checkpoint, _describe(buckets))
    write_text(spark, path, json.dumps({"health_state_buckets": buckets}) + "\n")
    return buckets


def _describe(buckets: int) -> str:
    return "one quorum per state key" if buckets == QUORUM_PER_KEY else f"in {buckets} quorum buckets"


def _parse(path: str, text: str) -> int:
    try:
        buckets = json.loads(text)["health_state_buckets"]
        if isinstance(buckets, int) and not isinstance(buckets, bool) and buckets >= 0:
            return buckets
    except (ValueError, KeyError, TypeError):
        pass
    raise StateLayoutError(f"{path} does not say how the health state is kept (expected "
                           f'{{"health_state_buckets": N}}, found {text[:200]!r}): restore the file, or start a '
                           "new checkpoint")
