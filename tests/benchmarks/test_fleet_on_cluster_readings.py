"""What the cluster fleet benchmark reads: the exporter's current quorum statuses, the driver's
batch lines, which executor a JVM is and which worker ran how many tasks, the health stages and
the partitions each executor ran, and the goal lines they make."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from fleet_on_cluster import (ClusterRun, batch_durations, current_statuses, executor_id, goal_lines,  # noqa: E402
                              is_health_stage, partitions_by_executor, rest_time_s, tasks_by_worker, watched)


def test_the_current_status_is_the_state_set_member_at_one():
    text = "\n".join([
        '# TYPE quorum_status gauge',
        'quorum_status{cluster="fleet-0000",partition="__cluster_metadata-0",status="healthy"} 0.0',
        'quorum_status{cluster="fleet-0000",partition="__cluster_metadata-0",status="degraded"} 1.0',
        'quorum_status{cluster="fleet-0001",partition="__cluster_metadata-0",status="healthy"} 1.0',
        'quorum_replica_status{cluster="fleet-0001",partition="__cluster_metadata-0",replica="1",role="leader",'
        'status="healthy"} 1.0'])
    assert current_statuses(text) == {"fleet-0000": "degraded", "fleet-0001": "healthy"}


def test_a_quorum_is_watched_when_healthy_at_warmup_and_still_healthy_unless_cut_off():
    warm = {"fleet-0000": "healthy", "fleet-0001": "healthy", "fleet-0002": "healthy"}
    end = {"fleet-0000": "degraded", "fleet-0001": "healthy", "fleet-0002": "unknown"}
    assert watched(warm, end, 3, "fleet-0000") == 2
    assert watched(warm, end, 4, "fleet-0000") == 2  # fleet-0003 never shown


def test_batch_durations_come_from_the_jobs_batch_lines():
    log = ("2026-12-07 14:55:01,123 INFO streaming.batches: batch 41: 5000 records, 0 dead letters, 2000 quorums, "
           "1 unhealthy (fleet-0000 degraded), 812 ms\n"
           "2026-12-07 14:55:02,001 WARN spark.Something: not a batch, 3 ms\n"
           "2026-12-07 14:55:02,123 INFO streaming.batches: batch 42: 5000 records, 0 dead letters, 2000 quorums, "
           "0 unhealthy, 1204 ms\n")
    assert batch_durations(log) == [812, 1204]


def test_executors_map_to_workers_by_the_id_on_their_command_line():
    command = ("java -cp x -Xmx1024M org.apache.spark.executor.CoarseGrainedExecutorBackend --driver-url "
               "spark://CoarseGrainedScheduler@127.0.0.1:4041 --executor-id 1 --hostname 127.0.0.1 --cores 1")
    assert executor_id(command) == "1"
    assert executor_id("java org.apache.spark.deploy.worker.Worker") is None
    executors = [{"id": "driver", "totalTasks": 0}, {"id": "0", "totalTasks": 120}, {"id": "1", "totalTasks": 80},
                 {"id": "2", "totalTasks": 5}]
    assert tasks_by_worker(executors, {"0": 1, "1": 0}) == {1: 120, 0: 80}


def test_health_stages_and_the_partitions_each_executor_ran():
    state = {"numTasks": 4, "shuffleReadBytes": 10, "accumulatorUpdates": [{"name": "number of total state rows"}]}
    assert is_health_stage(state, 4)
    assert not is_health_stage({**state, "numTasks": 2}, 4)
    assert not is_health_stage({**state, "shuffleReadBytes": 0}, 4)
    tasks = [[{"index": 0, "executorId": "0", "status": "SUCCESS"}, {"index": 1, "executorId": "1", "status": "SUCCESS"},
              {"index": 2, "executorId": "1", "status": "FAILED"}],
             [{"index": 2, "executorId": "0", "status": "SUCCESS"}]]
    assert partitions_by_executor(tasks) == {"0": {0, 2}, "1": {1}}
    assert rest_time_s("2026-12-07T14:55:01.500GMT") == 1796655301.5


def test_goal_lines_judge_the_spread_the_fleet_and_the_detection():
    run = ClusterRun(3, seconds=60.0, executors={"0": {"worker": 0, "pid": 1, "tasks": 9},
                                                 "1": {"worker": 1, "pid": 2, "tasks": 9}},
                     health_partitions={"0": {0, 1}, "1": {2, 3}}, health_stages=5, watched=3, detection_s=2.5,
                     batches=[500, 700], cpu={"executor JVMs": 30.0})
    lines = [g.line() for g in goal_lines(run)]
    assert lines[0].startswith("goal cluster_partitions_spread: 2.00 workers") and lines[0].endswith("holds")
    assert lines[1].startswith("goal cluster_watches_fleet: 3.00 quorums") and lines[1].endswith("holds")
    assert lines[2].startswith("goal cluster_detection: 2.5 s") and lines[2].endswith("holds")
    run.health_partitions = {"0": {0, 1, 2, 3}}
    run.watched, run.detection_s = 2, None
    lines = [g.line() for g in goal_lines(run)]
    assert lines[0].endswith("short") and lines[1].endswith("short") and "not measured" in lines[2]
    assert "executor 1 (worker 1, pid 2): 9 tasks" in run.report()
