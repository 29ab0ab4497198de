"""What the fleet benchmark reports: each cluster's snapshot intervals within the window and the
longest silence (edges included), the nearest-rank percentile, a collector's CPU by thread with
the ended threads' share, and goal lines that judge today's figures while the fleet collector is
not built."""
import sys
from pathlib import Path

# the benchmark runs as a script, its sibling modules importable by name
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from fleet_collector import Window, goal_lines  # noqa: E402
from fleet_readings import (Published, cpu_by_thread_kind, intervals, longest_silence, percentile,  # noqa: E402
                            pooled, stamps)
from goals import MB  # noqa: E402


def snap(cluster: str, t: int, kind: str = "quorum_snapshot") -> Published:
    return Published(kind, cluster, t)


def test_intervals_are_per_cluster_within_the_window_and_a_silent_stretch_counts_to_its_edge():
    records = [snap("a", t) for t in (500, 1_000, 2_000, 3_100, 9_000)] + [snap("b", 1_200), snap("b", 1_500),
                                                                           snap("c", 2_000, "quorum_poll_error")]
    times = stamps(records, {"a", "b", "c"}, "quorum_snapshot", 1_000, 4_000)
    assert times == {"a": [1_000, 2_000, 3_100], "b": [1_200, 1_500], "c": []}
    assert intervals(times) == {"a": [1_000, 1_100], "b": [300], "c": []}
    assert sorted(pooled(intervals(times))) == [300, 1_000, 1_100]
    assert longest_silence(times, 1_000, 4_000) == 3_000  # c published no snapshot at all
    assert longest_silence({"b": [1_200, 1_500]}, 1_000, 4_000) == 2_500  # from its last one to the end


def test_percentiles_are_nearest_rank():
    values = list(range(1, 101))
    assert (percentile(values, 50), percentile(values, 99), percentile(values, 100)) == (50, 99, 100)
    assert percentile([7], 99) == 7 and percentile([], 50) is None


def test_cpu_by_thread_counts_threads_born_in_the_window_and_the_ended_ones_apart():
    before = {1: ("main", 1.0), 2: ("node-metrics", 0.5)}
    after = {1: ("main", 1.2), 2: ("node-metrics", 0.8), 3: ("node-metrics", 0.1)}
    shares = cpu_by_thread_kind(before, after, process_cpu_s=1.0)
    assert round(shares["main"], 6) == 0.2 and round(shares["node-metrics"], 6) == 0.4
    assert round(shares["(threads ended meanwhile)"], 6) == 0.4


def window(name: str, cpu_s: float, intervals_ms: list[int], threads: int = 9) -> Window:
    return Window(name, clusters=2, seconds=10, cpu_s=cpu_s, fixture_cpu_s=0.1, broker_cpu_s=0.2,
                  rss=[48 * MB, 50 * MB], pss=[36 * MB, 36 * MB], threads=[threads, threads], files=[20, 20],
                  snapshot_intervals=intervals_ms, silence_ms=max(intervals_ms))


def test_without_the_fleet_collector_the_goals_judge_todays_figures_and_say_so():
    steady, hung = window("steady", 0.36, [1_000] * 99 + [1_100]), window("hung", 0.4, [1_000] * 98 + [3_000] * 2)
    lines = [g.line() for g in goal_lines(steady, hung, [], {"fleet-0000": (3, 2 * MB)})]
    assert lines[0] == ("goal cpu_per_cluster (today: a process per cluster): 18.00 ms CPU per s against a process "
                        "per cluster 18.00 ms CPU per s = 1.00 (goal <= 0.50 ms CPU per s): short")
    assert lines[1].startswith("goal rss_per_cluster (today: a process per cluster): 49 MB") and \
        lines[1].endswith("short")
    assert lines[2].endswith("(goal <= 1200.00 ms): holds") and lines[3].endswith("(goal <= 1200.00 ms): short")
    assert lines[4].startswith("goal threads_in_all (today: a process per cluster): 18.00 threads")
    assert lines[5] == ("goal threads_after_hangs (today: a process per cluster): 3 threads more than before the "
                        "hangs (goal <= 8 threads): holds")
    assert lines[6].endswith("2.0 MB more than before the hangs (goal <= 20.0 MB): holds")


def test_the_hang_cycles_goals_say_what_measures_them_when_not_run():
    steady = window("steady", 0.36, [1_000])
    lines = [g.line() for g in goal_lines(steady, steady, [], {})]
    assert lines[-1] == "goal rss_after_hangs (today: a process per cluster): not measured (--hang-cycles)"
