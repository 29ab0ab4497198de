"""Faults a running node can be told to simulate, for demos and tests: networking paused,
cut off from chosen peers (inbound, outbound or both), a slow disk. The transport and the
server consult this object; `quorum fault` changes it through the control socket."""
from __future__ import annotations

from dataclasses import dataclass, field

DIRECTIONS = ("in", "out", "both")


@dataclass
class Faults:
    paused: bool = False                                   # no traffic in or out at all
    cut_in: set[int] = field(default_factory=set)          # drop what these peers send us
    cut_out: set[int] = field(default_factory=set)         # drop what we send them
    slow_disk_ms: int = 0                                  # added to every fsync

    def drops_outbound(self, peer: int) -> bool:
        return self.paused or peer in self.cut_out

    def drops_inbound(self, peer: int | None) -> bool:
        return self.paused or (peer is not None and peer in self.cut_in)

    def cut(self, peers: list[int], direction: str) -> None:
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)}")
        if direction in ("in", "both"):
            self.cut_in.update(peers)
        if direction in ("out", "both"):
            self.cut_out.update(peers)

    def clear(self) -> None:
        self.paused = False
        self.cut_in.clear()
        self.cut_out.clear()
        self.slow_disk_ms = 0

    def describe(self) -> dict:
        return {"paused": self.paused, "cut_in": sorted(self.cut_in), "cut_out": sorted(self.cut_out),
                "slow_disk_ms": self.slow_disk_ms}
