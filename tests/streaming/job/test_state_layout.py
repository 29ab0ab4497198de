"""The health state's layout in a checkpoint: a new checkpoint gets quorum buckets and records
their number, a restart reads it back whatever the state partitions say, a checkpoint from before
the buckets keeps one quorum per key, and an unreadable record stops the job with the file named."""
from __future__ import annotations

import json
import logging

import pytest

from streaming.state_layout import (BUCKETS_PER_STATE_PARTITION, LAYOUT_FILE, QUORUM_PER_KEY, StateLayoutError,
                                    health_state_buckets)

pytestmark = pytest.mark.spark


def test_a_new_checkpoint_gets_buckets_and_a_restart_keeps_their_number(spark, tmp_path, caplog):
    caplog.set_level(logging.INFO, "streaming.state_layout")
    checkpoint = tmp_path / "checkpoint"
    assert health_state_buckets(spark, str(checkpoint), str(checkpoint / "health"), 2) == 2 * BUCKETS_PER_STATE_PARTITION
    assert json.loads((checkpoint / LAYOUT_FILE).read_text()) == {"health_state_buckets": 2 * BUCKETS_PER_STATE_PARTITION}
    # more state partitions configured later: the checkpoint's buckets stay
    assert health_state_buckets(spark, str(checkpoint), str(checkpoint / "health"), 8) == 2 * BUCKETS_PER_STATE_PARTITION
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_checkpoint_from_before_the_buckets_keeps_one_quorum_per_key(spark, tmp_path, caplog, run_one_stateful_batch):
    caplog.set_level(logging.INFO, "streaming.state_layout")
    query_checkpoint = run_one_stateful_batch(tmp_path, partitions=2)  # batches, no layout file
    root = str(tmp_path)
    assert health_state_buckets(spark, root, query_checkpoint, 2) == QUORUM_PER_KEY
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "keeps one quorum per state key" in warning and "docs/deployment.md" in warning
    assert json.loads((tmp_path / LAYOUT_FILE).read_text()) == {"health_state_buckets": QUORUM_PER_KEY}
    assert health_state_buckets(spark, root, query_checkpoint, 2) == QUORUM_PER_KEY


@pytest.mark.parametrize("text", ["", "{}", '{"health_state_buckets": -1}', '{"health_state_buckets": "16"}', "16"])
def test_an_unreadable_layout_file_is_refused_with_its_path(spark, tmp_path, text):
    (tmp_path / LAYOUT_FILE).write_text(text)
    with pytest.raises(StateLayoutError, match=LAYOUT_FILE):
        health_state_buckets(spark, str(tmp_path), str(tmp_path / "health"), 2)
