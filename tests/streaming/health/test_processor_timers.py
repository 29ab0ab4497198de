"""The stateful processors with scripted input and processing-time timers (PySpark's TwsTester
runs the processor's handlers as Spark does, with in-memory state and a settable clock).
Every flavour, pandas and row with one quorum per key and the row flavour with quorums in
buckets (`bucket`), must behave the same."""
from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from streaming.health import statuses as S
from streaming.health.config import HealthConfig
from streaming.health.schema import DEAD_LETTER_KEY, DEAD_LETTER_KIND, HEALTH_COLUMNS

from .processor_harness import APIS, Harness
from .quorum_script import KEY, QuorumScript
from .tracker_harness import DEMO_START, demo_timeline, event_differences, fold_in_batches, seeds


def latest(rows: list[dict[str, Any]], kind: str, rid: int | None = None) -> dict[str, Any]:
    return [r for r in rows if r["kind"] == kind and r.get("replica_id") == rid][-1]


@pytest.fixture(params=APIS)
def harness(request) -> Harness:
    return Harness(request.param)


@pytest.fixture(params=["pandas", "row"])
def quorum_per_key_harness(request) -> Harness:
    return Harness(request.param)


def test_output_rows_carry_every_schema_column(harness):
    rows = harness.feed(QuorumScript().run(2000))
    assert rows and all(set(r) == set(HEALTH_COLUMNS) for r in rows)
    assert latest(rows, "quorum")["status"] == S.HEALTHY


def test_timer_ticks_reevaluate_a_silent_quorum_without_input(harness):
    harness.feed(QuorumScript().run(3000))
    rows = harness.advance(5000)
    ticks = [r for r in rows if r["kind"] == "quorum"]
    assert len(ticks) == 5 and all(r["silent"] for r in ticks)
    # The quorum's clock moves on with processing time: 3 s of event time + 5 s of silence.
    assert ticks[-1]["now_ms"] - ticks[0]["now_ms"] == 4000


def test_the_jobs_own_downtime_is_not_the_quorums_silence(harness):
    harness.feed(QuorumScript().run(3000))
    # The job is killed and restarts 60 s later: a new run, whose first tick comes before the
    # records of those 60 s are read. The quorum was not silent; the job was away.
    harness.proc_ms += 60_000
    harness.processor.logic.run_id = harness.proc_ms
    rows = harness._rows(harness.tester.setProcessingTime(harness.proc_ms))
    assert latest(rows, "quorum")["status"] == S.HEALTHY
    assert all(r["status"] == S.CAUGHT_UP for r in rows if r["kind"] == "replica")
    # A quorum that stays silent in the new run is still found out.
    rows = harness.advance(4000)
    assert latest(rows, "quorum")["status"] == S.LEADERLESS


def test_silent_quorum_loses_its_good_statuses_and_no_replica_is_called_unreachable(harness):
    harness.feed(QuorumScript().run(3000))
    early = harness.advance(2000)
    assert latest(early, "quorum")["status"] == S.HEALTHY  # not yet past the fetch timeout
    rows = harness.advance(2000)
    assert latest(rows, "quorum")["status"] == S.LEADERLESS
    assert {latest(rows, "replica", r)["status"] for r in (1, 2, 3)} == {S.UNKNOWN}
    assert all(r["status"] != S.UNREACHABLE for r in early + rows if r["kind"] == "replica")


def test_verdicts_reached_in_silence_clear_at_once_when_input_resumes(harness):
    script = QuorumScript()
    harness.feed(script.run(3000))
    harness.advance(4000)
    script.run(4000)  # the quorum kept working; its records were lost on the way
    harness.proc_ms += 100
    harness.tester.setProcessingTime(harness.proc_ms)
    rows = harness.feed(script.run(500))
    assert latest(rows, "quorum")["status"] == S.HEALTHY  # no recovery hold for silence
    assert {latest(rows, "replica", r)["status"] for r in (1, 2, 3)} == {S.CAUGHT_UP}


def test_quorum_silent_past_the_forget_horizon_is_forgotten_and_its_state_cleared(harness):
    harness = Harness(harness.api, HealthConfig(quorum_forget_ms=5000))
    harness.feed(QuorumScript().run(1000))
    rows = harness.advance(6000)
    assert [r for r in rows if r["kind"] == "forget"][0]["replica_id"] is None
    assert harness.stored(KEY) is None
    assert harness.advance(3000) == []  # no timer left behind


def test_records_delayed_by_a_stalled_input_are_judged_at_their_own_time(harness):
    # The input stops for 30 s (broker down); the quorum kept working and its records arrive
    # late. They must be judged at their event time, not at the clock extrapolated meanwhile.
    script = QuorumScript()
    harness.feed(script.run(3000))
    assert latest(harness.advance(30_000), "quorum")["status"] == S.LEADERLESS
    rows = harness.feed(script.run(1000))
    assert latest(rows, "quorum")["status"] == S.HEALTHY
    assert latest(rows, "replica", 2)["last_fetch_age_ms"] == 0


def test_a_hundred_observers_cost_rows_only_when_they_change(harness):
    # A Kafka cluster's brokers are its observers. Steady, they emit no replica rows after the
    # first full picture; one that stops fetching shows up, alone.
    observers = tuple(range(10, 110))
    script = QuorumScript(observers=observers)
    first = harness.feed(script.run(2000))
    assert {r["replica_id"] for r in first if r["kind"] == "replica"} == {1, 2, 3, *observers}
    steady = [harness.feed(script.run(1000)) for _ in range(10)]
    counts = [sum(1 for r in rows if r["kind"] == "replica") for rows in steady]
    assert max(counts[2:]) <= 5, counts
    assert all(sum(1 for r in rows if r["kind"] == "quorum") == 1 for rows in steady)
    script.mode[50] = "silent"
    rows = [r for _ in range(4) for r in harness.feed(script.run(1000)) if r["kind"] == "replica"]
    assert {r["replica_id"] for r in rows} >= {50} and latest(rows, "replica", 50)["status"] == S.UNREACHABLE
    # The whole quorum is one value (every state call is a round trip to the JVM).
    assert len(harness.stored(KEY)["replicas"]) == 103


def test_state_written_with_one_map_entry_per_replica_is_read_and_moved_into_the_value(quorum_per_key_harness):
    harness = quorum_per_key_harness
    # The layout before: the quorum's value without its replicas, one map entry per replica.
    script = QuorumScript()
    harness.feed(script.run(3000))
    whole = json.loads(harness.tester.peekValueState("quorum", KEY)[0])
    replicas = whole.pop("replicas")
    harness.tester.updateValueState("quorum", KEY, (json.dumps(whole),))
    harness.tester.updateMapState("replicas", KEY, {(rid,): (json.dumps(r),) for rid, r in replicas.items()})
    script.mode[3] = "silent"
    rows = harness.feed(script.run(3000))
    # the replicas' history came along: voter 3 goes from caught up to unreachable, not from unknown
    assert [(r["previous_status"], r["status"]) for r in rows
            if r["kind"] == "transition" and r["replica_id"] == 3] == [(S.CAUGHT_UP, S.UNREACHABLE)]
    moved = json.loads(harness.tester.peekValueState("quorum", KEY)[0])
    assert set(moved["replicas"]) == set(replicas) and not harness.tester.peekMapState("replicas", KEY)


def test_rejects_under_the_dead_letter_key_come_back_as_dead_letters_and_leave_no_state(harness):
    rows = harness.feed_raw(DEAD_LETTER_KEY, [b"garbage", b"[1]", None])
    assert [(r["kind"], r["status"]) for r in rows] == [(DEAD_LETTER_KIND, "invalid_json"),
                                                       (DEAD_LETTER_KIND, "not_an_object"),
                                                       (DEAD_LETTER_KIND, "invalid_json")]
    lines = [json.loads(r["dead_letter"]) for r in rows]
    assert [(line["reason"], line["field"], line["offset"]) for line in lines] == [
        ("invalid_json", "record", 0), ("not_an_object", "record", 1), ("invalid_json", "record", 2)]
    assert lines[0]["value"] == base64.b64encode(b"garbage").decode() and "value" not in lines[2]
    # no quorum state and no timer for the reserved key: ticks emit nothing
    assert harness.advance(3 * harness.cfg.tick_ms) == []


def test_a_quorum_key_holding_only_rejects_keeps_no_state(harness):
    bad = json.dumps({**QuorumScript().fetch(2, 100), "replica_id": -2}).encode()
    rows = harness.feed_raw(KEY, [bad, b'{"cluster_id":"c1"}'])
    assert [(r["kind"], r["status"]) for r in rows] == [(DEAD_LETTER_KIND, "out_of_range"),
                                                       (DEAD_LETTER_KIND, "missing_field")]
    assert harness.stored(KEY) is None
    assert harness.advance(3 * harness.cfg.tick_ms) == []


@pytest.mark.parametrize("api", ["row", "bucket", "bucket-pandas"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_records_decided_in_the_processor_give_what_the_same_records_packed_give(seed, api):
    # The same timeline, with a voter cut off and back, and collector snapshots, through two
    # processors: one fed the records as Spark packs those its fast path accepts, one fed them
    # raw, for the contract's decoder in the processor. Rejects mixed in change nothing.
    import random
    print("seed", seed)
    rng = random.Random(seed)
    runs = []
    for raw in (False, True):
        script, h = QuorumScript(observers=(4,)), Harness(api, max_future_ms=10 ** 13)
        rows = []
        for step in range(30):
            if step == 8:
                script.mode[3] = "silent"
            if step == 20:
                script.mode[3] = "follow"
            records = script.run(500) + ([script.snapshot()] if step % 4 == 0 else [])
            if raw:
                values = [json.dumps(r).encode() for r in records]
                values.insert(rng.randrange(len(values) + 1), b'{"type":"fetch","version":1}')
                rows += [r for r in h.feed_raw(KEY, values) if r["kind"] != DEAD_LETTER_KIND]
            else:
                for r in records:
                    r["_offset"], h.offset = h.offset, h.offset + 1
                rows += h.feed(records)
            h.proc_ms += 500
            h.tester.setProcessingTime(h.proc_ms)
        runs.append(rows)
    assert runs[0] == runs[1]
    assert any(r["kind"] == "transition" and r["replica_id"] == 3 for r in runs[0])


@pytest.mark.parametrize("api", APIS)
def test_the_processor_gives_the_events_of_every_record_folded_one_by_one(api):
    # The synthetic quorum's demo timeline (one fault of every kind) at a busy quorum's rate,
    # through the processor as Spark runs it with a one-second trigger (each replica's fetches
    # reduced per tick, the state packed between batches, timers), and folded record by record:
    # the same events, at instants at most a tick apart (test_fetch_reduction.py says why).
    for seed in seeds(2):
        records, _faults = demo_timeline(seed, append_ms=20)
        every = fold_in_batches(records, lambda: 1000, HealthConfig(), reduce=False)
        h, rows, i, end = Harness(api), [], 0, DEMO_START
        while i < len(records):
            end += 1000
            batch = []
            while i < len(records) and records[i][0] < end:
                batch.append({**records[i][1], "_offset": i})
                i += 1
            rows += h.spark_batch(end, {KEY: batch})
        assert len([r for r in rows if r["kind"] == "transition"]) >= 5, seed
        assert event_differences(every, rows, h.cfg.tick_ms) == [], seed
