"""State size and output rows of one quorum of 3 voters + 100 observers (a Kafka cluster whose
brokers are its observers), through the health state machine, fed one second at a time.

Prints the state kept per quorum (the quorum's own JSON value and one map entry per replica, as
the processor stores them), how many replica entries change per second (those are written back),
and the rows emitted per second with changed-only replica rows against every row every time
(the baseline, measured in the same run).

  .venv/bin/python benchmarks/health_state_size.py [--observers 100] [--minutes 10]
"""
from __future__ import annotations

import argparse
import json
import time

from quorum.synthetic.model import SyntheticConfig, SyntheticQuorum
from streaming.health.config import HealthConfig
from streaming.health.tracker import QuorumTracker, new_state


def run(observers: int, minutes: int, run_id: int | None) -> dict:
    cfg = HealthConfig()
    model = SyntheticQuorum(SyntheticConfig(clusters=1, voters=3, observers=observers, seed=1, start_ms=0))
    state = new_state("cluster-0", "__cluster_metadata", 0)
    rows = records = written = 0
    previous: dict[str, str] = {}
    started = time.process_time()
    for second in range(1, minutes * 60 + 1):
        batch = [json.loads(value) for _, value, _ in model.events_until(second * 1000)]
        records += len(batch)
        tracker = QuorumTracker(cfg, state, run_id)
        tracker.apply_all(batch)
        rows += len(tracker.evaluate(second * 1000))
        entries = {rid: json.dumps(r, separators=(",", ":")) for rid, r in state["replicas"].items()}
        written += sum(1 for rid, text in entries.items() if previous.get(rid) != text)
        previous = entries
    cpu = time.process_time() - started
    quorum_part = {k: v for k, v in state.items() if k != "replicas"}
    sizes = [len(t) for t in previous.values()]
    return {"records": records, "rows_per_s": rows / (minutes * 60), "written_per_s": written / (minutes * 60),
            "quorum_bytes": len(json.dumps(quorum_part, separators=(",", ":"))), "replica_bytes_max": max(sizes),
            "replica_bytes_total": sum(sizes), "replicas": len(sizes), "cpu_s": cpu}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--observers", type=int, default=100)
    ap.add_argument("--minutes", type=int, default=10)
    args = ap.parse_args()
    full = run(args.observers, args.minutes, None)
    changed = run(args.observers, args.minutes, run_id=1)
    total = changed["quorum_bytes"] + changed["replica_bytes_total"]
    print(f"quorum of 3 voters + {args.observers} observers, {args.minutes} min, "
          f"{changed['records'] / (args.minutes * 60):,.0f} records/s")
    print(f"state: {total / 1024:.1f} KiB per quorum = quorum value {changed['quorum_bytes']:,} B + "
          f"{changed['replicas']} replica entries of at most {changed['replica_bytes_max']:,} B")
    print(f"replica entries written: {changed['written_per_s']:.1f} per second of {changed['replicas']}")
    print(f"rows emitted: {changed['rows_per_s']:.1f}/s changed-only vs {full['rows_per_s']:.1f}/s every row "
          f"({changed['rows_per_s'] / full['rows_per_s']:.2f} x); tracker CPU {changed['cpu_s']:.1f} s vs "
          f"{full['cpu_s']:.1f} s ({changed['cpu_s'] / full['cpu_s']:.2f} x)")


if __name__ == "__main__":
    main()
