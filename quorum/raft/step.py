"""The call into the core being handled: its time and the Output it builds. The node starts
one per public call; handlers read the time and add their effects here, so the core itself
never reads a clock nor acts on the world."""
from __future__ import annotations

from quorum.raft.output import Output


class Step:
    __slots__ = ("now", "out")

    def __init__(self, now: int) -> None:
        self.now = now
        self.out = Output()

    def begin(self, now: int) -> None:
        # time never runs backwards inside the core
        self.now = max(now, self.now)
        self.out = Output()
