"""The health state's layout in a checkpoint: a new checkpoint gets quorum buckets on the pandas
processor in this job's state version and records all three, a restart reads them back whatever
the state partitions say, a file that names no processor was written on rows and one that names
no version before the state had types, a checkpoint from before the buckets keeps one quorum per
key, and an unreadable record, or a version newer than the job's, stops the job with the file named."""
from __future__ import annotations

import json
import logging

import pytest

from streaming.health.state import STATE_VERSION, VERSION_BEFORE_TYPES
from streaming.state_layout import (BUCKETS_PER_STATE_PARTITION, LAYOUT_FILE, QUORUM_PER_KEY, HealthStateLayout,
                                    StateLayoutError, health_state_layout)

pytestmark = pytest.mark.spark


def test_a_new_checkpoint_gets_buckets_and_a_restart_keeps_their_number(spark, tmp_path, caplog):
    caplog.set_level(logging.INFO, "streaming.state_layout")
    checkpoint = tmp_path / "checkpoint"
    new = HealthStateLayout(2 * BUCKETS_PER_STATE_PARTITION, "pandas", STATE_VERSION)
    assert health_state_layout(spark, str(checkpoint), str(checkpoint / "health"), 2) == new
    assert json.loads((checkpoint / LAYOUT_FILE).read_text()) == {"health_state_buckets": 2 * BUCKETS_PER_STATE_PARTITION,
                                                                 "health_state_processor": "pandas",
                                                                 "health_state_version": STATE_VERSION}
    # more state partitions configured later: the checkpoint's buckets stay
    assert health_state_layout(spark, str(checkpoint), str(checkpoint / "health"), 8) == new
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_layout_file_that_names_no_processor_was_written_on_rows_before_the_state_had_types(spark, tmp_path, caplog):
    caplog.set_level(logging.INFO, "streaming.state_layout")
    (tmp_path / LAYOUT_FILE).write_text('{"health_state_buckets": 16}')
    assert health_state_layout(spark, str(tmp_path), str(tmp_path / "health"), 2) == \
        HealthStateLayout(16, "row", VERSION_BEFORE_TYPES)
    assert "a new checkpoint would keep it on the pandas processor" in caplog.text
    assert (tmp_path / LAYOUT_FILE).read_text() == '{"health_state_buckets": 16}'  # left as it is


def test_a_checkpoint_from_before_the_buckets_keeps_one_quorum_per_key(spark, tmp_path, caplog, run_one_stateful_batch):
    caplog.set_level(logging.INFO, "streaming.state_layout")
    query_checkpoint = run_one_stateful_batch(tmp_path, partitions=2)  # batches, no layout file
    root = str(tmp_path)
    before_the_buckets = HealthStateLayout(QUORUM_PER_KEY, "row", VERSION_BEFORE_TYPES)
    assert health_state_layout(spark, root, query_checkpoint, 2) == before_the_buckets
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "keeps one quorum per state key" in warning and "docs/deployment.md" in warning
    assert json.loads((tmp_path / LAYOUT_FILE).read_text()) == {"health_state_buckets": QUORUM_PER_KEY,
                                                                "health_state_processor": "row",
                                                                "health_state_version": VERSION_BEFORE_TYPES}
    assert health_state_layout(spark, root, query_checkpoint, 2) == before_the_buckets


@pytest.mark.parametrize("text", ["", "{}", '{"health_state_buckets": -1}', '{"health_state_buckets": "16"}', "16",
                                  '{"health_state_buckets": 16, "health_state_processor": "arrow"}', "[16]",
                                  '{"health_state_buckets": 16, "health_state_version": 0}',
                                  '{"health_state_buckets": 16, "health_state_version": "2"}'])
def test_an_unreadable_layout_file_is_refused_with_its_path(spark, tmp_path, text):
    (tmp_path / LAYOUT_FILE).write_text(text)
    with pytest.raises(StateLayoutError, match=LAYOUT_FILE):
        health_state_layout(spark, str(tmp_path), str(tmp_path / "health"), 2)


def test_a_state_version_newer_than_the_job_is_refused_as_such(spark, tmp_path):
    (tmp_path / LAYOUT_FILE).write_text(f'{{"health_state_buckets": 16, "health_state_version": {STATE_VERSION + 1}}}')
    with pytest.raises(StateLayoutError, match=f"{LAYOUT_FILE}: the health state is in version {STATE_VERSION + 1}, "
                                               f"written by a newer job"):
        health_state_layout(spark, str(tmp_path), str(tmp_path / "health"), 2)
