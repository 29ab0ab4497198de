"""How a checkpoint keeps its health state: the number of quorum buckets and the processor that
wrote it, both fixed for its life, and the version of the state's shape it was started in.

A quorum's state lives in the bucket its key hashes to (streaming/health/buckets.py), so the
number of buckets must never change under a checkpoint; and Spark records which stateful
operator wrote a checkpoint (PySpark's pandas and row-based processors are two operators) and
refuses another one on it. The job chooses both when it starts a new checkpoint
(`BUCKETS_PER_STATE_PARTITION` per state partition, so every partition gets several, and the
measured flavour for buckets), writes them beside the query's checkpoint, in
`<checkpoint>/health-state-layout.json`, and reads them back on every restart. A file with no
processor in it was written when the buckets ran on the row-based processor. A checkpoint
started before the buckets (it has micro-batches and no such file) keeps one quorum per state
key, as it was written: it goes on so, and the log says how to move to the buckets. A file with
no version in it was written before the state had types (streaming/health/state.py): its quorums
are read as version 1 for the checkpoint's life.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from streaming.checkpoint_files import numbered_files, read_text, write_text
from streaming.health.state import STATE_VERSION, VERSION_BEFORE_TYPES

log = logging.getLogger(__name__)

LAYOUT_FILE = "health-state-layout.json"
BUCKETS_PER_STATE_PARTITION = 8
QUORUM_PER_KEY = 0  # the layout before the buckets
PROCESSORS = ("pandas", "row")
# The processor of every checkpoint whose file does not name one: history, fixed for good, even
# if processor.HEALTH_API (today also "row", by measurement) ever changes.
WRITTEN_BEFORE = "row"


@dataclass(frozen=True)
class HealthStateLayout:
    buckets: int    # QUORUM_PER_KEY, or the number of quorum buckets
    processor: str  # PySpark's processor flavour that keeps it: "pandas" or "row"
    state_version: int = STATE_VERSION  # the shape of a quorum's state (streaming/health/state.py)

    def describe(self) -> str:
        keys = "one quorum per state key" if self.buckets == QUORUM_PER_KEY else f"in {self.buckets} quorum buckets"
        return f"{keys}, on the {self.processor} processor, state version {self.state_version}"


def new_checkpoint_layout(state_partitions: int) -> HealthStateLayout:
    """How a new checkpoint keeps its quorums, on `state_partitions`."""
    # imported here, as below: the buckets bring PySpark's stateful API, and the command line
    # imports this module for its errors before it needs Spark (`--help` stays quick)
    from streaming.health.buckets import BUCKETED_HEALTH_API
    return HealthStateLayout(BUCKETS_PER_STATE_PARTITION * state_partitions, BUCKETED_HEALTH_API, STATE_VERSION)


class StateLayoutError(ValueError):
    """The checkpoint's layout file cannot be read: the job cannot know where its state is."""


def health_state_layout(spark, checkpoint: str, query_checkpoint: str, state_partitions: int) -> HealthStateLayout:
    """How the health state of `query_checkpoint` is kept, as recorded in `checkpoint`'s layout
    file; chosen and recorded when there is none."""
    path = f"{checkpoint.rstrip('/')}/{LAYOUT_FILE}"
    text = read_text(spark, path)
    if text is not None:
        layout = _parse(path, text)
        log.info("checkpoint %s keeps the health state %s", checkpoint, layout.describe())
        from streaming.health.buckets import BUCKETED_HEALTH_API
        if layout.buckets != QUORUM_PER_KEY and layout.processor != BUCKETED_HEALTH_API:
            log.info("a new checkpoint would keep it on the %s processor, with a faster health stage (see "
                     "docs/deployment.md)", BUCKETED_HEALTH_API)
        return layout
    if numbered_files(spark, query_checkpoint.rstrip("/") + "/offsets"):
        layout = HealthStateLayout(QUORUM_PER_KEY, WRITTEN_BEFORE, VERSION_BEFORE_TYPES)
        log.warning("checkpoint %s was started before the health state was kept in buckets: it keeps one quorum "
                    "per state key, as written (about five state-store round trips per quorum and micro-batch); "
                    "start a new checkpoint to keep quorums in buckets (see docs/deployment.md)", checkpoint)
    else:
        layout = new_checkpoint_layout(state_partitions)
        log.info("new checkpoint %s: the health state %s", checkpoint, layout.describe())
    write_text(spark, path, json.dumps({"health_state_buckets": layout.buckets,
                                        "health_state_processor": layout.processor,
                                        "health_state_version": layout.state_version}) + "\n")
    return layout


def _parse(path: str, text: str) -> HealthStateLayout:
    try:
        recorded = json.loads(text)
        buckets = recorded["health_state_buckets"]
        processor = recorded.get("health_state_processor", WRITTEN_BEFORE)
        version = recorded.get("health_state_version", VERSION_BEFORE_TYPES)
    except (ValueError, KeyError, TypeError, AttributeError):
        buckets = processor = version = None
    if _count(version) and version > STATE_VERSION:
        raise StateLayoutError(f"{path}: the health state is in version {version}, written by a newer job than "
                               f"this one (it reads versions up to {STATE_VERSION}): run that job, or start a new "
                               f"checkpoint")
    if _count(buckets) and processor in PROCESSORS and _count(version) and version >= VERSION_BEFORE_TYPES:
        return HealthStateLayout(buckets, processor, version)
    raise StateLayoutError(f"{path} does not say how the health state is kept (expected "
                           f'{{"health_state_buckets": N, "health_state_processor": "pandas" or "row", '
                           f'"health_state_version": {STATE_VERSION}}}, found '
                           f"{text[:200]!r}): restore the file, or start a new checkpoint")


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
