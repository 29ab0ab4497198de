"""The core's `ReplicatedLog` and `QuorumStateStore` ports, backed by the files of this
package.

Record kinds map onto Kafka's record format: `data` records are ordinary records; a
`leader_change` record is a control record (control batch, key = version 0, type 2,
Kafka's LeaderChangeMessage type); a `noop` record is an ordinary record tagged with a
`kind: noop` header (Kafka's NoOpRecord is a metadata record, not a control record).
Consecutive records of one epoch and kind become one batch.
"""
from __future__ import annotations

import struct
from collections import OrderedDict
from pathlib import Path
from typing import Sequence

from quorum.raft.log import DATA, LEADER_CHANGE, NOOP, LogRecord, ReplicatedLog
from quorum.raft.quorum_state_store import ElectionState, QuorumStateStore
from quorum.storage import record_batches
from quorum.storage.quorum_state_file import QuorumStateFile, StoredQuorumState
from quorum.storage.segment_log import DEFAULT_SEGMENT_BYTES, RecoveryReport, SegmentLog

LEADER_CHANGE_KEY = struct.pack(">hh", 0, 2)
_NOOP_HEADERS = (("kind", b"noop"),)


def _kind_of(r: record_batches.LogRecord) -> str:
    if r.control:
        return LEADER_CHANGE
    if r.headers and r.headers[0] == ("kind", b"noop"):
        return NOOP
    return DATA


def to_core(r: record_batches.LogRecord) -> LogRecord:
    return LogRecord(r.offset, r.epoch, r.value or b"", r.timestamp_ms, _kind_of(r))


def encode_records(records: Sequence[LogRecord]) -> list[tuple[int, int, bool, list[tuple]]]:
    """Group records into batches: (base offset, epoch, control, [(ts, key, value, headers)])."""
    out: list[tuple[int, int, bool, list[tuple]]] = []
    prev = None
    for r in records:
        group = (r.epoch, r.kind)
        if group != prev:
            out.append((r.offset, r.epoch, r.kind == LEADER_CHANGE, []))
            prev = group
        key = LEADER_CHANGE_KEY if r.kind == LEADER_CHANGE else None
        headers = _NOOP_HEADERS if r.kind == NOOP else ()
        out[-1][3].append((r.append_time_ms, key, r.value, headers))
    return out


class _BatchCache:
    """Recently built or received batches by their full content: a leader builds the same
    batch for its log and for each follower's fetch answer, and a follower appends exactly the
    batches it just received. Keyed by content, so a hit is always the same bytes."""

    SIZE = 256

    def __init__(self) -> None:
        self._batches: OrderedDict[tuple, bytes] = OrderedDict()

    def build(self, base: int, epoch: int, control: bool, recs: list[tuple]) -> bytes:
        key = (base, epoch, control, tuple(recs))
        data = self._batches.get(key)
        if data is None:
            data = record_batches.build_batch(base, epoch, recs, control)
            self.remember(key, data)
        return data

    def remember(self, key: tuple, data: bytes) -> None:
        self._batches[key] = data
        if len(self._batches) > self.SIZE:
            self._batches.popitem(last=False)


_cache = _BatchCache()


def records_to_batches(records: Sequence[LogRecord]) -> bytes:
    """The wire form of records (Fetch response `Records`)."""
    return b"".join(_cache.build(base, epoch, control, recs)
                    for base, epoch, control, recs in encode_records(records))


def batches_to_records(data: bytes) -> list[LogRecord]:
    """Records of a Fetch response's `Records`, every batch CRC checked (CorruptBatch otherwise)."""
    out = []
    for pos, info in record_batches.scan(data):
        recs = [to_core(r) for r in record_batches.records_of(memoryview(data)[pos:pos + info.size])]
        groups = encode_records(recs)
        if len(groups) == 1:   # the follower is about to append exactly this batch
            base, epoch, control, values = groups[0]
            _cache.remember((base, epoch, control, tuple(values)), bytes(data[pos:pos + info.size]))
        out.extend(recs)
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
        for base, epoch, control, recs in encode_records(records):
            if base != self.segments.end_offset:
                raise ValueError(f"append at offset {base}, log end is {self.segments.end_offset}")
            self.segments.append_built(_cache.build(base, epoch, control, recs))
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
