"""What each part of the health stage's Python costs a collector-shaped quorum a batch, and what
would be left without it.

A fleet of `--quorums` collector-shaped quorums (each second a `quorum_snapshot` and a `metrics`
record per voter, from the synthetic fleet model, as `fleet_job.py` publishes them) is cut into
one-second micro-batches and spread over `--buckets` buckets. Each batch goes through the
bucketed health logic on one core, as a state partition's task runs it: the bucket's value
decoded, its records grouped by quorum and folded, each quorum evaluated, the rows packed, the
value encoded again. The state store is a Python dict here (its round trips to the JVM are not
in it; `fleet_job.py` measures the whole job).

Four runs, the same warm-up before each, then `--seconds` batches measured:

  whole (the baseline): what the job does;
  one evaluation a batch: the evaluation at a tick of the quorum's clock inside a batch left out
    (a collector-shaped quorum's records cross one tick a batch, just before its closing
    evaluation);
  no evaluation: the records folded in, no quorum evaluated (what a quorum whose evaluation
    could be skipped would cost);
  state and records only: the bucket's value decoded and encoded, the records unpacked and
    grouped, nothing folded (the floor of any design that keeps the state in Python as one
    JSON value a bucket).

Each run prints the CPU per quorum per batch and its share of the whole, then a goal line: at one
batch a second, the issue's target of 0.15 ms of CPU per quorum per second for the whole job is
150 us a quorum a batch, and the Python stage alone must be under it for the job to be (the
JVM's part comes on top: holding here is needed, not enough). The three cut runs change
verdicts; they say what a design that removed that part could gain, not what the job may do.
There is no load generator and no server: the records are made before the runs, and the CPU
that took is printed apart.

    .venv/bin/python benchmarks/health_stage_parts.py                 # 400 quorums, about 1 minute
    .venv/bin/python benchmarks/health_stage_parts.py --quorums 2000
"""
from __future__ import annotations

import argparse
import contextlib
import time
from typing import Any, Iterator

from collector_load import fleet_models, poll_records
from goals import Goal
from quorum import events
from streaming.health.buckets import _BucketLogic, quorum_name
from streaming.health.config import HealthConfig
from streaming.health.processor import freeze_worker_heap, records_by_quorum
from streaming.health.schema import pack_health_row, pack_record
from streaming.health.tracker import QuorumTracker

START = 1_800_000_000_000
MAX_FUTURE_MS = 300_000
MODES = ("whole", "one evaluation a batch", "no evaluation", "state and records only")
TARGET_US = 150  # 0.15 ms of CPU per quorum per second, at one batch a second


class _Value:
    """A state variable kept in this process (the job's is a round trip to the JVM's state server)."""

    def __init__(self) -> None:
        self.value = None

    def get(self) -> Any:
        return self.value

    def update(self, value: Any) -> None:
        self.value = value

    def clear(self) -> None:
        self.value = None


class _Handle:
    def __init__(self) -> None:
        self.value = _Value()

    def getValueState(self, *_: Any) -> _Value:
        return self.value

    def registerTimer(self, _ms: int) -> None:
        pass

    def deleteTimer(self, _ms: int) -> None:
        pass


def batches(quorums: int, buckets: int, seconds: int) -> list[list[list[str]]]:
    """Each second's packed records, by bucket; each quorum polled once a second, the polls
    spread over the second as the fleet collector spreads them."""
    models = fleet_models(quorums, START)
    out, offset = [], 0
    for second in range(seconds):
        by_bucket: list[list[str]] = [[] for _ in range(buckets)]
        for i, model in enumerate(models):
            for record in poll_records(model, START + second * 1000 + i * 1000 // quorums):
                d = events.to_dict(record)
                d["_kafka_partition"], d["_offset"] = 0, offset
                offset += 1
                by_bucket[i % buckets].append(pack_record(d))
        out.append(by_bucket)
    return out


@contextlib.contextmanager
def without(mode: str) -> Iterator[None]:
    """The tracker with the mode's part left out, put back after."""
    evaluate, apply_all = QuorumTracker._evaluate, QuorumTracker.apply_all

    def evaluate_cut(self, now_ms, proc_ms, silent, emit_snapshot):
        if mode == "one evaluation a batch" and emit_snapshot:
            return evaluate(self, now_ms, proc_ms, silent, emit_snapshot)
        self.s.last_eval_ms = max(now_ms, self.s.last_eval_ms)  # the tick counted as done
        return []

    if mode != "whole":
        QuorumTracker._evaluate = evaluate_cut
    if mode == "state and records only":
        QuorumTracker.apply_all = lambda self, records, reduce=True: None
    try:
        yield
    finally:
        QuorumTracker._evaluate, QuorumTracker.apply_all = evaluate, apply_all


def run_batch(logics: list[_BucketLogic], clock: list[int], by_bucket: list[list[str]], proc_ms: int) -> int:
    """One batch through every bucket, as handleInputRows runs it; the rows emitted."""
    clock[0] = proc_ms
    rows = 0
    for logic, texts in zip(logics, by_bucket):
        logic.open_bucket()
        trackers: dict[str, Any] = {}
        for quorum, records in records_by_quorum(texts, logic.wall_clock_ms, MAX_FUTURE_MS, {}).items():
            trackers.setdefault(quorum_name(quorum), logic.open_input(quorum)).apply_all(records)
        out = logic.close_inputs(trackers, proc_ms)
        out += logic.due(proc_ms, set(trackers))
        logic.close_bucket(proc_ms, fired=False)
        rows += len([pack_health_row(row) for row in out])
    return rows


def measure(mode: str, work: list[list[list[str]]], warm: int, cfg: HealthConfig) -> tuple[float, float]:
    """CPU seconds a batch and rows a batch over the measured batches, fresh state each run."""
    clock = [START]
    logics = []
    for _ in work[0]:
        logic = _BucketLogic(cfg, wall_clock_ms=lambda: clock[0])
        logic.init(_Handle())
        logics.append(logic)
    for second in range(warm):
        run_batch(logics, clock, work[second], START + (second + 1) * 1000)
    rows = 0
    with without(mode):
        cpu = time.process_time()
        for second in range(warm, len(work)):
            rows += run_batch(logics, clock, work[second], START + (second + 1) * 1000)
        cpu = time.process_time() - cpu
    measured = len(work) - warm
    return cpu / measured, rows / measured


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quorums", type=int, default=400)
    ap.add_argument("--buckets", type=int, default=16, help="the job's: 8 a state partition")
    ap.add_argument("--warmup-seconds", type=int, default=10, help="batches before each run's measured ones")
    ap.add_argument("--seconds", type=int, default=20, help="batches measured")
    ap.add_argument("--quorum-row-refresh-ms", type=int, default=10_000, help="as fleet_job.py runs the job")
    a = ap.parse_args()
    cfg = HealthConfig(quorum_row_refresh_ms=a.quorum_row_refresh_ms)
    load_cpu = time.process_time()
    work = batches(a.quorums, a.buckets, a.warmup_seconds + a.seconds)
    load_cpu = time.process_time() - load_cpu
    freeze_worker_heap()
    print(f"health stage's Python, {a.quorums} collector-shaped quorums (3 voters, 4 records a quorum a batch) "
          f"in {a.buckets} buckets, one core; {a.warmup_seconds} batches warm-up, {a.seconds} measured; "
          f"making the records took {load_cpu:.1f} CPU s before the runs, not in the figures")
    per_quorum: dict[str, float] = {}
    for mode in MODES:
        cpu, rows = measure(mode, work, a.warmup_seconds, cfg)
        per_quorum[mode] = cpu / a.quorums * 1e6
        print(f"  {mode:<24} {per_quorum[mode]:6.0f} us a quorum a batch, {cpu * 1000:7.1f} ms a batch, "
              f"{rows:6.0f} rows a batch, {per_quorum[mode] / per_quorum['whole']:.2f} x the whole")
    for mode in MODES:
        print(Goal(f"python_{mode.replace(' ', '_')}", per_quorum[mode], per_quorum["whole"], TARGET_US,
                   "us a quorum a batch", "the whole", on_value=True).line())


if __name__ == "__main__":
    main()
