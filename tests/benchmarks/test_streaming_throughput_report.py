"""What the throughput benchmark reports of a micro-batch, from the progress Spark writes."""
import sys
from pathlib import Path

# the benchmark runs as a script, its sibling modules importable by name
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from streaming_throughput import state_time_ms  # noqa: E402

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
