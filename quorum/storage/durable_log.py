"""The core's `ReplicatedLog` and `QuorumStateStore` ports, backed by the files of this
package.

Record kinds map onto Kafka's record format: `data` records are ordinary records; a
`leader_change`, `kraft_version` or `voters` record is a control record (control batch, key =
version 0 and Kafka's control record type 2, 5 or 6); a control record of a type this module
does not know keeps its type in its kind (`control_type_N`), so it is carried, never refused; a
`noop` record is an ordinary record whose value is Kafka's metadata NoOpRecord, without headers,
as Kafka writes it (Kafka's controllers refuse a metadata record with headers; logs of earlier
versions tag a NoOp with an empty value by a `kind: noop` header instead, and keep it).
Consecutive records of one epoch, kind and append time go into one batch (Kafka's controllers
refuse a batch whose records' timestamps differ), control records of any type sharing one
control batch as Kafka's do.

A follower appends the batches its leader sent, byte for byte (`_ReceivedBatches`): a Kafka
leader's batch boundaries, attributes and CRCs survive, whatever the batch holds.
"""
from __future__ import annotations

import struct
from collections import OrderedDict
from pathlib import Path
from typing import Sequence

from quorum.raft.kafka_records import NOOP_RECORD
from quorum.raft.log import DATA, KRAFT_VERSION, LEADER_CHANGE, NOOP, VOTERS, LogRecord, ReplicatedLog
from quorum.raft.quorum_state_store import ElectionState, QuorumStateStore
from quorum.storage import record_batches
from quorum.storage.quorum_state_file import QuorumStateFile, StoredQuorumState
from quorum.storage.segment_log import DEFAULT_SEGMENT_BYTES, RecoveryReport, SegmentLog

# Kafka's ControlRecordType values for the control records of a KRaft metadata log
CONTROL_TYPES = {LEADER_CHANGE: 2, KRAFT_VERSION: 5, VOTERS: 6}
_KIND_OF_TYPE = {t: kind for kind, t in CONTROL_TYPES.items()}
_OTHER_CONTROL = "control_type_"
_CONTROL_KEY = struct.Struct(">hh")           # version, type
_NOOP_HEADERS = (("kind", b"noop"),)


def _control_kind(key: bytes | None) -> str:
    control_type = _CONTROL_KEY.unpack_from(key)[1] if key and len(key) >= 4 else -1
    return _KIND_OF_TYPE.get(control_type) or f"{_OTHER_CONTROL}{control_type}"


def _control_key(kind: str) -> bytes:
    control_type = CONTROL_TYPES.get(kind)
    if control_type is None:
        control_type = int(kind[len(_OTHER_CONTROL):])
    return _CONTROL_KEY.pack(0, control_type)


def _kind_of(r: record_batches.LogRecord) -> str:
    if r.control:
        return _control_kind(r.key)
    if not r.headers:
        return NOOP if r.value == NOOP_RECORD else DATA
    return NOOP if r.headers[0] == ("kind", b"noop") else DATA


def to_core(r: record_batches.LogRecord) -> LogRecord:
    return LogRecord(r.offset, r.epoch, r.value or b"", r.timestamp_ms, _kind_of(r))


def _is_control(kind: str) -> bool:
    return kind != DATA and kind != NOOP


def encode_records(records: Sequence[LogRecord]) -> list[tuple[int, int, bool, list[tuple]]]:
    """Group records into batches: (base offset, epoch, control, [(ts, key, value, headers)])."""
    out: list[tuple[int, int, bool, list[tuple]]] = []
    prev = None
    for r in records:
        kind = r.kind
        control = _is_control(kind)
        group = (r.epoch, True if control else kind, r.append_time_ms)
        if group != prev:
            out.append((r.offset, r.epoch, control, []))
            prev = group
        key = _control_key(kind) if control else None
        headers = _NOOP_HEADERS if kind == NOOP and r.value != NOOP_RECORD else ()
        out[-1][3].append((r.append_time_ms, key, r.value, headers))
    return out


class _BatchCache:
    """Recently built batches by their full content: a leader builds the same batch for its log
    and for each follower's fetch answer. Keyed by content, so a hit is always the same bytes."""

    SIZE = 256

    def __init__(self) -> None:
        self._batches: OrderedDict[tuple, bytes] = OrderedDict()

    def build(self, base: int, epoch: int, control: bool, recs: list[tuple]) -> bytes:
        key = (base, epoch, control, tuple(recs))
        data = self._batches.get(key)
        if data is None:
            data = record_batches.build_batch(base, epoch, recs, control)
            self._batches[key] = data
            if len(self._batches) > self.SIZE:
                self._batches.popitem(last=False)
        return data


class _ReceivedBatches:
    """The batches of recent Fetch answers, by base offset, with the records decoded from each:
    a follower about to append exactly those records appends the leader's bytes instead of a
    re-encoding, which would differ from a Kafka leader's (batch boundaries, several control
    record types in one batch). Records are compared, so a batch replaced after a truncation
    is never mistaken for the one remembered."""

    SIZE = 1024

    def __init__(self) -> None:
        self._by_base: OrderedDict[int, tuple[tuple[LogRecord, ...], bytes]] = OrderedDict()

    def remember(self, records: tuple[LogRecord, ...], data: bytes) -> None:
        self._by_base[records[0].offset] = (records, data)
        self._by_base.move_to_end(records[0].offset)
        if len(self._by_base) > self.SIZE:
            self._by_base.popitem(last=False)

    def match(self, records: Sequence[LogRecord], i: int) -> tuple[bytes, int] | None:
        """(bytes, record count) of the received batch holding exactly records[i:i+count]."""
        hit = self._by_base.get(records[i].offset)
        if hit is None:
            return None
        recs, data = hit
        n = len(recs)
        if tuple(records[i:i + n]) != recs:
            return None
        return data, n


_cache = _BatchCache()
_received = _ReceivedBatches()


def records_to_batches(records: Sequence[LogRecord]) -> bytes:
    """The wire form of records (Fetch response `Records`)."""
    return b"".join(_cache.build(base, epoch, control, recs)
                    for base, epoch, control, recs in encode_records(records))


def batches_to_records(data: bytes) -> list[LogRecord]:
    """Records of a Fetch response's `Records`, every batch CRC checked (CorruptBatch otherwise)."""
    out: list[LogRecord] = []
    view = memoryview(data)
    for pos, info in record_batches.scan(data):
        recs = tuple(to_core(r) for r in record_batches.records_of(view[pos:pos + info.size]))
        _received.remember(recs, bytes(view[pos:pos + info.size]))
        out.extend(recs)
    return out


def _batches_for_append(records: Sequence[LogRecord]) -> list[bytes]:
    """The bytes appending `records` writes: received batches as they came, the rest encoded."""
    out: list[bytes] = []
    i, n = 0, len(records)
    while i < n:
        hit = _received.match(records, i)
        if hit is not None:
            out.append(hit[0])
            i += hit[1]
            continue
        j = i + 1      # encode up to the next received batch these records hold, if any
        while j < n and _received.match(records, j) is None:
            j += 1
        out.extend(_cache.build(base, epoch, control, recs) for base, epoch, control, recs in encode_records(records[i:j]))
        i = j
    return out


class DurableLog(ReplicatedLog):
    """`ReplicatedLog` on a `SegmentLog`, with the most recent records also kept in memory:
    the leader reads every new record back right away (fetch answers, committed records) and
    a follower its committed ones, so the tail is served without reading and decoding."""

    TAIL_RECORDS = 16_384

    def __init__(self, segments: SegmentLog):
        self.segments = segments
        self._tail: list[LogRecord] = []
        self._tail_base = segments.end_offset     # offset of _tail[0]

    @classmethod
    def open(cls, directory: str | Path, segment_bytes: int = DEFAULT_SEGMENT_BYTES,
             fsync: bool = True) -> tuple["DurableLog", RecoveryReport]:
        segments, report = SegmentLog.open(directory, segment_bytes, fsync)
        return cls(segments), report

    def end_offset(self) -> int:
        return self.segments.end_offset

    def flushed_end_offset(self) -> int:
        return self.segments.flushed_end_offset

    def last_epoch(self) -> int:
        return self.segments.last_epoch

    def append(self, records: Sequence[LogRecord]) -> None:
        if records and records[0].offset != self.segments.end_offset:
            raise ValueError(f"append at offset {records[0].offset}, log end is {self.segments.end_offset}")
        for data in _batches_for_append(records):
            self.segments.append_built(data)
        self._tail.extend(records)
        extra = len(self._tail) - self.TAIL_RECORDS
        if extra > self.TAIL_RECORDS // 4:      # trim in steps, not on every append
            del self._tail[:extra]
            self._tail_base += extra

    def flush(self) -> None:
        self.segments.flush()

    def truncate_to(self, offset: int) -> None:
        self.segments.truncate_to(offset)
        if offset < self._tail_base:
            self._tail, self._tail_base = [], self.segments.end_offset
        else:
            del self._tail[offset - self._tail_base:]

    def read(self, start_offset: int, max_records: int) -> Sequence[LogRecord]:
        if start_offset >= self.segments.end_offset or max_records <= 0:
            return []
        if start_offset >= self._tail_base:
            i = start_offset - self._tail_base
            return self._tail[i:i + max_records]
        return [to_core(r) for r in self.segments.read(start_offset, start_offset + max_records)]

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        e, end = self.segments.end_offset_for_epoch(epoch)
        return (0, 0) if e < 0 else (e, end)

    def epoch_at(self, offset: int) -> int:
        return self.segments.epoch_at(offset)

    def close(self) -> None:
        self.segments.close()


class DurableQuorumStateStore(QuorumStateStore):
    """`QuorumStateStore` on the atomically replaced quorum-state file."""

    def __init__(self, directory: str | Path):
        self.file = QuorumStateFile(directory)

    @property
    def writes(self) -> int:
        return self.file.writes

    def read(self) -> ElectionState | None:
        s = self.file.read()
        return None if s is None else ElectionState(s.leader_epoch, s.leader_id, s.voted_id, s.voters)

    def write(self, state: ElectionState) -> None:
        self.file.write(StoredQuorumState(state.leader_id, state.epoch, state.voted_id, tuple(state.voters)))
