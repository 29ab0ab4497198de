"""Kafka record batches (magic v2), built and read with kafka-python's record classes.

The builder leaves base offset and partition leader epoch to "the broker"; the log is that
broker here, so `build_batch` stamps both afterwards. They sit before the CRC'd region, so
stamping them keeps the CRC valid. Control batches (LeaderChangeMessage and friends) set
the control attribute, which is inside the CRC'd region, so their CRC is recomputed.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterator, Sequence

from kafka.record.util import calc_crc32c as crc32c  # C implementation when `crc32c` is installed
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

HEADER = DefaultRecordBatch.HEADER_STRUCT
HEADER_SIZE = HEADER.size                         # 61 bytes
LOG_OVERHEAD = 12                                  # base offset + length
_BASE_AND_LENGTH = struct.Struct(">qi")
_EPOCH = struct.Struct(">i")
_ATTRS = struct.Struct(">h")
_CRC = struct.Struct(">I")
EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CONTROL_MASK = DefaultRecordBatch.CONTROL_MASK


class CorruptBatch(Exception):
    def __init__(self, position: int, reason: str):
        super().__init__(f"at byte {position}: {reason}")
        self.position = position
        self.reason = reason


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One record as the log hands it out."""
    offset: int
    epoch: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    control: bool = False
    headers: tuple[tuple[str, bytes | None], ...] = ()


@dataclass(frozen=True, slots=True)
class BatchInfo:
    base_offset: int
    last_offset: int
    epoch: int
    size: int
    control: bool
    max_timestamp_ms: int

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1


def build_batch(base_offset: int, epoch: int, records: Sequence[tuple],
                control: bool = False) -> bytes:
    """One batch holding `records` (timestamp_ms, key, value[, headers]) at offsets
    base_offset.. (headers: a sequence of (str, bytes) pairs)."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=2 ** 31 - 1)
    for i, rec in enumerate(records):
        builder.append(i, timestamp=int(rec[0]), key=rec[1], value=rec[2],
                       headers=list(rec[3]) if len(rec) > 3 else [])
    buf = builder.build()
    _BASE_AND_LENGTH.pack_into(buf, 0, base_offset, len(buf) - LOG_OVERHEAD)
    _EPOCH.pack_into(buf, EPOCH_OFFSET, epoch)
    if control:
        (attrs,) = _ATTRS.unpack_from(buf, DefaultRecordBatch.ATTRIBUTES_OFFSET)
        _ATTRS.pack_into(buf, DefaultRecordBatch.ATTRIBUTES_OFFSET, attrs | CONTROL_MASK)
        _CRC.pack_into(buf, DefaultRecordBatch.CRC_OFFSET,
                       crc32c(memoryview(buf)[DefaultRecordBatch.ATTRIBUTES_OFFSET:]))
    return bytes(buf)


def batch_info(buf: bytes | memoryview, position: int = 0) -> BatchInfo:
    """Read and check one batch header plus CRC at `position`; raises CorruptBatch."""
    avail = len(buf) - position
    if avail < HEADER_SIZE:
        raise CorruptBatch(position, f"torn batch header ({avail} of {HEADER_SIZE} bytes)")
    (base, length, epoch, magic, crc, attrs, last_delta, _first_ts, max_ts, _pid, _pepoch, _seq,
     count) = HEADER.unpack_from(buf, position)
    size = length + LOG_OVERHEAD
    if magic != 2:
        raise CorruptBatch(position, f"magic {magic}, expected 2")
    if size < HEADER_SIZE or base < 0 or last_delta < 0 or count < 1:
        raise CorruptBatch(position, f"impossible header (length {length}, base offset {base},"
                                     f" last offset delta {last_delta}, count {count})")
    if size > avail:
        raise CorruptBatch(position, f"torn batch ({avail} of {size} bytes)")
    view = memoryview(buf)[position + DefaultRecordBatch.ATTRIBUTES_OFFSET:position + size]
    if crc32c(view) != crc:
        raise CorruptBatch(position, "CRC mismatch")
    return BatchInfo(base, base + last_delta, epoch, size, bool(attrs & CONTROL_MASK), max_ts)


def scan(buf: bytes | memoryview, position: int = 0) -> Iterator[tuple[int, BatchInfo]]:
    """(position, info) of every batch, stopping with CorruptBatch at the first bad one."""
    end = len(buf)
    while position < end:
        info = batch_info(buf, position)
        yield position, info
        position += info.size


def records_of(batch: bytes | memoryview) -> list[LogRecord]:
    """The records of one (already checked) batch."""
    b = DefaultRecordBatch(batch)
    epoch, control = b.leader_epoch, b.is_control_batch
    return [LogRecord(r.offset, epoch, r.timestamp, r.key, r.value, control, tuple(r.headers)) for r in b]


def with_epoch_checked(data: bytes, expected_base: int) -> list[BatchInfo]:
    """Check a run of batches received from a leader: CRCs good and offsets contiguous
    from `expected_base`. Raises CorruptBatch otherwise."""
    infos = []
    nxt = expected_base
    for pos, info in scan(data):
        if info.base_offset != nxt:
            raise CorruptBatch(pos, f"batch starts at offset {info.base_offset}, expected {nxt}")
        nxt = info.next_offset
        infos.append(info)
    return infos
