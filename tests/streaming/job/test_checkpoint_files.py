"""How the job writes its checkpoint: the state store commits changelogs rather than snapshots, and
a checkpoint on local disk is written through the rename-based file manager (Hadoop's FileContext
forks `readlink` for every rename there) without checksum files beside (each is another `chmod`
fork); a checkpoint on a cluster's storage keeps Spark's manager and Hadoop's checksums."""
from __future__ import annotations

import pytest

from streaming.checkpoint_files import read_text, write_text
from streaming.spark_session import (CHANGELOG_CHECKPOINTING, CHECKPOINT_FILE_MANAGER,
                                     LOCAL_CHECKPOINT_FILE_MANAGER, is_local_path, local_file_system,
                                     use_local_checkpoint_manager)

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("location, local", [("/var/lib/quorum-health/checkpoint", True), ("run/checkpoint", True),
                                             ("file:///tmp/checkpoint", True), ("hdfs://nn:8020/checkpoint", False),
                                             ("s3a://bucket/checkpoint", False), ("abfss://c@a.dfs.core/cp", False)])
def test_a_checkpoint_location_is_local_when_it_is_a_path_or_a_file_uri(location, local):
    assert is_local_path(location) is local


@pytest.fixture
def session_conf(spark):
    """The shared session as a new one is: Spark's checkpoint file manager, and Hadoop writing a
    checksum beside each local file; as it was, afterwards."""
    before = spark.conf.get(CHECKPOINT_FILE_MANAGER, "")
    spark.conf.unset(CHECKPOINT_FILE_MANAGER)
    local = local_file_system(spark)
    local.setWriteChecksum(True)
    yield spark
    local.setWriteChecksum(False)  # as the job leaves it (the session's other tests run jobs)
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


def test_a_local_checkpoint_is_written_without_checksum_files(session_conf, tmp_path):
    use_local_checkpoint_manager(session_conf, str(tmp_path / "checkpoint"))
    write_text(session_conf, str(tmp_path / "checkpoint" / "offsets" / "0"), "v1")
    assert sorted(p.name for p in (tmp_path / "checkpoint" / "offsets").iterdir()) == ["0"]


def test_a_checksum_written_before_is_removed_with_its_file_rewritten(session_conf, tmp_path):
    # a checkpoint from a job that wrote checksums: read as before, rewritten without them
    path = tmp_path / "checkpoint" / "commits" / "0"
    write_text(session_conf, str(path), "v1")
    assert (path.parent / ".0.crc").exists()
    use_local_checkpoint_manager(session_conf, str(tmp_path / "checkpoint"))
    assert read_text(session_conf, str(path)) == "v1"
    write_text(session_conf, str(path), "a longer text")
    assert read_text(session_conf, str(path)) == "a longer text"
    assert not (path.parent / ".0.crc").exists()


def test_a_cluster_checkpoint_leaves_local_checksums_alone(session_conf, tmp_path):
    use_local_checkpoint_manager(session_conf, "hdfs://namenode:8020/quorum-health/checkpoint")
    write_text(session_conf, str(tmp_path / "file"), "v1")
    assert (tmp_path / ".file.crc").exists()
