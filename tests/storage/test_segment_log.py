"""The durable log: what was flushed survives, a damaged tail is cut and reported,
truncation and the epoch cache behave as the divergence check needs."""
from __future__ import annotations


import pytest

from quorum.storage.epoch_cache import CHECKPOINT_NAME, EpochCache
from quorum.storage.record_batches import CorruptBatch, build_batch
from quorum.storage.segment_log import SegmentLog


def recs(n, start=0):
    return [(1000 + start + i, None, f"r{start + i}".encode()) for i in range(n)]


def values(log, start=0):
    return [r.value for r in log.read(start)]


def test_appended_and_flushed_records_survive_reopen(tmp_path):
    log, report = SegmentLog.open(tmp_path)
    assert report.clean and log.end_offset == 0
    log.append(1, recs(3))
    log.append(2, recs(2, 3))
    assert log.flush() == 5
    log.close()
    log, report = SegmentLog.open(tmp_path)
    assert report.clean, report.problems
    assert log.end_offset == 5 and log.last_epoch == 2
    assert values(log) == [b"r0", b"r1", b"r2", b"r3", b"r4"]
    assert [r.epoch for r in log.read(0)] == [1, 1, 1, 2, 2]


def test_torn_tail_is_truncated_and_reported(tmp_path):
    log, _ = SegmentLog.open(tmp_path)
    log.append(1, recs(2))
    log.append(1, recs(2, 2))
    log.flush()
    seg = log._segments[0].path
    log.close()
    size = seg.stat().st_size
    with open(seg, "r+b") as f:
        f.truncate(size - 7)  # a crash in the middle of the second batch
    log, report = SegmentLog.open(tmp_path)
    assert not report.clean
    assert "torn batch" in report.problems[0]
    assert log.end_offset == 2 and values(log) == [b"r0", b"r1"]
    # the cut is durable and appends continue at the cut
    log.append(1, recs(1, 2))
    assert values(log) == [b"r0", b"r1", b"r2"]


def test_corrupted_byte_in_tail_fails_crc_and_is_cut(tmp_path):
    log, _ = SegmentLog.open(tmp_path)
    log.append(1, recs(2))
    second = log.append(1, recs(2, 2))
    log.flush()
    seg = log._segments[0].path
    pos = log._entries[1].position
    log.close()
    with open(seg, "r+b") as f:
        f.seek(pos + second.size - 2)
        b = f.read(1)
        f.seek(pos + second.size - 2)
        f.write(bytes([b[0] ^ 0xFF]))
    log, report = SegmentLog.open(tmp_path)
    assert any("CRC mismatch" in p for p in report.problems)
    assert log.end_offset == 2
    assert report.truncated_bytes == second.size


def test_garbage_segment_after_a_bad_one_is_removed(tmp_path):
    log, _ = SegmentLog.open(tmp_path, segment_bytes=200)
    for i in range(6):
        log.append(1, recs(1, i))
    log.flush()
    assert len(log._segments) > 2
    first = log._segments[0].path
    log.close()
    with open(first, "r+b") as f:
        f.seek(20)
        f.write(b"\x00" * 8)
    log, report = SegmentLog.open(tmp_path, segment_bytes=200)
    assert log.end_offset == 0 or values(log) == [f"r{i}".encode() for i in range(log.end_offset)]
    assert sorted(p.name for p in tmp_path.glob("*.log")) == [first.name]
    assert any("removed" in p for p in report.problems)


def test_truncate_at_batch_boundary_and_inside_a_batch(tmp_path):
    log, _ = SegmentLog.open(tmp_path, segment_bytes=150)
    log.append(1, recs(3))        # 0..2
    log.append(2, recs(3, 3))     # 3..5
    log.append(3, recs(3, 6))     # 6..8
    log.flush()
    log.truncate_to(6)
    assert log.end_offset == 6 and log.last_epoch == 2
    assert log.epochs.entries() == [(1, 0), (2, 3)]
    log.truncate_to(4)            # inside epoch 2's batch: the batch is rewritten
    assert values(log) == [b"r0", b"r1", b"r2", b"r3"]
    assert log.end_offset_for_epoch(2) == (2, 4)
    log.close()
    log, report = SegmentLog.open(tmp_path, segment_bytes=150)
    assert report.clean, report.problems
    assert values(log) == [b"r0", b"r1", b"r2", b"r3"]


def test_epoch_cache_answers_divergence_queries(tmp_path):
    log, _ = SegmentLog.open(tmp_path)
    log.append(1, recs(2))   # epoch 1: 0..1
    log.append(3, recs(3))   # epoch 3: 2..4
    assert log.end_offset_for_epoch(1) == (1, 2)
    assert log.end_offset_for_epoch(2) == (1, 2)   # largest epoch <= 2 is 1, ending where 3 starts
    assert log.end_offset_for_epoch(3) == (3, 5)
    assert log.end_offset_for_epoch(0) == (-1, -1)
    assert log.epoch_at(3) == 3


def test_epoch_checkpoint_is_persisted_and_rebuilt_when_wrong(tmp_path):
    log, _ = SegmentLog.open(tmp_path)
    log.append(1, recs(2))
    log.append(4, recs(1))
    log.flush()
    log.close()
    assert EpochCache.read(tmp_path) == [(1, 0), (4, 2)]
    (tmp_path / CHECKPOINT_NAME).write_text("0\n1\n1 0\n")
    log, report = SegmentLog.open(tmp_path)
    assert any("epoch checkpoint" in p for p in report.problems)
    assert EpochCache.read(tmp_path) == [(1, 0), (4, 2)]


def test_follower_appends_leader_batches_checked_and_contiguous(tmp_path):
    log, _ = SegmentLog.open(tmp_path)
    data = build_batch(0, 1, recs(2)) + build_batch(2, 1, recs(1, 2))
    log.append_batches(data)
    assert log.end_offset == 3
    with pytest.raises(CorruptBatch):
        log.append_batches(build_batch(5, 1, recs(1)))           # gap
    bad = bytearray(build_batch(3, 1, recs(1)))
    bad[-1] ^= 1
    with pytest.raises(CorruptBatch):
        log.append_batches(bytes(bad))                           # CRC
    assert log.end_offset == 3


def test_read_batches_returns_whole_batches_and_at_least_one(tmp_path):
    log, _ = SegmentLog.open(tmp_path)
    a = log.append(1, recs(2))
    log.append(1, recs(2, 2))
    assert len(log.read_batches(0, 1)) == a.size
    assert len(log.read_batches(1, 10 ** 6)) == log._segments[0].size
    assert log.read_batches(4, 10 ** 6) == b""


def test_flushed_end_offset_tracks_fsync(tmp_path):
    log, _ = SegmentLog.open(tmp_path)
    log.append(1, recs(2))
    assert log.flushed_end_offset == 0
    log.flush()
    assert log.flushed_end_offset == 2
    log.truncate_to(1)
    assert log.flushed_end_offset == 1
