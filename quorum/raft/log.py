"""The replicated log port: one record per offset, each stamped with the epoch that wrote it.

Record model: the log is a sequence of `LogRecord`s at consecutive offsets from 0. Each
record has the leader epoch that appended it, its payload bytes, the leader's append time
and a `kind`: `data` (appended through `RaftNode.append`), or one of the control kinds the
core writes itself, `leader_change` (first record of every epoch, KIP-595) and `noop`
(KIP-835's NoOpRecord after `metadata.max.idle.interval.ms` without appends). Apache Kafka's
controllers also write `kraft_version` and `voters` control records (KIP-853) into the
metadata log; the core carries them, and any control record type it does not know, without
interpreting them. A wire layer groups consecutive records of one epoch and kind into one
Kafka record batch, and a follower keeps the batches its leader sent as they were.

Crash and fsync contract (what a durable implementation must guarantee):
- `append` may keep records in memory only; they are durable once `flush` returns.
  A crash loses every record appended after the last completed `flush`, never one before.
- The core never lets anything leave the node that depends on unflushed records: the
  caller flushes before it sends the messages of the same step (see `Output.flush_log`).
- `truncate_to` is durable when it returns (the core truncates only uncommitted records,
  and must not see them come back after a crash).
- The epoch cache (`end_offset_for_epoch`) is derived from the records, so it always
  matches what survived.
"""
from __future__ import annotations

import bisect
from abc import ABC, abstractmethod
from typing import NamedTuple, Sequence

DATA = "data"
LEADER_CHANGE = "leader_change"
NOOP = "noop"
KRAFT_VERSION = "kraft_version"
VOTERS = "voters"


class LogRecord(NamedTuple):
    """One record of the quorum log (a tuple: cheap to build for every record read)."""
    offset: int
    epoch: int
    value: bytes
    append_time_ms: int
    kind: str = DATA

    @property
    def is_control(self) -> bool:
        return self.kind != DATA


class ReplicatedLog(ABC):
    """The quorum log as the core sees it. Offsets start at 0 (no snapshots yet)."""

    @abstractmethod
    def end_offset(self) -> int:
        """Offset the next record will get (the log end offset, flushed or not)."""

    @abstractmethod
    def flushed_end_offset(self) -> int:
        """End offset of the durable prefix: what survives a crash now."""

    @abstractmethod
    def last_epoch(self) -> int:
        """Epoch of the last record, 0 when the log is empty."""

    @abstractmethod
    def append(self, records: Sequence[LogRecord]) -> None:
        """Append records whose offsets continue the log; not durable until `flush`."""

    @abstractmethod
    def flush(self) -> None:
        """Make every appended record durable (fsync) before returning."""

    @abstractmethod
    def truncate_to(self, offset: int) -> None:
        """Remove every record at `offset` and above, durably."""

    @abstractmethod
    def read(self, start_offset: int, max_records: int) -> Sequence[LogRecord]:
        """Up to `max_records` records from `start_offset` (empty at or past the end)."""

    @abstractmethod
    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(e, end): e is the largest epoch <= `epoch` that has records in the log and `end`
        the offset just after its last record. (0, 0) when no such epoch exists."""

    def epoch_at(self, offset: int) -> int:
        """Epoch of the record at `offset` (which must exist)."""
        return self.read(offset, 1)[0].epoch

    def start_offset(self) -> int:
        return 0


class MemoryLog(ReplicatedLog):
    """In-memory log with honest crash semantics: `crash()` drops what was not flushed."""

    def __init__(self) -> None:
        self._records: list[LogRecord] = []
        self._flushed = 0
        # epoch cache: parallel lists of epochs and the offset where each starts
        self._epochs: list[int] = []
        self._epoch_starts: list[int] = []

    def end_offset(self) -> int:
        return len(self._records)

    def flushed_end_offset(self) -> int:
        return self._flushed

    def last_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else 0

    def append(self, records: Sequence[LogRecord]) -> None:
        for r in records:
            if r.offset != len(self._records):
                raise ValueError(f"append at offset {r.offset}, log end is {len(self._records)}")
            if not self._epochs or r.epoch > self._epochs[-1]:
                self._epochs.append(r.epoch)
                self._epoch_starts.append(r.offset)
            elif r.epoch < self._epochs[-1]:
                raise ValueError(f"epoch {r.epoch} at offset {r.offset} below last epoch {self._epochs[-1]}")
            self._records.append(r)

    def flush(self) -> None:
        self._flushed = len(self._records)

    def truncate_to(self, offset: int) -> None:
        if offset >= len(self._records):
            return
        del self._records[offset:]
        self._flushed = min(self._flushed, offset)
        while self._epoch_starts and self._epoch_starts[-1] >= offset:
            self._epochs.pop()
            self._epoch_starts.pop()

    def read(self, start_offset: int, max_records: int) -> Sequence[LogRecord]:
        return self._records[start_offset:start_offset + max_records]

    def epoch_at(self, offset: int) -> int:
        return self._records[offset].epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        i = bisect.bisect_right(self._epochs, epoch) - 1
        if i < 0:
            return (0, 0)
        end = self._epoch_starts[i + 1] if i + 1 < len(self._epochs) else len(self._records)
        return (self._epochs[i], end)

    # --- test and simulation helpers ---

    def crash(self) -> None:
        """Lose every record that was appended but not flushed."""
        self.truncate_to(self._flushed)

    def records(self, durable_only: bool = False) -> list[LogRecord]:
        return self._records[:self._flushed] if durable_only else list(self._records)
