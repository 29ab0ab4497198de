from __future__ import annotations

import pytest

from quorum.storage.meta import DataDirMismatch, check_or_claim
from quorum.storage.quorum_state_file import QuorumStateError, QuorumStateFile, StoredQuorumState


def test_state_round_trips_and_replaces_atomically(tmp_path):
    f = QuorumStateFile(tmp_path)
    assert f.read() is None
    f.write(StoredQuorumState(leader_id=2, leader_epoch=7, voted_id=2, voters=(1, 2, 3)))
    f.write(StoredQuorumState(leader_id=-1, leader_epoch=8, voted_id=3, voters=(1, 2, 3)))
    assert QuorumStateFile(tmp_path).read() == StoredQuorumState(-1, 8, 3, (1, 2, 3))
    assert not list(tmp_path.glob("*.tmp"))


def test_leftover_temp_file_from_a_crash_is_ignored(tmp_path):
    f = QuorumStateFile(tmp_path)
    f.write(StoredQuorumState(1, 3, 1, (1,)))
    (tmp_path / "quorum-state.tmp").write_text('{"half')
    assert f.read().leader_epoch == 3


def test_unreadable_state_refuses_to_start(tmp_path):
    (tmp_path / "quorum-state").write_text("{not json")
    with pytest.raises(QuorumStateError, match="voting twice"):
        QuorumStateFile(tmp_path).read()


def test_data_dir_of_another_cluster_or_node_is_refused(tmp_path):
    assert check_or_claim(tmp_path, "c1", 1) is True
    assert check_or_claim(tmp_path, "c1", 1) is False
    with pytest.raises(DataDirMismatch, match="cluster 'c1'"):
        check_or_claim(tmp_path, "c2", 1)
    with pytest.raises(DataDirMismatch, match="node 1"):
        check_or_claim(tmp_path, "c1", 2)


def test_a_claimed_directory_keeps_one_directory_id_and_an_old_one_gets_one(tmp_path):
    from quorum.storage.meta import UNKNOWN_DIRECTORY_ID, directory_id, directory_id_text, directory_id_uuid
    check_or_claim(tmp_path / "a", "c1", 1)
    first = directory_id(tmp_path / "a")
    assert len(first) == 22 and first != UNKNOWN_DIRECTORY_ID and not first.startswith("-")
    assert check_or_claim(tmp_path / "a", "c1", 1) is False and directory_id(tmp_path / "a") == first
    assert directory_id_text(directory_id_uuid(first)) == first  # Kafka's form and the wire's agree
    check_or_claim(tmp_path / "b", "c1", 1)
    assert directory_id(tmp_path / "b") != first  # another disk, another id
    old = tmp_path / "old"
    old.mkdir()
    (old / "meta.properties").write_text("version=1\ncluster.id=c1\nnode.id=1\n")  # before directory ids
    kept = directory_id(old)
    assert directory_id(old) == kept and check_or_claim(old, "c1", 1) is False
