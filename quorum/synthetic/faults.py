"""Scripted faults for the synthetic quorum, and the ground-truth timeline they produce.

A fault is written `KIND@START+DURATION[:CLUSTER[/REPLICA]]`, times with a unit (ms, s, m),
START relative to the generator's start, e.g. `stall@30s+20s:cluster-0/2`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

# kind -> what a correct monitor shows while it lasts (the tests compare against this)
FAULT_KINDS: dict[str, str] = {
    "stall": "replica stalled: keeps fetching, its fetch offset stops advancing",
    "cutoff": "replica unreachable: its fetches stop reaching the leader",
    "leader_partition": "leader isolated: a new leader is elected, the old one resigns and later truncates",
    "hw_stall": "quorum stalled: the leader stops appending, the high watermark stops advancing",
    "election_storm": "election storm: the leadership moves to another voter every storm period",
    "split_brain": "split brain: a second node claims leadership in the current epoch",
}
REPLICA_FAULTS = ("stall", "cutoff", "split_brain")


class FaultSpecError(ValueError):
    pass


@dataclass(frozen=True)
class Fault:
    kind: str
    start_ms: int          # relative to the generator's start
    duration_ms: int
    cluster: int = 0       # cluster index
    replica: int | None = None  # node id; None picks a default (the first follower voter)

    def __post_init__(self):
        if self.kind not in FAULT_KINDS:
            raise FaultSpecError(f"unknown fault kind {self.kind!r}; expected one of {', '.join(FAULT_KINDS)}")
        if self.start_ms < 0 or self.duration_ms <= 0:
            raise FaultSpecError(f"fault {self.kind}: start must be >= 0 and duration > 0")


@dataclass
class TimelineEntry:
    """Something that happened, with absolute synthetic times. Faults are entries too, and so are
    their consequences (elections, truncations) so that tests can check what the monitor saw."""
    kind: str              # a fault kind, or "election", "truncation", "resignation"
    cluster_id: str
    replica_id: int        # -1 for the whole quorum
    start_ms: int
    end_ms: int | None = None
    detail: dict = field(default_factory=dict)


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m)?$")


def parse_duration_ms(text: str) -> int:
    m = _DURATION.match(text.strip())
    if not m:
        raise FaultSpecError(f"bad duration {text!r}: use e.g. 500ms, 20s, 2m")
    value, unit = float(m.group(1)), m.group(2) or "ms"
    return int(value * {"ms": 1, "s": 1000, "m": 60000}[unit])


_SPEC = re.compile(r"^(?P<kind>[a-z_]+)@(?P<start>[^+]+)\+(?P<dur>[^:]+)"
                   r"(?::(?:cluster-)?(?P<cluster>\d+)(?:/(?P<replica>\d+))?)?$")


def parse_fault(spec: str) -> Fault:
    m = _SPEC.match(spec.strip())
    if not m:
        raise FaultSpecError(f"bad fault {spec!r}: expected KIND@START+DURATION[:cluster-N[/REPLICA]], "
                             f"e.g. stall@30s+20s:cluster-0/2")
    return Fault(m.group("kind"), parse_duration_ms(m.group("start")), parse_duration_ms(m.group("dur")),
                 int(m.group("cluster") or 0), int(m.group("replica")) if m.group("replica") else None)


def demo_faults(voters: int) -> list[Fault]:
    """One of each fault on cluster 0, spread over the first four minutes, for demos."""
    follower = 2 if voters >= 2 else 1
    return [Fault("stall", 30_000, 25_000, 0, follower),
              Fault("cutoff", 75_000, 20_000, 0, voters if voters >= 3 else follower),
              Fault("leader_partition", 120_000, 15_000, 0),
              Fault("hw_stall", 160_000, 15_000, 0),
              Fault("election_storm", 200_000, 10_000, 0),
              Fault("split_brain", 230_000, 10_000, 0, follower)]
