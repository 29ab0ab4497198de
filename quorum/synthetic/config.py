"""What a synthetic quorum run is made of (model.py simulates it): how many clusters, voters and
observers, the seed, the Kafka settings whose timing it imitates, and the scripted faults."""
from __future__ import annotations

from dataclasses import dataclass, field

from quorum.synthetic.faults import Fault, FaultSpecError


@dataclass(frozen=True)
class SyntheticConfig:
    clusters: int = 1
    voters: int = 3
    observers: int = 1
    seed: int = 0
    start_ms: int | None = None            # synthetic clock at start; None: the wall clock now
    cluster_prefix: str = "cluster"
    first_cluster: int = 0                 # number of the first cluster id (shards of one run differ)
    topic: str = "__cluster_metadata"
    partition: int = 0
    append_interval_ms: int | None = None  # workload batches; None: idle, NoOps only
    append_batch: int = 1
    noop_interval_ms: int = 500            # metadata.max.idle.interval.ms
    metrics_interval_ms: int = 1000
    fetch_timeout_ms: int = 2000           # controller.quorum.fetch.timeout.ms
    election_timeout_ms: int = 1000        # controller.quorum.election.timeout.ms
    long_poll_ms: int = 500
    network_delay_ms: tuple[int, int] = (1, 4)
    stall_fetch_interval_ms: int = 1000    # a stalled replica's (slow) fetch cadence
    storm_period_ms: int = 1500
    faults: tuple[Fault, ...] = field(default_factory=tuple)

    def __post_init__(self):
        if self.clusters < 1 or self.voters < 1 or self.observers < 0:
            raise ValueError("need at least 1 cluster and 1 voter, and observers >= 0")
        if self.append_interval_ms is not None and self.append_interval_ms < 1:
            raise ValueError("append_interval_ms must be >= 1")
        for f in self.faults:
            if f.cluster >= self.clusters:
                raise FaultSpecError(f"fault {f.kind} names cluster {f.cluster}, but there are {self.clusters}")
            if f.replica is not None and not 1 <= f.replica <= self.voters + self.observers:
                raise FaultSpecError(f"fault {f.kind} names replica {f.replica}, but ids are "
                                     f"1..{self.voters + self.observers}")
            if f.kind == "split_brain" and f.replica is not None and f.replica > self.voters:
                raise FaultSpecError("split_brain needs a voter")

    def events_per_second(self) -> float:
        """Rough steady-state rate, to size a run."""
        fetchers = self.voters - 1 + self.observers
        per_fetcher = 1000 / self.append_interval_ms if self.append_interval_ms else 1000 / self.noop_interval_ms
        nodes = self.voters + self.observers
        return self.clusters * (fetchers * per_fetcher + nodes * 1000 / self.metrics_interval_ms)
