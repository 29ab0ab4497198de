"""Records per CPU-second of the health processor's own Python work, without Spark.

    python benchmarks/tracker_alone.py [--clusters 200] [--seconds 20] [--profile]

A synthetic timeline (3 voters + 2 observers a cluster, an append every 100 ms) is cut into
1 s micro-batches; each quorum's records of a batch, packed as Spark packs them, go through the
processor's logic as the job runs it (unpack, load the state, fold in, evaluate, save), with
the state kept in memory instead of Spark's state server. The baseline, measured in the same
run, is `json.loads` of the same packed records: the least any Python worker does per record.
What this leaves out (Spark's conversion of input and output, the state round trips) is what
a profile of the job's workers adds on top.
"""
from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from quorum import events  # noqa: E402
from quorum.synthetic.model import SyntheticConfig, SyntheticQuorum  # noqa: E402
from streaming.health.config import HealthConfig  # noqa: E402
from streaming.health.processor import _QuorumHealthLogic  # noqa: E402
from streaming.health.schema import pack_record, unpack_record  # noqa: E402

T0 = 1_700_000_000_000


class _Value:
    """A value state held in memory."""

    def __init__(self):
        self.value = None

    def get(self):
        return self.value

    def update(self, value):
        self.value = value

    def clear(self):
        self.value = None


class _EmptyMap:
    def iterator(self):
        return iter(())

    def clear(self):
        pass


class _Timers:
    def registerTimer(self, ms):
        pass

    def deleteTimer(self, ms):
        pass


def batches(clusters: int, seconds: int) -> dict[int, dict[str, list[str]]]:
    """Packed records by 1 s batch and cluster."""
    cfg = SyntheticConfig(clusters=clusters, voters=3, observers=2, seed=1, start_ms=T0, append_interval_ms=100)
    out: dict[int, dict[str, list[str]]] = {}
    for _key, value, t in SyntheticQuorum(cfg).events_until(T0 + seconds * 1000):
        record = events.to_dict(events.decode(value))
        out.setdefault((t - T0) // 1000, {}).setdefault(record["cluster_id"], []).append(pack_record(record))
    return out


def run_processor(load: dict[int, dict[str, list[str]]]) -> int:
    logic = _QuorumHealthLogic(HealthConfig(), wall_clock_ms=lambda: 0)
    logic.handle, logic.replicas = _Timers(), _EmptyMap()
    states: dict[str, _Value] = {}
    rows = 0
    for b in sorted(load):
        proc_ms = T0 + (b + 1) * 1000
        logic.wall_clock_ms = lambda: proc_ms
        for cluster, texts in load[b].items():
            logic.state = states.setdefault(cluster, _Value())
            rows += len(logic.on_input((cluster, "__cluster_metadata", 0), [[unpack_record(t) for t in texts]],
                                       proc_ms))
    return rows


def run_baseline(load: dict[int, dict[str, list[str]]]) -> int:
    return sum(len(json.loads(t)) for per_cluster in load.values() for texts in per_cluster.values() for t in texts)


def per_cpu_second(fn, load) -> float:
    started = time.process_time()
    fn(load)
    return sum(len(t) for pc in load.values() for t in pc.values()) / (time.process_time() - started)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clusters", type=int, default=200)
    p.add_argument("--seconds", type=int, default=20, help="synthetic seconds (1 s batches)")
    p.add_argument("--profile", action="store_true", help="print where the processor's time goes")
    args = p.parse_args()
    load = batches(args.clusters, args.seconds)
    n = sum(len(t) for pc in load.values() for t in pc.values())
    print(f"{n:,} records, {args.clusters} clusters, {len(load)} batches of 1 s")
    base = per_cpu_second(run_baseline, load)
    processor = per_cpu_second(run_processor, load)
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(run_processor, load)
        pstats.Stats(profile).sort_stats("tottime").print_stats(15)
    print(f"json.loads of the packed records: {base:,.0f} records/s (baseline)")
    print(f"the processor's logic: {processor:,.0f} records/s ({1e6 / processor:.1f} us a record), "
          f"{processor / base:.3f} x the baseline")
    return 0


if __name__ == "__main__":
    sys.exit(main())
