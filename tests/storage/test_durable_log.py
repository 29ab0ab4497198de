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


def test_a_follower_keeps_a_kafka_leaders_batches_as_they_came(tmp_path):
    """Kafka's controllers write LeaderChange, KRaftVersion and Voters records in one control batch
    and several data batches in one epoch: re-encoding would regroup them, so a follower appends the
    batches it received, and reads the control records back with their types."""
    from quorum.raft.log import KRAFT_VERSION, VOTERS
    from quorum.storage import record_batches
    from quorum.storage.durable_log import batches_to_records, records_to_batches
    control = [(5, b"\x00\x00\x00\x02", b"change"), (5, b"\x00\x00\x00\x05", b"kraft"),
               (5, b"\x00\x00\x00\x06", b"voters"), (5, b"\x00\x00\x00\x63", b"a type unknown here")]
    wire = (record_batches.build_batch(0, 1, control, control=True)
            + record_batches.build_batch(4, 1, [(6, None, b"a"), (6, None, b"b")])
            + record_batches.build_batch(6, 1, [(7, None, b"c")]))
    got = batches_to_records(wire)
    assert [r.kind for r in got] == [LEADER_CHANGE, KRAFT_VERSION, VOTERS, "control_type_99", DATA, DATA, DATA]
    assert records_to_batches(got[:4]) == wire[:len(records_to_batches(got[:4]))]   # one control batch, as sent
    follower, _ = DurableLog.open(tmp_path, fsync=False)
    follower.append(got)
    assert follower.segments.read_batches(0, 1 << 20) == wire
    follower.close()
    reopened, _ = DurableLog.open(tmp_path, fsync=False)
    assert list(reopened.read(0, 10)) == got                  # the kinds survive the files
    reopened.close()
