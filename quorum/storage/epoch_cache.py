"""The leader-epoch cache: for each epoch, the offset of its first record.

It answers the divergence check of Fetch ("what is the end offset of epoch E in your
log?") and the follower's truncation. The log rebuilds it from its batches on start
(the batches are the truth); it is also written to `leader-epoch-checkpoint` in the
data directory, atomically, so an operator or a tool can read it without scanning the
log, and so a disagreement between the two is visible in the recovery report.
"""
from __future__ import annotations

import bisect
from pathlib import Path

from quorum.storage.atomic_file import write_atomically

CHECKPOINT_NAME = "leader-epoch-checkpoint"
_FORMAT_VERSION = 0


class EpochCache:
    def __init__(self, entries: list[tuple[int, int]] | None = None):
        self._epochs: list[int] = []
        self._starts: list[int] = []
        for epoch, start in entries or []:
            self.assign(epoch, start)

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts))

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset` (a no-op if the latest epoch is
        already `epoch`). Returns whether the cache changed."""
        if self._epochs and epoch <= self._epochs[-1]:
            if epoch == self._epochs[-1]:
                return False
            raise ValueError(f"epoch {epoch} is below the latest epoch {self._epochs[-1]}")
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        return True

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else 0

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(largest epoch <= `epoch`, the offset where it ends) as Kafka's OffsetForLeaderEpoch
        answers it: the start of the next higher epoch, or the log end for the latest one;
        (-1, -1) when the log has no epoch <= `epoch`."""
        i = bisect.bisect_right(self._epochs, epoch)
        if i == 0:
            return -1, -1
        if i == len(self._epochs):
            return self._epochs[-1], log_end_offset
        return self._epochs[i - 1], self._starts[i]

    def epoch_at(self, offset: int) -> int:
        """The epoch of the record at `offset` (0 for an empty cache)."""
        i = bisect.bisect_right(self._starts, offset)
        return self._epochs[i - 1] if i else 0

    def truncate_from(self, end_offset: int) -> bool:
        """Forget epochs that start at or after `end_offset` (the log was truncated there)."""
        i = bisect.bisect_left(self._starts, end_offset)
        changed = i < len(self._starts)
        del self._epochs[i:], self._starts[i:]
        return changed

    # --- checkpoint file --------------------------------------------------------------------

    def write(self, directory: Path) -> None:
        lines = [str(_FORMAT_VERSION), str(len(self._epochs))]
        lines += [f"{e} {s}" for e, s in zip(self._epochs, self._starts)]
        write_atomically(directory / CHECKPOINT_NAME, ("\n".join(lines) + "\n").encode())

    @staticmethod
    def read(directory: Path) -> list[tuple[int, int]] | None:
        """The checkpoint's entries, or None if it is missing or unreadable."""
        try:
            lines = (directory / CHECKPOINT_NAME).read_text().split("\n")
            if int(lines[0]) != _FORMAT_VERSION:
                return None
            n = int(lines[1])
            return [(int(a), int(b)) for a, b in (lines[2 + i].split() for i in range(n))]
        except (OSError, ValueError, IndexError):
            return None
