"""What one render of the exporter's /metrics costs the driver: prometheus_client's rendering of
the registry (what a scrape served before) against the health collector's kept text
(streaming/sinks/exposition_cache.py), for the same snapshot, in the same run.

The snapshot is a fleet of `--sizes` quorums of 3 voters (the fleet job's shape: 28 series a
quorum and 17 a replica, 158,011 series at 2,000), with values of their own per quorum. Renders:

  library: `generate_latest` of the registry, as every scrape rendered it (the baseline);
  first: the kept text's first render (every quorum's lines formatted);
  after a batch: every quorum row new (as each batch brings one per quorum) and one replica in
      twenty changed, then a render;
  unchanged: a render with nothing new since the last (a second scrape between batches).

Each figure is the median of `--repeats` renders' wall time (this process, one thread), with the
library's time divided by it. Both formats are compared byte for byte before anything is timed.
Then a goal line for the largest fleet: a render after a batch takes at most a tenth of the job's
1 s trigger (a scrape holds the driver's GIL, which the batch writer also needs).

    .venv/bin/python benchmarks/exposition_render.py                 # 200 and 2,000 quorums
"""
from __future__ import annotations

import argparse
import statistics
import time

from prometheus_client import CollectorRegistry, generate_latest

from streaming.health.config import HealthConfig
from streaming.health.statuses import CAUSES, QUORUM_STATUSES, REPLICA_STATUSES
from streaming.sinks.monitor import MonitorMetrics
from streaming.sinks.prometheus_metrics import HealthCollector
from streaming.sinks.snapshot import HealthSnapshot, QuorumView

from goals import Goal

TOPIC = "__cluster_metadata"


def quorum_row(i: int, tick: int) -> dict:
    return {"cluster_id": f"fleet-{i:04d}", "topic": TOPIC, "partition": 0, "leader_id": 1, "leader_epoch": 3 + i % 5,
            "high_watermark": 1000 * i + tick, "hw_age_ms": 250 + tick % 1000, "voters": 3, "voters_caught_up": 3,
            "voters_reachable": 3, "majority_reachable": True, "epoch_changes_window": 0, "leader_changes_window": 0,
            "candidate_epoch": -1, "network_partition": False, "cut_off_voters": "", "leaders_claimed": 1,
            "zombie_leaders": 0, "fault_tolerance": 1, "poll_failures": 0, "poll_error": None, "elections_total": i % 7,
            "leader_changes_total": i % 3, "incarnation": 0, "voter_set_changes_total": 0,
            "status": QUORUM_STATUSES[i % 2]}


def replica_row(i: int, rid: int, tick: int) -> dict:
    return {"replica_id": rid, "role": "voter", "status": REPLICA_STATUSES[(i + rid) % 2],
            "cause": CAUSES[i % len(CAUSES)] if (i + rid) % 2 else None, "lag_records": (i + tick) % 40,
            "lag_ms": None if rid == 3 else 12.0 * rid, "last_fetch_age_ms": 100 + tick % 500,
            "caught_up_ratio": 0.99, "truncations_total": 0, "truncated_records_total": 0}


def fleet(quorums: int) -> HealthSnapshot:
    snapshot = HealthSnapshot()
    for i in range(quorums):
        snapshot.quorums[(f"fleet-{i:04d}", TOPIC, 0)] = QuorumView(
            quorum_row(i, 0), {rid: replica_row(i, rid, 0) for rid in (1, 2, 3)})
    return snapshot


def a_batch(snapshot: HealthSnapshot, tick: int) -> None:
    """Every quorum row new, one replica row in twenty (as the processor sends them)."""
    for i, (key, view) in enumerate(sorted(snapshot.quorums.items())):
        replicas = dict(view.replicas)
        if (i + tick) % 20 == 0:
            replicas[1] = replica_row(i, 1, tick)
        snapshot.quorums[key] = QuorumView(quorum_row(i, tick), replicas)


def median_ms(render, repeats: int, before=lambda: None) -> float:
    times = []
    for _ in range(repeats):
        before()
        t0 = time.perf_counter()
        render()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


RENDER_BOUND_MS = 100.0  # a tenth of the job's trigger


def measure(quorums: int, repeats: int) -> Goal:
    snapshot = fleet(quorums)
    monitor = MonitorMetrics(HealthConfig(), clock=lambda: 1_000.0)
    collector = HealthCollector(snapshot, monitor)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    library_text = generate_latest(registry)
    assert collector.exposition() == library_text, "the kept text is not the library's"
    series = sum(1 for line in library_text.splitlines() if line and not line.startswith(b"#"))

    library = median_ms(lambda: generate_latest(registry), repeats)
    first = median_ms(lambda: HealthCollector(snapshot, monitor).exposition(), repeats)
    ticks = iter(range(1, 10**9))
    after_batch = median_ms(collector.exposition, repeats, before=lambda: a_batch(snapshot, next(ticks)))
    assert collector.exposition() == generate_latest(registry), "the kept text is not the library's after batches"
    unchanged = median_ms(collector.exposition, repeats)
    print(f"{quorums:,} quorums, {series:,} series: library {library:.1f} ms; kept text: first {first:.1f} ms "
          f"({library / first:.1f} x faster), after a batch {after_batch:.1f} ms ({library / after_batch:.1f} x), "
          f"unchanged {unchanged:.2f} ms ({library / unchanged:.0f} x)", flush=True)
    return Goal(f"render_after_a_batch_{quorums}_quorums", after_batch, library, RENDER_BOUND_MS, unit="ms",
                floor_name="the library's render", on_value=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[200, 2000], help="fleet sizes (quorums)")
    ap.add_argument("--repeats", type=int, default=7, help="renders per figure (the median is printed)")
    args = ap.parse_args()
    goals = [measure(quorums, args.repeats) for quorums in args.sizes]
    print(goals[-1].line())


if __name__ == "__main__":
    main()
