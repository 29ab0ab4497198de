"""How the job writes its checkpoint: the state store commits changelogs rather than snapshots, and
a checkpoint on local disk is written through the rename-based file manager (Hadoop's FileContext
forks `readlink` for every rename there); a checkpoint on a cluster's storage keeps Spark's."""
from __future__ import annotations

import pytest

from streaming.spark_session import (CHANGELOG_CHECKPOINTING, CHECKPOINT_FILE_MANAGER,
                                     LOCAL_CHECKPOINT_FILE_MANAGER, is_local_path, use_local_checkpoint_manager)

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("location, local", [("/var/lib/quorum-health/checkpoint", True), ("run/checkpoint", True),
                                             ("file:///tmp/checkpoint", True), ("hdfs://nn:8020/checkpoint", False),
                                             ("s3a://bucket/checkpoint", False), ("abfss://c@a.dfs.core/cp", False)])
def test_a_checkpoint_location_is_local_when_it_is_a_path_or_a_file_uri(location, local):
    assert is_local_path(location) is local


@pytest.fixture
def session_conf(spark):
    """The shared session, with the checkpoint file manager setting restored afterwards."""
    before = spark.conf.get(CHECKPOINT_FILE_MANAGER, "")
    spark.conf.unset(CHECKPOINT_FILE_MANAGER)
    yield spark
    if before:
        spark.conf.set(CHECKPOINT_FILE_MANAGER, before)
    else:
        spark.conf.unset(CHECKPOINT_FILE_MANAGER)


def test_state_commits_write_changelogs(spark):
    assert spark.conf.get(CHANGELOG_CHECKPOINTING) == "true"


def test_a_local_checkpoint_gets_the_rename_based_manager(session_conf, tmp_path):
    use_local_checkpoint_manager(session_conf, str(tmp_path / "checkpoint"))
    assert session_conf.conf.get(CHECKPOINT_FILE_MANAGER) == LOCAL_CHECKPOINT_FILE_MANAGER


def test_a_cluster_checkpoint_keeps_sparks_manager(session_conf):
    use_local_checkpoint_manager(session_conf, "hdfs://namenode:8020/quorum-health/checkpoint")
    assert session_conf.conf.get(CHECKPOINT_FILE_MANAGER, "") == ""


def test_a_manager_named_in_the_config_wins(session_conf, tmp_path):
    session_conf.conf.set(CHECKPOINT_FILE_MANAGER, "com.example.CheckpointFileManager")
    use_local_checkpoint_manager(session_conf, str(tmp_path / "checkpoint"))
    assert session_conf.conf.get(CHECKPOINT_FILE_MANAGER) == "com.example.CheckpointFileManager"
