"""The health processor's Python work per record: every record folded, against fetches reduced first.

A workload of `--clusters` quorums (3 voters + 2 observers, each leader appending every
`--append-ms`) is cut into one-second micro-batches, and each quorum's records of a batch go
through what the processor does with them, two ways, in one run on one core:

  every record (the baseline): unpacked (`schema.unpack_record`), folded one by one
    (`QuorumTracker.apply_all(reduce=False)`), then evaluated;
  reduced (the job): unpacked, each replica's fetches reduced per tick (`health/reduce.py`),
    the records kept folded, then evaluated.

It prints records a CPU second for each, their ratio, the share of records kept, and, for the
reduced path, how much of its time the unpacking, the reduction and the fold take. Apart, it
prints what the quorum's state costs to write to and read back from the state store's JSON
(`codec.dumps`, then `state.decode`), once a quorum a batch as the processor does. The rest of
the job's fixed cost per micro-batch (the state store's calls, the Python workers, the trigger)
is not in it: `job_throughput.py` measures the whole job.

    .venv/bin/python benchmarks/health_fold.py                    # about 500 events/s a quorum
    .venv/bin/python benchmarks/health_fold.py --append-ms 100    # about 50
"""
from __future__ import annotations

import argparse
import time

from quorum import events
from quorum.synthetic import SyntheticConfig, SyntheticQuorum
from streaming.health import codec
from streaming.health import reduce as R
from streaming.health.config import HealthConfig
from streaming.health.schema import KEY_COLUMNS, pack_record, unpack_record
from streaming.health.state import decode, new_state
from streaming.health.tracker import QuorumTracker

START = 1_700_000_000_000


def batches(clusters: int, append_ms: int, seconds: int) -> list[dict[tuple, list[str]]]:
    """Each second's packed records (as the processor receives them), by quorum."""
    q = SyntheticQuorum(SyntheticConfig(clusters=clusters, voters=3, observers=2, seed=11, start_ms=START,
                                        append_interval_ms=append_ms))
    out: list[dict[tuple, list[str]]] = [{} for _ in range(seconds)]
    for offset, (_key, value, t) in enumerate(q.events_until(START + seconds * 1000)):
        record = events.to_dict(events.decode(value))
        record["_kafka_partition"], record["_offset"] = 0, offset
        batch = out[min((t - START) // 1000, seconds - 1)]
        batch.setdefault(tuple(record[c] for c in KEY_COLUMNS), []).append(pack_record(record))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clusters", type=int, default=20)
    ap.add_argument("--append-ms", type=int, default=10, help="each leader's append interval")
    ap.add_argument("--seconds", type=int, default=30, help="synthetic seconds, one micro-batch each")
    a = ap.parse_args()
    cfg = HealthConfig()
    work = batches(a.clusters, a.append_ms, a.seconds)
    total = sum(len(texts) for batch in work for texts in batch.values())
    print(f"{a.clusters} quorums, {total:,} records in {a.seconds} one-second batches "
          f"({total / a.seconds / a.clusters:,.0f} events/s a quorum)")

    spent = {"every": 0.0, "unpack": 0.0, "reduce": 0.0, "fold": 0.0, "state": 0.0}
    kept = saves = 0
    for reduce in (False, True):
        states: dict[tuple, dict] = {}
        for batch in work:
            for key, texts in batch.items():
                tracker = QuorumTracker(cfg, states.setdefault(key, new_state(*key)), run_id=1)
                start = time.process_time()
                records = [unpack_record(t) for t in texts]
                unpacked = time.process_time()
                if reduce:
                    records.sort(key=lambda r: r["_offset"])
                    records = R.reduce_fetches(records, cfg.tick_ms)
                    kept += len(records)
                reduced = time.process_time()
                tracker.apply_all(records, reduce=False)
                tracker.evaluate(None, silent=False)
                end = time.process_time()
                if reduce:
                    spent["unpack"] += unpacked - start
                    spent["reduce"] += reduced - unpacked
                    spent["fold"] += end - reduced
                    states[key] = decode(codec.loads(codec.dumps(tracker.s)))  # saved, read next batch
                    spent["state"] += time.process_time() - end
                    saves += 1
                else:
                    spent["every"] += end - start
    every = spent["every"]
    reduced = spent["unpack"] + spent["reduce"] + spent["fold"]
    us = {name: seconds * 1e6 / total for name, seconds in spent.items()}
    print(f"  every record folded: {total / every:>10,.0f} records per CPU s  ({us['every']:.1f} us a record)")
    print(f"  reduced, then folded: {total / reduced:>9,.0f} records per CPU s  ({reduced * 1e6 / total:.1f} us a "
          f"record: unpack {us['unpack']:.1f}, reduce {us['reduce']:.1f}, fold {us['fold']:.1f})")
    print(f"  kept {kept / total:.1%} of the records; reduced / every record: {every / reduced:.2f} x")
    print(f"  the state written and read back: {spent['state'] * 1e6 / saves:.0f} us a quorum a batch "
          f"({us['state']:.1f} us a record, {spent['state'] / reduced:.1%} of the reduced path's time)")


if __name__ == "__main__":
    main()
