"""The benchmark's goal lines: each figure against Spark's own from the same run, and whether the
goal holds, on the ratio or on the figure itself."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from goals import MB, Goal  # noqa: E402


def test_a_ratio_goal_that_holds_and_one_that_falls_short():
    assert Goal("idle_1_quorum", 0.15, 0.12, 1.5, "CPU s per s", "the source alone").line() == (
        "goal idle_1_quorum: 0.15 CPU s per s against the source alone 0.12 CPU s per s = 1.25 (goal <= 1.5): holds")
    assert Goal("idle_1_quorum", 0.30, 0.10, 1.5, "CPU s per s", "the source alone").line().endswith(
        "= 3.00 (goal <= 1.5): short")


def test_throughput_is_a_floor_to_reach():
    goal = Goal("throughput", 30_161, 75_264, 0.7, "events/s", "source + decode", at_least=True)
    assert goal.line() == ("goal throughput: 30,161 events/s against source + decode 75,264 events/s = 0.40 "
                           "(goal >= 0.7): short")
    assert Goal("throughput", 60_000, 75_000, 0.7, "events/s", at_least=True).holds


def test_a_goal_on_the_figure_itself_is_judged_on_it_with_the_ratio_beside_it():
    memory = Goal("memory_1_quorum", 700 * MB, 500 * MB, 800 * MB, "MB", "Spark's source alone", on_value=True)
    assert memory.line() == ("goal memory_1_quorum: 700 MB against Spark's source alone 500 MB = 1.40 "
                             "(goal <= 800 MB): holds")
    assert not Goal("first_verdict", 21.0, 9.0, 15.0, "s", "Spark's first batch", on_value=True).holds


def test_a_goal_not_measured_says_what_measures_it():
    assert Goal("warm_up", None, None, 2.0, how_to_measure="--lifecycle").line() == \
        "goal warm_up: not measured (--lifecycle)"


def test_a_goal_on_the_figure_itself_is_judged_without_its_floor():
    memory = Goal("memory_1_quorum", 700 * MB, None, 800 * MB, "MB", "Spark's source alone", on_value=True)
    assert memory.line() == ("goal memory_1_quorum: 700 MB against Spark's source alone not measured "
                             "(goal <= 800 MB): holds")
