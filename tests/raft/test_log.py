"""The in-memory log: honest crash semantics and the epoch cache."""
import pytest

from quorum.raft.log import LogRecord, MemoryLog
from quorum.raft.quorum_state_store import ElectionState, MemoryQuorumStateStore

from .context import records


def test_crash_loses_exactly_the_unflushed_records():
    log = MemoryLog()
    log.append(records(0, (1, 1)))
    log.flush()
    log.append(records(2, (1, 2)))
    assert log.end_offset() == 4 and log.flushed_end_offset() == 2
    log.crash()
    assert log.end_offset() == 2 and log.last_epoch() == 1


def test_truncation_is_durable():
    log = MemoryLog()
    log.append(records(0, (1, 1, 2)))
    log.flush()
    log.truncate_to(1)
    log.crash()
    assert log.end_offset() == 1 and log.flushed_end_offset() == 1


def test_end_offset_for_epoch_gives_largest_epoch_not_above_and_its_end():
    log = MemoryLog()
    log.append(records(0, (1, 1, 3, 3, 3, 6)))
    assert log.end_offset_for_epoch(1) == (1, 2)
    assert log.end_offset_for_epoch(2) == (1, 2)
    assert log.end_offset_for_epoch(3) == (3, 5)
    assert log.end_offset_for_epoch(9) == (6, 6)
    assert log.end_offset_for_epoch(0) == (0, 0)


def test_epoch_cache_follows_truncation():
    log = MemoryLog()
    log.append(records(0, (1, 2, 3)))
    log.truncate_to(2)
    assert log.end_offset_for_epoch(3) == (2, 2) and log.last_epoch() == 2


def test_append_refuses_gaps_and_epochs_going_back():
    log = MemoryLog()
    with pytest.raises(ValueError):
        log.append([LogRecord(3, 1, b"", 0)])
    log.append(records(0, (2,)))
    with pytest.raises(ValueError):
        log.append(records(1, (1,)))


def test_quorum_state_store_returns_the_last_write():
    store = MemoryQuorumStateStore()
    assert store.read() is None
    store.write(ElectionState(3, 1, 1, (0, 1)))
    assert store.read() == ElectionState(3, 1, 1, (0, 1)) and store.writes == 1
