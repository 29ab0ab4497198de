"""The same timeline gives the same verdicts however it is cut into micro-batches.

The synthetic quorum's demo timeline (one fault of every kind) is folded by the tracker as the
processor folds it, in micro-batches of 0.4 s, 1 s and 3 s of records and all at once (a job
started from the earliest offsets reads a quorum's history in one batch). The transitions must
be the same, each within two ticks of the quorum's clock, and so must the caught-up windows.

The one listed difference: while a leader is cut off and while leadership moves every few
seconds (the `leader_partition` and `election_storm` faults, until one recovery hold after they
end), verdicts are sampled at ticks that fall at different instants of each leadership change
depending on where batches end, so a status that lasts about a tick may show or not (an
isolated leader's followers seen `unreachable` just before they elect another). The alert
rules' `for:` durations are longer than that. Likewise at the start: whether a replica's first
window is a short `unknown` one depends on whether an evaluation falls before its first fetch.
"""
from __future__ import annotations

from streaming.health.config import HealthConfig

from .tracker_harness import DEMO_START as START
from .tracker_harness import DEMO_MS, demo_timeline, fold_in_batches, seeds

SAMPLED = ("leader_partition", "election_storm")  # where verdicts depend on where ticks fall
CFG = HealthConfig()


def fold(records, batch_ms: int) -> list[dict]:
    """Every row the tracker emits, fed `batch_ms` of records at a time as the processor feeds it."""
    return fold_in_batches(records, lambda: batch_ms, CFG)


def test_transitions_and_windows_do_not_depend_on_where_micro_batches_end():
    for seed in seeds(3):
        records, truth = demo_timeline(seed)
        sampled = [(e.start_ms, e.end_ms + CFG.recovery_hold_ms + 2 * CFG.tick_ms) for e in truth
                   if e.kind in SAMPLED]
        assert len(sampled) == len(SAMPLED)
        sampled.append((START, START + CFG.unreachable_after_ms))

        def judged(rows: list[dict], kind: str) -> list[dict]:
            return [r for r in rows if r["kind"] == kind and not any(a <= r["now_ms"] <= b for a, b in sampled)]

        reference = fold(records, 1000)
        expected = judged(reference, "transition")
        assert len(expected) >= 10, seed
        for batch_ms in (400, 3000, DEMO_MS):
            rows = fold(records, batch_ms)
            got = judged(rows, "transition")
            assert [(r.get("replica_id"), r["previous_status"], r["status"]) for r in got] == \
                [(r.get("replica_id"), r["previous_status"], r["status"]) for r in expected], (seed, batch_ms)
            late = [(r["now_ms"] - START, e["now_ms"] - START) for r, e in zip(got, expected)
                    if abs(r["now_ms"] - e["now_ms"]) > 2 * CFG.tick_ms]
            assert late == [], (seed, batch_ms)
            windows = [(w["replica_id"], w["status"]) for w in judged(rows, "window")]
            assert windows == [(w["replica_id"], w["status"]) for w in judged(reference, "window")], (seed, batch_ms)
