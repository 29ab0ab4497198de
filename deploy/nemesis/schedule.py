"""The fault schedule, drawn from a seed alone: the same seed and length give the same faults at
the same offsets, so a run that found something replays. What a fault lands on (which follower,
which node leads) is resolved when it starts, from the seed and the fault's index too."""
from __future__ import annotations

import random
from dataclasses import dataclass

from stack_faults import BY_KIND, MONITOR

QUIET_START_S = 20.0   # the healthy stack watched before the first fault
QUIET_END_S = 90.0     # every fault healed this long before the end: recovery is judged too
GAP_S = (3.0, 15.0)    # between two fault starts
DURATION_S = (8.0, 45.0)
SKEW_MS = (2000, 8000)  # a publisher's clock off by this much, early or late
MONITOR_FAULT_SPACING_S = 150.0  # a job restart takes a minute or more here: one monitor fault at a time

# the kinds are deploy/stack_faults.py's, by the names it gives them (`kafka-ACTION` on the Kafka
# quorum's nodes); here, how often each is drawn and on which targets: kind -> (weight, targets)
WEIGHTS: dict[str, tuple[float, dict[str, float]]] = {
    "freeze": (3, {"follower": 5, "leader": 3, "observer": 1, "majority": 1}),
    "kill": (2, {"follower": 5, "leader": 3, "observer": 1, "majority": 1}),
    "cutoff": (2, {"follower": 5, "leader": 3, "observer": 1, "majority": 1}),
    "slow-disk": (1, {"follower": 1}),
    "skew": (1, {"follower": 2, "leader": 2, "observer": 1}),
    "kafka-freeze": (2, {"kafka-follower": 4, "kafka-leader": 3, "kafka-collector": 2, "kafka-majority": 1}),
    "kafka-kill": (1, {"kafka-follower": 4, "kafka-leader": 3, "kafka-collector": 1}),
    "kafka-cutoff": (1, {"kafka-follower": 3, "kafka-leader": 2}),
    "job-kill": (0.5, {"job": 1}),
    "events-restart": (0.5, {"events": 1}),
}
# kind -> (cluster, weight, targets with their weights)
KINDS: dict[str, tuple[str, float, dict[str, float]]] = {
    kind: (BY_KIND[kind].cluster, weight, targets) for kind, (weight, targets) in WEIGHTS.items()}
INSTANT = tuple(kind for kind in KINDS if BY_KIND[kind].instant)  # over once done: nothing to heal
VOTERS_OUT = {"majority": 2, "kafka-majority": 2, "follower": 1, "leader": 1, "kafka-follower": 1, "kafka-leader": 1}
MAX_VOTERS_OUT = 2  # of 3: a majority out, never the whole quorum


@dataclass(frozen=True)
class Planned:
    index: int
    kind: str
    target: str
    start_s: float      # after the schedule's start
    duration_s: float   # until it is healed (0: a fault that is over once done)
    value: int = 0      # skew: milliseconds

    @property
    def cluster(self) -> str:
        return KINDS[self.kind][0]

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s

    def describe(self) -> str:
        what = f"{self.kind} {self.target}" + (f" {self.value:+d} ms" if self.kind == "skew" else "")
        heal = "" if self.kind in INSTANT else f", healed at +{self.end_s:.0f} s"
        return f"#{self.index} +{self.start_s:.0f} s {what}{heal}"


def draw(seed: int, minutes: float, kafka_cutoff: bool = True) -> list[Planned]:
    """Faults from QUIET_START_S until QUIET_END_S before the end, overlapping as the gaps and
    durations fall, within what the model judges: at most two voters of a quorum out at once, a
    majority fault only on a quorum with none out, one monitor fault per spacing.
    `kafka_cutoff`: whether packet-filter cuts can be made (root with iptables)."""
    rng = random.Random(seed)
    total_s = minutes * 60
    last_s = total_s - QUIET_END_S
    kinds = [k for k in KINDS if kafka_cutoff or k != "kafka-cutoff"]
    weights = [KINDS[k][1] for k in kinds]
    planned: list[Planned] = []
    t = QUIET_START_S
    while True:
        kind = rng.choices(kinds, weights)[0]
        cluster, _, targets = KINDS[kind]
        target = rng.choices(list(targets), list(targets.values()))[0]
        duration = 0.0 if kind in INSTANT else round(rng.uniform(*DURATION_S), 1)
        value = rng.choice((-1, 1)) * rng.randrange(*SKEW_MS, 500) if kind == "skew" else 0
        if t + duration > last_s:
            break
        fault = Planned(len(planned), kind, target, round(t, 1), duration, value)
        if _fits(fault, planned):
            planned.append(fault)
        t += rng.uniform(*GAP_S)
    return planned


def active(planned: list[Planned], at_s: float) -> list[Planned]:
    return [p for p in planned if p.start_s <= at_s < p.end_s]


def _fits(fault: Planned, planned: list[Planned]) -> bool:
    now = active(planned, fault.start_s)
    if fault.cluster == MONITOR:
        return all(p.cluster != MONITOR or fault.start_s - p.start_s >= MONITOR_FAULT_SPACING_S for p in planned)
    same = [p for p in now if p.cluster == fault.cluster]
    if fault.target in ("observer", "kafka-collector"):
        return not [p for p in same if p.target == fault.target]
    out = sum(VOTERS_OUT.get(p.target, 0) for p in same if p.kind != "skew")
    if fault.kind == "skew":
        return not [p for p in same if p.kind == "skew"]
    return out + VOTERS_OUT[fault.target] <= MAX_VOTERS_OUT and (fault.target not in ("majority", "kafka-majority")
                                                                 or out == 0)
