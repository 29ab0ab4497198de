"""The durable log's in-memory tail gives exactly what the files give."""
from quorum.raft.log import DATA, LEADER_CHANGE, NOOP, LogRecord
from quorum.storage.durable_log import DurableLog


def _records(start, n, epoch, kind=DATA):
    return [LogRecord(start + i, epoch, b"v%d" % (start + i), 1000 + start + i, kind) for i in range(n)]


def test_tail_reads_match_a_reopened_log_through_appends_trims_and_truncations(tmp_path, monkeypatch):
    monkeypatch.setattr(DurableLog, "TAIL_RECORDS", 40)      # force trims of the tail
    log, _ = DurableLog.open(tmp_path, fsync=False)
    log.append(_records(0, 1, 1, LEADER_CHANGE))
    for start in range(1, 120, 7):
        log.append(_records(start, 7, 1))
    log.append(_records(120, 3, 2, NOOP))
    log.truncate_to(121)                                      # inside the tail
    log.append(_records(121, 4, 3))
    log.flush()
    reopened, _ = DurableLog.open(tmp_path, fsync=False)
    for start in (0, 1, 60, 100, 120, 121, 124, 125):
        for n in (1, 5, 1000):
            assert list(log.read(start, n)) == list(reopened.read(start, n)), (start, n)
    log.truncate_to(10)                                       # below the tail: back to the files
    assert list(log.read(0, 100)) == list(reopened.read(0, 10))
    log.append(_records(10, 2, 4))
    assert [r.epoch for r in log.read(9, 5)] == [1, 4, 4]
    log.close()
    reopened.close()


def test_a_follower_appends_the_very_bytes_it_received(tmp_path):
    from quorum.storage.durable_log import batches_to_records, records_to_batches
    leader, _ = DurableLog.open(tmp_path / "leader", fsync=False)
    follower, _ = DurableLog.open(tmp_path / "follower", fsync=False)
    records = _records(0, 1, 1, LEADER_CHANGE) + _records(1, 50, 1) + _records(51, 2, 2, NOOP)
    leader.append(records)
    wire = records_to_batches(leader.read(0, 100))
    assert wire == records_to_batches(records)                 # built once, the same bytes
    got = batches_to_records(wire)
    assert got == records
    follower.append(got)
    assert follower.segments.read_batches(0, 1 << 20) == leader.segments.read_batches(0, 1 << 20) == wire
