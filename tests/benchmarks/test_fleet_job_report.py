"""What the fleet job benchmark reports: its collector-shaped records are the collector's own, the
state it counts as written is the changelog's new bytes, the marginal CPU and the goal lines are
judged from two sizes; and a run at tiny sizes prints every figure and every goal."""
import os
import subprocess
import sys
from pathlib import Path

# the benchmark runs as a script, its sibling modules importable by name
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import pytest  # noqa: E402

from collector_load import CutOff, follower_at, metrics_record, poll_records  # noqa: E402
from fleet_job import FleetRun, detection_s, goal_lines, marginal_ms, written_between  # noqa: E402
from goals import MB  # noqa: E402
from streaming_bench import Batch  # noqa: E402

from quorum import events  # noqa: E402
from quorum.kafka_watch import kafka_node_metrics  # noqa: E402
from quorum.synthetic.fleet_model import NOOP_INTERVAL_MS, ClusterModel  # noqa: E402


def test_a_nodes_metrics_record_is_what_the_collector_reads_of_its_exporter():
    now = 1_800_000_000_000
    for index in range(20):
        model = ClusterModel(index, seed=7, start_ms=now - 300_000)
        for t in (now, now + 1, now + NOOP_INTERVAL_MS // 2, now + NOOP_INTERVAL_MS + 3):
            for node in model.voter_ids:
                assert metrics_record(model, node, t) == kafka_node_metrics.metrics_record(
                    model.exporter_text(node, t), model.cluster_id, node, t, model.voter_ids)


def test_a_poll_is_one_snapshot_and_one_metrics_record_per_node_all_valid_under_the_quorums_key():
    now = 1_800_000_000_000
    model = ClusterModel(3, seed=7, start_ms=now - 300_000)
    records = poll_records(model, now)
    assert [r.TYPE for r in records] == ["quorum_snapshot", "metrics", "metrics", "metrics"]
    assert {events.record_key(r) for r in records} == {b"fleet-0003/__cluster_metadata-0"}
    for r in records:
        assert events.decode(events.encode(r), now) == r
    assert records[0].answered_by == records[0].leader_id and len(records[0].voters) == 3


def test_a_voter_cut_off_stands_still_in_the_leaders_answer_and_its_exporter_gives_nothing():
    now = 1_800_000_000_000
    model = ClusterModel(0, seed=7, start_ms=now - 300_000)
    cut = CutOff(0, follower_at(model, now), now)
    assert cut.replica != model.view(now).leader_id
    before = poll_records(model, now - 1000, cut)
    assert len(before) == 4  # not cut off yet
    later = poll_records(model, now + 5_000, cut)
    assert [r.node_id for r in later[1:]] == [n for n in model.voter_ids if n != cut.replica]
    voters = {v.replica_id: v for v in later[0].voters}
    frozen = {v.replica_id: v for v in poll_records(model, now, cut)[0].voters}[cut.replica]
    assert voters[cut.replica] == frozen
    others = [v for rid, v in voters.items() if rid != cut.replica and rid != later[0].leader_id]
    assert all(v.last_fetch_timestamp_ms > frozen.last_fetch_timestamp_ms + 4_000 for v in others)


def test_detection_is_the_first_unreachable_transition_of_the_voter_cut_off_after_its_cut():
    cut = CutOff(0, 2, 10_000)
    transitions = [(9.5, {"cluster_id": "fleet-0000", "replica_id": 2, "status": "unreachable"}),
                   (12.0, {"cluster_id": "fleet-0001", "replica_id": 2, "status": "unreachable"}),
                   (12.5, {"cluster_id": "fleet-0000", "replica_id": 3, "status": "unreachable"}),
                   (13.0, {"cluster_id": "fleet-0000", "replica_id": 2, "status": "lagging"}),
                   (13.5, {"cluster_id": "fleet-0000", "replica_id": 2, "status": "unreachable"})]
    assert detection_s(transitions, cut) == 3.5
    assert detection_s(transitions[:3], cut) is None


def test_state_written_counts_new_and_grown_changelog_bytes_and_the_rest_apart():
    before = {Path("state/0/0/1.changelog"): 100, Path("state/0/0/1.zip"): 50}
    after = {Path("state/0/0/1.changelog"): 100, Path("state/0/0/2.changelog"): 300, Path("state/0/1/3.delta"): 20,
             Path("state/0/0/1.zip"): 50, Path("state/0/0/2.zip"): 70, Path("state/0/0/.2.changelog.crc"): 12}
    assert written_between(before, after) == (320, 70)


def run(quorums: int, cpu: float, driver_s: float, changelog: int, durations=(400, 900), rss=900 * MB) -> FleetRun:
    r = FleetRun(quorums, 1, seconds=10.0, job_cpu_s=cpu * 10, driver_cpu_s=driver_s, changelog_bytes=changelog,
                 scrapes_ms=[20.0, 40.0], peak_pss=rss)
    r.batches = [Batch(0.0, d, 0, None) for d in durations]
    r.detection_s = 3.0
    return r


def test_the_goals_judge_the_largest_size_and_the_ratios_between_the_two():
    small, large = run(200, 0.5, 0.2, 200 * 10 * 700), run(2000, 1.4, 0.6, 2000 * 10 * 1200, (800, 1300),
                                                             1600 * MB)
    assert marginal_ms(small, large) == pytest.approx(0.5)
    lines = {g.name: g.line() for g in goal_lines([small, large])}
    assert lines["batches_within_trigger_2000_quorums"].endswith("= 1.30 (goal <= 1): short")
    assert lines["marginal_cpu_200_to_2000"].startswith("goal marginal_cpu_200_to_2000: 0.50 ms CPU per quorum")
    assert lines["marginal_cpu_200_to_2000"].endswith("short")
    assert lines["state_written_2000_quorums"].startswith("goal state_written_2000_quorums: 1200.00 bytes")
    assert lines["driver_per_batch_200_to_2000"].endswith("= 3.00 (goal <= 2): short")
    assert lines["exporter_scrape_2000_quorums"].endswith("holds")
    assert lines["memory_2000_quorums"].endswith("short")
    assert lines["detection_2000_quorums"] == ("goal detection_2000_quorums: 3.0 s against the unreachable "
                                               "threshold 2.0 s = 1.50 (goal <= 4.0 s): holds")


def test_one_size_alone_judges_nothing_between_sizes():
    lines = {g.name: g.line() for g in goal_lines([run(200, 0.5, 0.2, 1000)])}
    assert "not measured" in lines["marginal_cpu_200_to_200"]
    assert "not measured" in lines["driver_per_batch_200_to_200"]


# two Spark sessions, two minutes: opt-in, as the suite keeps under its 45 minutes
@pytest.mark.skipif(not os.environ.get("QUORUM_BENCHMARK_RUNS"),
                    reason="set QUORUM_BENCHMARK_RUNS=1 to run the fleet job benchmark at tiny sizes")
@pytest.mark.slow
@pytest.mark.spark
def test_a_run_at_tiny_sizes_prints_every_figure_and_every_goal():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "fleet_job.py"), "--quick", "--sizes", "2", "6",
                          "--warmup-seconds", "10", "--seconds", "8", "--scrape-every", "3"],
                         env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    for figure in ("batches:", "p99", "job CPU", "driver CPU", "bytes of changelog per batch", "exporter:",
                   "detection of a cut-off voter", "peak memory", "RSS summed", "load generator CPU",
                   "marginal CPU from 2 to 6 quorums"):
        assert figure in text, (figure, text)
    goals = [line for line in text.splitlines() if line.startswith("goal ")]
    assert [g.split(":")[0] for g in goals] == [
        "goal batches_within_trigger_6_quorums", "goal detection_6_quorums", "goal marginal_cpu_2_to_6",
        "goal state_written_6_quorums", "goal driver_per_batch_2_to_6", "goal exporter_scrape_6_quorums",
        "goal memory_6_quorums"]
    assert all(g.endswith(("holds", "short")) or "not measured" in g for g in goals)
