"""What the streaming benchmarks report of a micro-batch, from the progress Spark writes, the
trigger it runs the job on, and what its `summary` stage keeps of a batch."""
import sys
from pathlib import Path

# the benchmark runs as a script, its sibling modules importable by name
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from types import SimpleNamespace  # noqa: E402

import pytest  # noqa: E402

from streaming.config import ConfigError, JobConfig  # noqa: E402
from idle_cost import idle_goal  # noqa: E402
from live_steps import Step, step_up  # noqa: E402
from streaming_bench import DEFAULT_TRIGGER_MS, state_time_ms, trigger_settings  # noqa: E402

# the parts of a progress event (`StreamingQueryProgress.json`) that the figure reads: two
# stateful operators, each with its partitions' times summed by Spark
PROGRESS = {
    "batchId": 7,
    "durationMs": {"addBatch": 900, "triggerExecution": 1000},
    "stateOperators": [
        {"operatorName": "transformWithStateExec", "allUpdatesTimeMs": 700, "allRemovalsTimeMs": 3,
         "commitTimeMs": 20, "numRowsTotal": 0},
        {"operatorName": "stateStoreSave", "allUpdatesTimeMs": 40, "allRemovalsTimeMs": 0,
         "commitTimeMs": 5},
    ],
}


def test_state_time_adds_every_operator_and_its_commit():
    assert state_time_ms(PROGRESS) == 700 + 3 + 20 + 40 + 0 + 5


def test_a_batch_without_state_or_with_a_missing_field_counts_zero():
    assert state_time_ms({"batchId": 0}) == 0
    assert state_time_ms({"stateOperators": [{"allUpdatesTimeMs": 12}]}) == 12


@pytest.mark.parametrize("trigger_ms", [1000, 5000])
def test_the_trigger_option_sets_the_trigger_and_the_tick_alike(trigger_ms):
    cfg = JobConfig.from_dict({"source": {"bootstrap_servers": "127.0.0.1:9092", "topic": "events"},
                               **trigger_settings(trigger_ms)})
    assert (cfg.job.trigger_interval_ms, cfg.health.tick_ms) == (trigger_ms, trigger_ms)


def test_a_trigger_longer_than_the_default_tick_alone_is_refused():
    # why the option sets both: the job refuses a trigger its tick could not keep up with
    with pytest.raises(ConfigError, match="tick_ms"):
        JobConfig.from_dict({"source": {"bootstrap_servers": "127.0.0.1:9092", "topic": "events"},
                             "job": trigger_settings(5000)["job"]})


def test_the_default_trigger_is_the_jobs_own():
    assert DEFAULT_TRIGGER_MS == JobConfig().job.trigger_interval_ms


def test_the_idle_goals_are_quoted_as_the_default_triggers_on_another():
    assert idle_goal(DEFAULT_TRIGGER_MS, 200) == "goal 1 quorum <= 1.5 x the source alone, 200 <= 0.40"
    assert idle_goal(5000, 200) == ("on a 5000 ms trigger; the goal 1 quorum <= 1.5 x the source alone, 200 <= 0.40 "
                                    "on the job's own")


class Workload:
    """Steps as the benchmark runs them, on a workload that publishes at most `cap` events/s;
    each step sustained below `fails_at`."""

    def __init__(self, cap: float, fails_at: float = float("inf")):
        self.args = SimpleNamespace(start_rate=1000, ceiling_start_rate=None, factor=1.5, max_rate=400_000)
        self.cap, self.fails_at, self.asked = cap, fails_at, []

    def step(self, spark, master, rate, stage):
        self.asked.append(rate)
        published = min(rate, self.cap)
        step = Step(master, rate, stage, load=SimpleNamespace(rate=published))
        if published >= self.fails_at:
            step.failures.append("batches over the trigger")
        return step


def quiet(monkeypatch):
    import live_steps
    monkeypatch.setattr(live_steps, "print_step", lambda step: None)


def test_steps_stop_where_the_workload_publishes_no_faster(monkeypatch):
    quiet(monkeypatch)
    bench = Workload(cap=4000)
    steps = step_up(bench, None, "local[2]", "source")
    assert bench.asked == [1000, 1500, 2250, 3375, 5062.5, 7593.75]
    assert (steps.highest.rate, steps.failed, steps.capped) == (4000, None, True)
    assert steps.rate_text(with_failed=True) == "4,000 events/s (the highest rate the workload reached)"


def test_steps_stop_at_the_first_step_not_sustained(monkeypatch):
    quiet(monkeypatch)
    bench = Workload(cap=1e9, fails_at=3000)
    steps = step_up(bench, None, "local[2]")
    assert (steps.highest.rate, steps.failed.rate, steps.capped) == (2250, 3375, False)
    assert steps.rate_text(with_failed=True) == "2,250 events/s (3,375 not)"


@pytest.mark.spark
def test_the_summary_stage_keeps_a_replicas_first_and_last_fetch_of_a_tick_and_every_other_record(spark):
    import dataclasses
    import datetime as dt
    import json

    from pyspark.sql import functions as F

    from quorum import events
    from streaming.decode import route_records
    from streaming_bench import SUMMARY_FIELDS, summary_of

    t0 = 1_800_000_000_000  # a tick's start
    fetch = events.Fetch("c1", "__cluster_metadata", 0, t0, 1, 3, 2, "voter", 10, 3, 12, 11, "valid")
    metrics = events.Metrics("c1", "__cluster_metadata", 0, t0 + 5, 2, "follower", 1, 3, 12, 11, 10, t0 - 50,
                             11, 40, (1, 2, 3), 0)
    records = [dataclasses.replace(fetch, time_ms=t0 + ms) for ms in (100, 500, 900, 1100, 1200)]  # two ticks
    records += [dataclasses.replace(fetch, time_ms=t0 + 300, replica_id=4), metrics]
    values = [events.encode(r) for r in records] + [b"{not json"]
    rows = [(v, b"k", "events", 0, i, dt.datetime(2026, 1, 1)) for i, v in enumerate(values)]
    kafka = spark.createDataFrame(rows, "value binary, key binary, topic string, partition int, offset bigint, "
                                        "timestamp timestamp")
    routed = kafka.transform(route_records(now=F.timestamp_millis(F.lit(t0 + 2000)), carry=SUMMARY_FIELDS))
    out = [json.loads(r.record_json) for r in summary_of(routed).collect()]
    fetches = sorted((r["replica_id"], r["time_ms"] - t0) for r in out if r.get("type") == "fetch")
    # replica 2: 100 and 900 of its first tick (500 between them dropped), both of its second
    assert fetches == [(2, 100), (2, 900), (2, 1100), (2, 1200), (4, 300)]
    assert sorted(r.get("type", "raw") for r in out if r.get("type") != "fetch") == ["metrics", "raw"]
