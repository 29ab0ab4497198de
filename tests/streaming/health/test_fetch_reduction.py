"""Each replica's fetches reduced per tick give the verdicts of every record folded one by one.

The rule (`streaming.health.reduce`) on hand-made runs, and the differential: the synthetic
quorum's demo timeline (one fault of every kind) at a busy quorum's rate, folded record by record
and reduced, must give the same events, at instants at most a tick apart (the verdict tests of
`test_tracker.py`, `test_real_conditions.py` and `test_causes.py` are differentials too: see
conftest.py).
Seeds are random and printed; `SYNTH_SEED` replays them.
"""
from __future__ import annotations

import random

from streaming.health import reduce as R
from streaming.health.config import HealthConfig
from streaming.health.schema import EVENT_KINDS

from .tracker_harness import DEMO_START as START
from .tracker_harness import EVENT_INSTANTS, demo_timeline, event_differences, fold_in_batches, seeds

TICK = 1000


def fetch(t: int, replica: int = 2, offset: int = 10, outcome: str = "valid", leader: int = 1, epoch: int = 3,
          view: bool = True) -> dict:
    return {"type": "fetch", "cluster_id": "c", "topic": "t", "partition": 0, "time_ms": START + t,
            "leader_id": leader, "leader_epoch": epoch, "replica_id": replica, "replica_role": "voter",
            "fetch_offset": offset, "leader_log_end_offset": offset, "high_watermark": offset, "outcome": outcome,
            "last_fetch_timestamp_ms": START + t if view else None,
            "last_caught_up_timestamp_ms": START + t if view else None}


def metrics(t: int, node: int = 3) -> dict:
    return {"type": "metrics", "cluster_id": "c", "topic": "t", "partition": 0, "time_ms": START + t,
            "node_id": node, "leader_id": 1, "epoch": 3, "state": "follower", "high_watermark": 10,
            "log_end_offset": 10}


def kept(records: list[dict]) -> list[tuple]:
    """What the rule keeps of `records`, after another replica's fetch that shows the high
    watermark first (a batch's first sight of it is kept, as the end of a stall would be)."""
    shown = fetch(0, replica=9, offset=records[0]["high_watermark"])
    return [(r["type"], r["time_ms"] - START, r.get(R.FETCHES)) for r in R.reduce_fetches([shown] + records, TICK)
            if r is not shown]


def test_a_run_keeps_its_first_and_last_fetch_and_the_last_stands_for_the_gaps_between():
    run = [fetch(t) for t in (100, 300, 450, 700, 900)]
    assert kept(run) == [("fetch", 100, None), ("fetch", 900, 4)]
    last = R.reduce_fetches([fetch(0, replica=9)] + run, TICK)[-1]
    # gaps 200, 150, 250, 200: the peak of 250 has faded to 187 by the last gap, 200
    assert last[R.GAP_PEAK_MS] == 200
    # two records: nothing dropped, nothing to carry
    assert kept(run[:2]) == [("fetch", 100, None), ("fetch", 300, None)]


def test_runs_end_at_a_tick_another_source_a_refused_fetch_a_step_back_and_an_old_writer():
    assert kept([fetch(t) for t in (100, 500, 900, 1100, 1500, 1900)]) == \
        [("fetch", 100, None), ("fetch", 900, 2), ("fetch", 1100, None), ("fetch", 1900, 2)]
    # a node's own record: the quorum's clock must stand where the leader's records put it
    assert kept([fetch(100), fetch(200), fetch(300), metrics(350), fetch(400), fetch(500), fetch(600)]) == \
        [("fetch", 100, None), ("fetch", 300, 2), ("metrics", 350, None), ("fetch", 400, None), ("fetch", 600, 2)]
    # a diverging fetch: the valid one after it says where the log was cut, and is kept
    assert kept([fetch(100), fetch(200), fetch(300, outcome="diverging"), fetch(400, offset=5), fetch(500, offset=6),
                 fetch(600, offset=7)]) == \
        [("fetch", 100, None), ("fetch", 200, None), ("fetch", 300, None), ("fetch", 400, None), ("fetch", 600, 2)]
    assert kept([fetch(100), fetch(200), fetch(300, offset=4), fetch(400, offset=4)]) == \
        [("fetch", 100, None), ("fetch", 200, None), ("fetch", 300, None), ("fetch", 400, None)]
    # a writer that does not publish its view: the tracker replays KIP-836 over every record
    assert len(kept([fetch(t, view=False) for t in (100, 200, 300, 400)])) == 4
    # other replicas' runs go on beside each other; a reduced record is kept as it is
    both = [fetch(t, replica=2 + t // 50 % 2) for t in range(100, 600, 50)]
    assert [(rid, len([r for r in R.reduce_fetches([fetch(0, replica=9)] + both, TICK) if r["replica_id"] == rid]))
            for rid in (2, 3)] == \
        [(2, 2), (3, 2)]
    reduced = R.reduce_fetches([fetch(t) for t in (0, 100, 200, 300)], TICK)
    assert R.reduce_fetches(reduced + [fetch(400)], TICK) == reduced + [fetch(400)]


def test_the_high_watermark_moving_on_after_a_pause_is_kept_where_it_moved():
    def hw_at(t, hw):
        return {**fetch(t), "high_watermark": hw}
    # advancing every 100 ms: nothing to keep; after 400 ms without moving: the fetch it moved at
    assert kept([hw_at(100, 11), hw_at(200, 12), hw_at(300, 13), hw_at(400, 14), hw_at(500, 15)]) == \
        [("fetch", 100, None), ("fetch", 500, 4)]
    assert kept([hw_at(100, 10), hw_at(200, 10), hw_at(300, 10), hw_at(400, 11), hw_at(500, 11), hw_at(600, 11)]) \
        == [("fetch", 100, None), ("fetch", 300, 2), ("fetch", 400, None), ("fetch", 500, None),
            ("fetch", 600, None)]


def test_the_carried_gap_measures_end_where_folding_every_gap_would():
    for seed in seeds(3):
        rnd = random.Random(seed)
        for _ in range(300):
            gaps = [rnd.choice((0, rnd.randrange(1, 400), rnd.randrange(400, 1000)))
                    for _ in range(rnd.randrange(2, 40))]
            peak, mean = rnd.choice((-1, rnd.randrange(0, 3000))), rnd.choice((-1, rnd.randrange(1, 3000)))
            run, p, m, t = R._Run(0, 0, 0), peak, mean, 0
            for g in gaps:
                t += g
                run.add(t, 0)
                if g > 0:
                    m = g if m < 0 else (2 * m + g) // 3
                    p = R.peak_step(p, g)
            if run.fetches < 2:
                continue
            carried = {R.FETCHES: run.fetches, R.GAP_PEAK_MS: run.peak, R.GAP_MEAN_MS: run.mean,
                       R.GAP_FIRST_MEAN_MS: run.first_mean}
            got_peak, got_mean = R.fold_gaps(peak, mean, carried)
            assert got_peak == p, (seed, gaps, peak)
            assert abs(got_mean - m) <= 2, (seed, gaps, mean)  # the per-step rounding, done once


def test_a_busy_quorums_timeline_reduced_gives_the_same_events():
    """Read in micro-batches of about a second, as the job reads it, and as one backlog: the
    same events (transitions, windows, causes, truncations...). The one listed difference: an
    evaluation at a tick inside a run sees the replica as of the run's first record, caught up
    then, so an instant may come up to a tick apart."""
    for seed in seeds(3):
        records, _faults = demo_timeline(seed, append_ms=20)  # a busy quorum: about 210 events/s
        rnd = random.Random(seed)
        for name, batch_ms in (("1 s", lambda: 1000), ("0.7-1.3 s", lambda: rnd.randrange(700, 1300)),
                               ("backlog", lambda: 260_000)):
            state = rnd.getstate()
            every = fold_in_batches(records, batch_ms, HealthConfig(), reduce=False)
            rnd.setstate(state)  # the same batches
            reduced = fold_in_batches(records, batch_ms, HealthConfig())
            for kind in ("transition", "window"):
                assert len([r for r in every if r["kind"] == kind]) >= 5, (seed, kind)
            assert event_differences(every, reduced, TICK) == [], (seed, name)
            want = [r for r in every if r["kind"] in EVENT_KINDS]
            got = [r for r in reduced if r["kind"] in EVENT_KINDS]
            print(seed, name, len(want), "events, instants apart:",
                  sum(w.get(f) != g.get(f) for w, g in zip(want, got) for f in EVENT_INSTANTS))


def test_the_differential_reports_another_event_and_an_instant_beyond_a_tick():
    base = {"kind": "transition", "replica_id": 3, "previous_status": "caught_up", "status": "unreachable",
            "cause": "down", "now_ms": START}
    quorum_row = {"kind": "quorum", "now_ms": START}  # not an event: never compared
    assert event_differences([base, quorum_row], [base], TICK) == []
    assert event_differences([base], [{**base, "now_ms": START + TICK}], TICK) == []
    assert len(event_differences([base], [{**base, "now_ms": START + TICK + 1}], TICK)) == 1
    assert len(event_differences([base], [{**base, "cause": "partitioned"}], TICK)) == 1
    window = {"kind": "window", "replica_id": 3, "status": "caught_up", "window_start_ms": START,
              "window_end_ms": START + 5000}
    assert len(event_differences([window], [{**window, "window_end_ms": None}], TICK)) == 1
    assert len(event_differences([base, window], [window, base], TICK)) == 2
    assert event_differences([base], [base, {**base, "kind": "window"}], TICK) == ["1 events one by one, 2 reduced"]
