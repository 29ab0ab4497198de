"""The record batch codec against kafka-python's record classes, in both directions: what
one writes the other reads, byte for byte where both build."""
import random

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from quorum.storage.record_batches import LogRecord, batch_info, build_batch, records_of

SEED = 20240611


def _random_records(rng: random.Random, n: int) -> list[tuple]:
    out = []
    ts = rng.randrange(1 << 41)
    for _ in range(n):
        ts += rng.randrange(-5000, 5000)                   # deltas of both signs
        key = None if rng.random() < 0.5 else rng.randbytes(rng.choice((0, 3, 70, 200)))
        value = None if rng.random() < 0.1 else rng.randbytes(rng.choice((0, 1, 63, 64, 100, 20_000)))
        headers = tuple((f"h{i}", None if rng.random() < 0.3 else rng.randbytes(rng.randrange(0, 150)))
                        for i in range(rng.choice((0, 0, 1, 3))))
        out.append((ts, key, value, headers))
    return out


def _kafka_python_batch(records: list[tuple]) -> bytearray:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=2 ** 31 - 1)
    for i, (ts, key, value, headers) in enumerate(records):
        builder.append(i, timestamp=ts, key=key, value=value, headers=list(headers))
    return builder.build()


def test_batches_built_here_read_the_same_in_kafka_python_and_vice_versa():
    rng = random.Random(SEED)
    print(f"seed {SEED}")
    for _ in range(40):
        records = _random_records(rng, rng.choice((1, 2, 17, 100, 300)))
        ours = build_batch(0, 0, records)
        theirs = bytes(_kafka_python_batch(records))
        assert ours == theirs                               # same bytes, same CRC
        batch = DefaultRecordBatch(bytearray(ours))
        assert batch.validate_crc()
        got = [(r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch]
        assert got == [(ts, k, v, tuple(h)) for ts, k, v, h in records]
        assert [(r.timestamp_ms, r.key, r.value, r.headers) for r in records_of(theirs)] == got


def test_offsets_epoch_and_control_flag_are_stamped_and_read_back():
    data = build_batch(1234, 7, [(5, b"\x00\x00\x00\x02", b"change"), (6, None, b"x")], control=True)
    info = batch_info(data)
    assert (info.base_offset, info.last_offset, info.epoch, info.control) == (1234, 1235, 7, True)
    assert records_of(data) == [LogRecord(1234, 7, 5, b"\x00\x00\x00\x02", b"change", True, ()),
                                LogRecord(1235, 7, 6, None, b"x", True, ())]
    assert DefaultRecordBatch(bytearray(data)).validate_crc()
