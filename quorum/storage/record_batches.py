"""Kafka record batches (magic v2, uncompressed), built and read here.

Every append and fetch goes through this module, so it has its own encoder and decoder
(struct and varints): kafka-python's record classes cost about 25 us per record to read and
15 us to build, which made the codec the largest share of a commit's CPU time. Its header
layout is used, and tests check both directions against kafka-python's classes.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterator, NamedTuple, Sequence

from kafka.record.util import calc_crc32c as crc32c  # C implementation when `crc32c` is installed
from kafka.record.default_records import DefaultRecordBatch

HEADER = DefaultRecordBatch.HEADER_STRUCT
HEADER_SIZE = HEADER.size                         # 61 bytes
LOG_OVERHEAD = 12                                  # base offset + length
_BASE_AND_LENGTH = struct.Struct(">qi")
_EPOCH = struct.Struct(">i")
_ATTRS = struct.Struct(">h")
_CRC = struct.Struct(">I")
CONTROL_MASK = DefaultRecordBatch.CONTROL_MASK


class CorruptBatch(Exception):
    def __init__(self, position: int, reason: str):
        super().__init__(f"at byte {position}: {reason}")
        self.position = position
        self.reason = reason


class LogRecord(NamedTuple):
    """One record as the log hands it out (a tuple: built for every record read)."""
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


def _varint(out: bytearray, value: int) -> None:
    """Zigzag varint (Kafka's varint and varlong)."""
    v = (value << 1) ^ (value >> 63)
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _bytes_field(out: bytearray, value: bytes | None) -> None:
    if value is None:
        out.append(1)            # zigzag(-1)
    else:
        _varint(out, len(value))
        out += value


def _encode_record(out: bytearray, offset_delta: int, ts_delta: int, key: bytes | None,
                   value: bytes | None, headers) -> None:
    body = bytearray(b"\x00")   # attributes
    _varint(body, ts_delta)
    _varint(body, offset_delta)
    _bytes_field(body, key)
    _bytes_field(body, value)
    _varint(body, len(headers))
    for hk, hv in headers:
        _bytes_field(body, hk.encode())
        _bytes_field(body, hv)
    _varint(out, len(body))
    out += body


def build_batch(base_offset: int, epoch: int, records: Sequence[tuple],
                control: bool = False) -> bytes:
    """One batch holding `records` (timestamp_ms, key, value[, headers]) at offsets
    base_offset.. (headers: a sequence of (str, bytes) pairs)."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    first_ts = int(records[0][0])
    max_ts = first_ts
    body = bytearray()
    for i, rec in enumerate(records):
        ts = int(rec[0])
        if ts > max_ts:
            max_ts = ts
        _encode_record(body, i, ts - first_ts, rec[1], rec[2], rec[3] if len(rec) > 3 else ())
    attrs = CONTROL_MASK if control else 0
    buf = bytearray(HEADER_SIZE)
    HEADER.pack_into(buf, 0, base_offset, HEADER_SIZE - LOG_OVERHEAD + len(body), epoch, 2, 0, attrs,
                     len(records) - 1, first_ts, max_ts, -1, -1, -1, len(records))
    buf += body
    _CRC.pack_into(buf, DefaultRecordBatch.CRC_OFFSET, crc32c(memoryview(buf)[DefaultRecordBatch.ATTRIBUTES_OFFSET:]))
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


def _read_varint(buf, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _headers(buf: bytes, pos: int) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    """A record's headers (their count's varint at `pos`) and the position after them."""
    count, pos = _read_varint(buf, pos)
    headers = []
    for _ in range(count):
        n, pos = _read_varint(buf, pos)
        key = buf[pos:pos + n].decode()
        pos += n
        n, pos = _read_varint(buf, pos)
        headers.append((key, None if n < 0 else buf[pos:pos + n]))
        pos += max(n, 0)
    return tuple(headers), pos


def records_of(batch: bytes | memoryview) -> list[LogRecord]:
    """The records of one (already checked) batch."""
    buf = bytes(batch)
    (base, _length, epoch, _magic, _crc, attrs, _last, first_ts, _max_ts, _pid, _pepoch, _seq,
     count) = HEADER.unpack_from(buf, 0)
    if attrs & 0x07:
        raise CorruptBatch(0, "compressed batches are not supported")
    control = bool(attrs & CONTROL_MASK)
    pos = HEADER_SIZE
    out = []
    rv = _read_varint
    try:
        for _ in range(count):
            # one-byte varints (most fields of small records) are decoded inline: this loop is
            # the hottest code of a commit
            b = buf[pos]
            if b < 0x80:
                length, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                length, pos = rv(buf, pos)
            end = pos + length
            b = buf[pos + 1]                          # after the record attributes
            if b < 0x80:
                ts_delta, pos = (b >> 1) ^ -(b & 1), pos + 2
            else:
                ts_delta, pos = rv(buf, pos + 1)
            b = buf[pos]
            if b < 0x80:
                offset_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                offset_delta, pos = rv(buf, pos)
            b = buf[pos]
            if b == 1:                                # null key
                key, pos = None, pos + 1
            else:
                n, pos = rv(buf, pos)
                key, pos = buf[pos:pos + n], pos + n
            b = buf[pos]
            if b == 1:
                value, pos = None, pos + 1
            else:
                n, pos = rv(buf, pos)
                value, pos = buf[pos:pos + n], pos + n
            if buf[pos]:                              # headers: rare, so a call of their own
                headers, pos = _headers(buf, pos)
            else:
                headers, pos = (), pos + 1
            if pos != end:
                raise CorruptBatch(0, f"record of {length} bytes ends at {pos - end:+d}")
            out.append(LogRecord(base + offset_delta, epoch, first_ts + ts_delta, key, value, control, headers))
    except (IndexError, ValueError) as e:
        raise CorruptBatch(0, f"bad record: {e}") from None
    return out


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
