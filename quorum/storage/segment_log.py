"""The durable quorum log: segment files of Kafka record batches.

Files are named after their first offset (`00000000000000000000.log`) and rolled at
`segment_bytes`. Appends are written at once and made durable by `flush()` (fsync);
`flushed_end_offset` says how far the disk is known to hold, and the node acknowledges
nothing beyond it. On open every batch is checked (header, CRC, offsets contiguous); the
first bad or torn batch and everything after it is cut off and listed in the
`RecoveryReport`, so a damaged tail is never served. One batch holds records of one epoch
only, so epoch boundaries are batch boundaries.
"""
from __future__ import annotations

import bisect
import itertools
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from quorum.storage.atomic_file import fsync_dir
from quorum.storage.epoch_cache import EpochCache
from quorum.storage.record_batches import (BatchInfo, CorruptBatch, LogRecord, batch_info, build_batch, records_of,
                                           scan, with_epoch_checked)

log = logging.getLogger(__name__)

DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
SUFFIX = ".log"


@dataclass
class RecoveryReport:
    """What `SegmentLog.open` found and repaired."""
    segments: int = 0
    batches: int = 0
    end_offset: int = 0
    truncated_bytes: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.problems


@dataclass
class _Segment:
    base_offset: int
    path: Path
    fd: int
    size: int


@dataclass(frozen=True, slots=True)
class _Entry:
    info: BatchInfo
    segment: _Segment
    position: int


class SegmentLog:
    def __init__(self, directory: Path, segment_bytes: int, fsync: bool):
        self.directory = directory
        self.segment_bytes = segment_bytes
        self.fsync = fsync
        self._segments: list[_Segment] = []
        self._entries: list[_Entry] = []
        self._bases: list[int] = []        # base offset per entry, for bisect
        self._end_offset = 0
        self._flushed = 0
        self._dirty: set[int] = set()      # fds written since the last flush
        self.epochs = EpochCache()
        self._epochs_persisted: list[tuple[int, int]] | None = None
        self.extra_flush_delay_s: float = 0.0  # fault injection: slow disk

    # --- opening and recovery ------------------------------------------------------------------

    @classmethod
    def open(cls, directory: str | os.PathLike, segment_bytes: int = DEFAULT_SEGMENT_BYTES,
             fsync: bool = True) -> tuple["SegmentLog", RecoveryReport]:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self = cls(directory, segment_bytes, fsync)
        report = RecoveryReport()
        paths = sorted(directory.glob("*" + SUFFIX))
        for i, path in enumerate(paths):
            try:
                base = int(path.stem)
            except ValueError:
                report.problems.append(f"{path.name}: not a segment name, ignored")
                continue
            if base != self._end_offset:
                report.problems.append(f"{path.name}: starts at offset {base} but the log ends at "
                                       f"{self._end_offset}; it and later segments dropped")
                self._drop_files(paths[i:], report)
                break
            ok = self._recover_segment(path, base, report)
            if not ok:
                self._drop_files(paths[i + 1:], report)
                break
        if not self._segments:
            self._new_segment(self._end_offset)
        self._flushed = self._end_offset
        report.segments = len(self._segments)
        report.batches = len(self._entries)
        report.end_offset = self._end_offset
        stored = EpochCache.read(directory)
        if stored != self.epochs.entries():
            if stored is not None or self._entries:
                report.problems.append(f"epoch checkpoint {stored} disagreed with the log "
                                       f"{self.epochs.entries()}; rewritten from the log")
            self._persist_epochs()
        else:
            self._epochs_persisted = stored
        for p in report.problems:
            log.warning("log recovery in %s: %s", directory, p)
        return self, report

    def _recover_segment(self, path: Path, base: int, report: RecoveryReport) -> bool:
        data = path.read_bytes()
        fd = os.open(path, os.O_RDWR)
        seg = _Segment(base, path, fd, len(data))
        self._segments.append(seg)
        good = 0
        try:
            for pos, info in scan(data):
                if info.base_offset != self._end_offset:
                    raise CorruptBatch(pos, f"batch starts at offset {info.base_offset}, "
                                            f"expected {self._end_offset}")
                if info.epoch < self.epochs.latest_epoch:
                    raise CorruptBatch(pos, f"epoch {info.epoch} below the previous {self.epochs.latest_epoch}")
                self._index(info, seg, pos)
                good = pos + info.size
            return True
        except CorruptBatch as e:
            dropped = len(data) - good
            report.truncated_bytes += dropped
            report.problems.append(f"{path.name}: {e.reason} at byte {e.position}; "
                                   f"truncated {dropped} bytes, log ends at offset {self._end_offset}")
            os.ftruncate(fd, good)
            os.fsync(fd)
            seg.size = good
            return False

    def _drop_files(self, paths: Iterable[Path], report: RecoveryReport) -> None:
        for p in paths:
            report.truncated_bytes += p.stat().st_size
            report.problems.append(f"{p.name}: removed (after the end of the valid log)")
            p.unlink()
        fsync_dir(self.directory)

    # --- reading -------------------------------------------------------------------------------

    @property
    def end_offset(self) -> int:
        return self._end_offset

    @property
    def flushed_end_offset(self) -> int:
        return self._flushed

    @property
    def last_epoch(self) -> int:
        return self._entries[-1].info.epoch if self._entries else 0

    def _entry_index(self, offset: int) -> int:
        """Index of the batch holding `offset` (len(entries) at the log end)."""
        i = bisect.bisect_right(self._bases, offset) - 1
        return max(i, 0) if offset < self._end_offset else len(self._entries)

    def read_batches(self, from_offset: int, max_bytes: int) -> bytes:
        """Whole batches starting with the one holding `from_offset`; at least one batch even
        if it is bigger than `max_bytes` (as Kafka does, so a big batch cannot stall a follower)."""
        out = []
        total = 0
        for e in itertools.islice(self._entries, self._entry_index(from_offset), None):
            if out and total + e.info.size > max_bytes:
                break
            out.append(os.pread(e.segment.fd, e.info.size, e.position))
            total += e.info.size
        return b"".join(out)

    def read(self, from_offset: int, to_offset: int | None = None) -> list[LogRecord]:
        """Records in [from_offset, to_offset)."""
        to_offset = self._end_offset if to_offset is None else min(to_offset, self._end_offset)
        out: list[LogRecord] = []
        for e in itertools.islice(self._entries, self._entry_index(from_offset), None):
            if e.info.base_offset >= to_offset:
                break
            for r in records_of(os.pread(e.segment.fd, e.info.size, e.position)):
                if from_offset <= r.offset < to_offset:
                    out.append(r)
        return out

    def epoch_at(self, offset: int) -> int:
        return self.epochs.epoch_at(offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.epochs.end_offset_for(epoch, self._end_offset)

    # --- writing -------------------------------------------------------------------------------

    def append(self, epoch: int, records: Sequence[tuple], control: bool = False) -> BatchInfo:
        """Append one batch of (timestamp_ms, key, value[, headers]) at the log end, in `epoch`."""
        if epoch < self.last_epoch:
            raise ValueError(f"append in epoch {epoch} below the log's last epoch {self.last_epoch}")
        data = build_batch(self._end_offset, epoch, records, control)
        return self._write([(data, None)])[0]

    def append_built(self, data: bytes) -> BatchInfo:
        """Append one batch already built for the log end (its header is checked)."""
        info = batch_info(data)
        if info.base_offset != self._end_offset or info.epoch < self.last_epoch or info.size != len(data):
            raise ValueError(f"batch at offset {info.base_offset} epoch {info.epoch} does not continue the log "
                             f"(end {self._end_offset}, last epoch {self.last_epoch})")
        return self._write([(data, info)])[0]

    def append_batches(self, data: bytes) -> list[BatchInfo]:
        """Append batches received from the leader (CRC checked, contiguous from the log end)."""
        infos = with_epoch_checked(data, self._end_offset)
        last = self.last_epoch
        for info in infos:
            if info.epoch < last:
                raise CorruptBatch(0, f"batch epoch {info.epoch} below the log's last epoch {last}")
            last = info.epoch
        pos = 0
        chunks = []
        for info in infos:
            chunks.append((data[pos:pos + info.size], info))
            pos += info.size
        return self._write(chunks)

    def _write(self, chunks: list[tuple[bytes, BatchInfo | None]]) -> list[BatchInfo]:
        out = []
        for data, info in chunks:
            info = info or batch_info(data)
            seg = self._segments[-1]
            if seg.size and seg.size + len(data) > self.segment_bytes:
                seg = self._new_segment(info.base_offset)
            os.pwrite(seg.fd, data, seg.size)
            pos = seg.size
            seg.size += len(data)
            self._dirty.add(seg.fd)
            self._index(info, seg, pos)
            out.append(info)
        return out

    def _index(self, info: BatchInfo, seg: _Segment, pos: int) -> None:
        self.epochs.assign(info.epoch, info.base_offset)
        self._entries.append(_Entry(info, seg, pos))
        self._bases.append(info.base_offset)
        self._end_offset = info.next_offset

    def _new_segment(self, base: int) -> _Segment:
        path = self.directory / f"{base:020d}{SUFFIX}"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        seg = _Segment(base, path, fd, 0)
        self._segments.append(seg)
        if self.fsync:
            fsync_dir(self.directory)
        return seg

    def flush(self) -> int:
        """Make everything appended so far durable; returns the new flushed end offset.
        Safe to call from a worker thread while the loop keeps appending: only offsets
        written before the call are claimed."""
        import time
        target = self._end_offset
        fds, self._dirty = self._dirty, set()
        if self.fsync:
            for fd in fds:
                os.fsync(fd)
        if self.extra_flush_delay_s:
            time.sleep(self.extra_flush_delay_s)
        if self.epochs.entries() != self._epochs_persisted:
            self._persist_epochs()
        self._flushed = max(self._flushed, min(target, self._end_offset))
        return self._flushed

    def _persist_epochs(self) -> None:
        entries = self.epochs.entries()
        self.epochs.write(self.directory)
        self._epochs_persisted = entries

    def truncate_to(self, offset: int) -> None:
        """Remove every record at `offset` and after (a follower diverged from its leader).
        A batch straddling `offset` is rewritten with its records below `offset`."""
        if offset >= self._end_offset:
            return
        if offset < 0:
            raise ValueError(f"cannot truncate to a negative offset {offset}")
        i = self._entry_index(offset)
        keep_partial: list[LogRecord] = []
        entry = self._entries[i]
        if entry.info.base_offset < offset:
            keep_partial = [r for r in self.read(entry.info.base_offset, offset)]
        cut_seg, cut_pos = entry.segment, entry.position
        del self._entries[i:], self._bases[i:]
        # drop whole segments after the cut
        while self._segments[-1] is not cut_seg:
            seg = self._segments.pop()
            os.close(seg.fd)
            self._dirty.discard(seg.fd)
            seg.path.unlink()
        os.ftruncate(cut_seg.fd, cut_pos)
        cut_seg.size = cut_pos
        self._end_offset = self._entries[-1].info.next_offset if self._entries else self._segments[0].base_offset
        self.epochs.truncate_from(self._end_offset)
        if keep_partial:
            first = keep_partial[0]
            self.append(first.epoch, [(r.timestamp_ms, r.key, r.value, r.headers) for r in keep_partial],
                        first.control)
        if self.fsync:
            os.fsync(cut_seg.fd)
            fsync_dir(self.directory)
        self._flushed = min(self._flushed, self._end_offset)
        self._persist_epochs()

    def close(self) -> None:
        for seg in self._segments:
            try:
                os.close(seg.fd)
            except OSError:
                pass
        self._segments = []
