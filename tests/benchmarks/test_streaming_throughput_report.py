"""What the throughput benchmark reports of a micro-batch, from the progress Spark writes, and the
trigger it runs the job on."""
import sys
from pathlib import Path

# the benchmark runs as a script, its sibling modules importable by name
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import pytest  # noqa: E402

from streaming.config import ConfigError, JobConfig  # noqa: E402
from streaming_throughput import DEFAULT_TRIGGER_MS, idle_goal, state_time_ms, trigger_settings  # noqa: E402

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
    assert idle_goal(DEFAULT_TRIGGER_MS, 200) == "goal 1 quorum <= 0.10, 200 <= 0.25"
    assert idle_goal(5000, 200) == "on a 5000 ms trigger; the goal 1 quorum <= 0.10, 200 <= 0.25 on the job's own"
