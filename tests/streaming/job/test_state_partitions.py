"""The state partitions a checkpoint was started with: read back from a real query's checkpoint,
and a configured number that differs is named in a warning beside the checkpoint's."""
from __future__ import annotations

import logging

import pytest

from streaming.state_partitions import check_state_partitions, checkpoint_state_partitions

pytestmark = pytest.mark.spark


def test_a_new_checkpoint_takes_the_configured_number(spark, tmp_path, caplog):
    caplog.set_level(logging.INFO, "streaming.state_partitions")
    assert checkpoint_state_partitions(spark, str(tmp_path / "none")) is None
    assert check_state_partitions(spark, str(tmp_path / "none"), 16) == 16
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_the_checkpoints_number_wins_and_a_difference_is_named(spark, tmp_path, caplog, run_one_stateful_batch):
    checkpoint = run_one_stateful_batch(tmp_path, partitions=3)
    assert checkpoint_state_partitions(spark, checkpoint) == 3
    caplog.set_level(logging.INFO, "streaming.state_partitions")
    assert check_state_partitions(spark, checkpoint, 3) == 3
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert check_state_partitions(spark, checkpoint, 16) == 3
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "spark.shuffle_partitions is 16" in warning and "started with 3 state partitions" in warning
