"""The streaming job watching a fleet on a Spark standalone cluster of two workers: does it watch
every quorum, with its state partitions spread over both workers?

A master and two workers (`deploy/cluster/standalone.py`, each worker one core and one
executor) run on loopback; the job is submitted to them with `deploy/cluster/spark-submit.sh` in
client mode, as an operator would, with its outputs as a fleet runs them: Prometheus as an
exporter the driver serves, the Kafka health topic, dead letters, `health.quorum_row_refresh_ms`
10000, 4 state partitions. A broker on this machine carries the collector-shaped load of
`--quorums` quorums (`collector_load.py`: a `quorum_snapshot` and a `metrics` record per node
each second, published live from a process of its own). After `--warmup-seconds` it measures
for `--seconds`:

  - where the health stage's tasks ran: each executor's tasks (the driver's Spark UI REST API),
    its worker, and which state partitions the window's health stages ran on it;
  - that every quorum is watched: the exporter's `quorum_status` shows each one `healthy` at the
    warm-up's end, and each but the one whose voter is cut off still at the window's end;
  - the micro-batches' durations (p50, p99, the longest: the job's own batch lines in the
    driver's log, Spark's `triggerExecution`) and how many there were;
  - a cut-off voter's detection time: a follower of one quorum is cut off a third of the way into
    the window, timed to its `unreachable` transition arriving on the health topic;
  - the CPU (cores) of the cluster's daemons, its executor JVMs and their Python workers, the
    driver's JVM and Python, the broker, and the load generator.

Then one line per target (`goals.py`): the health tasks on both workers, every quorum healthy,
detection within the unreachable threshold + 2 s.

It takes the warm-up and the window plus about two minutes (the cluster, the submission and
the stop): 2.5 + 2 minutes at the defaults, about 3 minutes with `--quick`.

    python benchmarks/fleet_on_cluster.py           # 2,000 quorums, 90 s warm-up, 60 s measured
    python benchmarks/fleet_on_cluster.py --quick   # 100 quorums, 30 s warm-up, 20 s: a smoke run
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import yaml

from collector_load import CollectorLoad
from fleet_job import detection_s
from fleet_readings import percentile
from goals import Goal
from paced_load import LoadResult
from process_usage import TreeCpu, cpu_seconds, descendants

ROOT = Path(__file__).resolve().parents[1]
SUBMIT = ROOT / "deploy" / "cluster" / "spark-submit.sh"
TRIGGER_MS = 1000  # the job's own trigger and health tick
# One state partition is one task of the health stage each batch: 4 gives each of the two
# workers' executors (one core each) two to run, so both hold state; more would only add tasks.
STATE_PARTITIONS = 4
BATCH_LINE = re.compile(r"streaming\.batches: batch (\d+): .*, (\d+) ms$", re.M)
STATUS_LINE = re.compile(r'^quorum_status\{cluster="([^"]+)",[^}]*status="([^"]+)"\} 1(?:\.0)?$', re.M)
SCRAPE_EVERY_S = 10
EXECUTOR_ID = re.compile(r"--executor-id (\S+)")


# --- pure readings --------------------------------------------------------------------------------

def current_statuses(exposition: str) -> dict[str, str]:
    """Each cluster's current status in the exporter's text (its `quorum_status` state set)."""
    return dict(STATUS_LINE.findall(exposition))


def watched(at_warmup: dict[str, str], at_end: dict[str, str], quorums: int, cut: str | None) -> int:
    """Quorums `healthy` at the warm-up's end and, all but the one cut off, still at the end."""
    names = [f"fleet-{i:04d}" for i in range(quorums)]
    return sum(1 for c in names if at_warmup.get(c) == "healthy" and (c == cut or at_end.get(c) == "healthy"))


def batch_durations(log_text: str) -> list[int]:
    """The health batches' durations (ms) in the job's batch lines."""
    return [int(ms) for _, ms in BATCH_LINE.findall(log_text)]


def executor_id(command: str) -> str | None:
    """The Spark executor id an executor JVM's command line was started with."""
    found = EXECUTOR_ID.search(command)
    return found.group(1) if found else None


def tasks_by_worker(executors: list[dict], worker_of: dict[str, int]) -> dict[int, int]:
    """Tasks run per worker, from the REST API's executors (`id`, `totalTasks`) and which worker
    each executor id runs under; the driver and unknown executors apart."""
    out: Counter = Counter()
    for e in executors:
        if e["id"] in worker_of:
            out[worker_of[e["id"]]] += e["totalTasks"]
    return dict(out)


def rest_time_s(stamp: str) -> float:
    """A Spark REST API time (`2026-12-07T14:55:01.123GMT`) in Unix seconds."""
    return datetime.strptime(stamp[:23], "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=timezone.utc).timestamp()


def is_health_stage(stage: dict, partitions: int) -> bool:
    """A stage of the health state: a task per state partition, reading the shuffle that brings
    each quorum's records to its partition (the source's stage writes it; AQE, which could merge
    partitions, is off in a stateful query)."""
    return stage["numTasks"] == partitions and stage.get("shuffleReadBytes", 0) > 0


def partitions_by_executor(task_lists: list[list[dict]]) -> dict[str, set[int]]:
    """Which partitions (task indexes) each executor ran, over the stages' task lists."""
    out: dict[str, set[int]] = {}
    for tasks in task_lists:
        for t in tasks:
            if t.get("status") == "SUCCESS":
                out.setdefault(t["executorId"], set()).add(t["index"])
    return out


# --- the run --------------------------------------------------------------------------------------

@dataclass
class ClusterRun:
    quorums: int
    seconds: float = 0.0
    workers: int = 2
    executors: dict[str, dict] = field(default_factory=dict)  # id -> worker, pid, totalTasks
    health_partitions: dict[str, set[int]] = field(default_factory=dict)  # executor id -> partitions
    health_stages: int = 0
    stages_in_window: bool = True  # False: no health stage began in the window, the run's are shown
    healthy_seen: list[tuple[float, int]] = field(default_factory=list)  # (s after the load's start, healthy)
    tasks_per_worker: dict[int, int] = field(default_factory=dict)  # all the app's tasks
    healthy_at_warmup: int = 0
    watched: int = 0
    cut_status: str = "?"
    others_unhealthy: dict[str, str] = field(default_factory=dict)
    batches: list[int] = field(default_factory=list)
    cpu: dict[str, float] = field(default_factory=dict)  # group -> CPU seconds in the window
    load: LoadResult | None = None
    records_read: float | None = None
    input_delay_s: float | None = None
    detection_s: float | None = None

    def workers_with_health_tasks(self) -> int:
        """Workers whose executors ran the window's health tasks (with no health stage told
        apart, those that ran any task: the executors' totals)."""
        if not self.health_stages:
            return sum(1 for n in self.tasks_per_worker.values() if n)
        return len({self.executors[e]["worker"] for e, parts in self.health_partitions.items()
                    if parts and e in self.executors})

    def report(self) -> str:
        per_worker = ", ".join(f"worker {w} {n}" for w, n in sorted(self.tasks_per_worker.items()))
        lines = [f"{self.quorums} quorums on {self.workers} workers: tasks per worker {per_worker or 'none'}"]
        for eid, e in sorted(self.executors.items()):
            parts = sorted(self.health_partitions.get(eid, ()))
            lines.append(f"    executor {eid} (worker {e['worker']}, pid {e['pid']}): {e['tasks']} tasks in all; "
                         f"health state partitions {parts or 'none'} in the "
                         f"{'window' if self.stages_in_window else 'run'}'s {self.health_stages} health stages")
        lines.append(f"    quorums healthy at the warm-up's end: {self.healthy_at_warmup} of {self.quorums}; "
                     f"watched through the window: {self.watched}; the cut-off quorum: {self.cut_status}; "
                     f"others not healthy at the end: {len(self.others_unhealthy)}"
                     + (f" ({dict(list(self.others_unhealthy.items())[:5])})" if self.others_unhealthy else ""))
        all_at = next((t for t, n in self.healthy_seen if n >= self.quorums), None)
        lines.append("    healthy quorums in the exporter every 10 s from the load's start: "
                     + ", ".join(f"{t:.0f} s {n}" for t, n in self.healthy_seen)
                     + ("; all healthy first" + (f" at {all_at:.0f} s" if all_at is not None else ": never")))
        durations = self.batches
        lines.append(f"    batches: {len(durations)} in {self.seconds:.0f} s, p50 {percentile(durations, 50) or 0} ms, "
                     f"p99 {percentile(durations, 99) or 0} ms, longest {max(durations, default=0)} ms "
                     f"(the driver's batch lines)")
        load = self.load
        if load is not None:
            lines.append(f"    input: {load.records:,} records published ({load.rate:,.0f}/s), "
                         f"{self.records_read or 0:,.0f} read when the load ended; input delay then "
                         f"{self.input_delay_s if self.input_delay_s is not None else float('nan'):.1f} s; "
                         f"generator at most {load.max_late_ms:.0f} ms late")
        lines.append("    detection of a cut-off voter: "
                     + ("not flagged" if self.detection_s is None else f"{self.detection_s:.1f} s"))
        cores = {k: v / self.seconds for k, v in self.cpu.items()}
        lines.append("    CPU (cores): " + ", ".join(f"{k} {v:.2f}" for k, v in cores.items())
                     + f"; all {sum(cores.values()):.2f} of 2")
        return "\n".join(lines)


def goal_lines(run: ClusterRun) -> list[Goal]:
    from streaming.health.config import HealthConfig
    threshold_s = HealthConfig().unreachable_after_ms / 1000
    return [
        Goal("cluster_partitions_spread", run.workers_with_health_tasks(), run.workers, 1.0, "workers",
             "the cluster's", at_least=True),
        Goal("cluster_watches_fleet", run.watched, run.quorums, 1.0, "quorums", "the fleet's", at_least=True),
        Goal("cluster_detection", run.detection_s, threshold_s, threshold_s + 2, "s", "the unreachable threshold",
             on_value=True, how_to_measure="the cut-off voter was not flagged"),
    ]


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.load(response)


def get_text(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.read().decode()
    except OSError:
        return None


class HealthTopic(threading.Thread):
    """The job's transitions as they arrive on its health topic: (arrival wall time, event)."""

    def __init__(self, bootstrap: str, topic: str):
        super().__init__(daemon=True)
        from confluent_kafka import Consumer, TopicPartition
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fleet-on-cluster",
                                  "enable.auto.commit": False})
        self.consumer.assign([TopicPartition(topic, 0, 0)])
        self.transitions: list[tuple[float, dict]] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            for m in self.consumer.consume(10_000, 0.2):
                if m.error() is None and b'"transition"' in m.value():
                    event = json.loads(m.value())
                    if event.get("event") == "transition":
                        self.transitions.append((time.time(), event))
        self.consumer.close()


class FleetOnCluster:
    def __init__(self, args, tmp: Path, broker, cluster):
        self.args, self.tmp, self.broker, self.cluster = args, tmp, broker, cluster
        self.exporter_port, self.ui_port = free_port(), free_port()
        self.topic = broker.create_topic("fleet-cluster", args.topic_partitions)
        self.health_topic = broker.create_topic("fleet-cluster-health", 1)
        self.log_path = tmp / "driver.log"

    def job_yaml(self) -> Path:
        a, run = self.args, self.tmp
        path = run / "job.yaml"
        path.write_text(yaml.safe_dump({
            "spark": {"shuffle_partitions": STATE_PARTITIONS,
                      "conf": {"spark.executor.cores": "1", "spark.executor.memory": a.executor_memory,
                               "spark.ui.enabled": "true", "spark.ui.port": str(self.ui_port)}},
            "source": {"bootstrap_servers": self.broker.bootstrap, "topic": self.topic, "starting_offsets": "earliest"},
            "job": {"checkpoint_location": str(run / "checkpoint"), "trigger_interval_ms": TRIGGER_MS},
            "health": {"tick_ms": TRIGGER_MS, "quorum_row_refresh_ms": a.quorum_row_refresh_ms},
            "dead_letters": {"enabled": True, "path": str(run / "dead-letters")},
            "sink": {"prometheus": {"mode": "exporter", "exporter_host": "127.0.0.1",
                                    "exporter_port": self.exporter_port},
                     "kafka": {"enabled": True, "bootstrap_servers": self.broker.bootstrap,
                               "topic": self.health_topic}}}))
        return path

    def submit(self) -> subprocess.Popen:
        python = sys.executable
        env = {**os.environ, "PYTHON": python, "SPARK_SUBMIT": str(Path(python).parent / "spark-submit"),
               "DIST_DIR": str(self.tmp / "dist"), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": python}
        with self.log_path.open("wb") as log:
            return subprocess.Popen(["bash", str(SUBMIT), "--master", self.cluster.url, "--config",
                                     str(self.job_yaml())], stdout=log, stderr=subprocess.STDOUT, env=env,
                                    cwd=self.tmp, start_new_session=True)

    def await_job(self, driver: subprocess.Popen, timeout_s: float = 300) -> str:
        """Waits for the exporter to serve and both workers to run an executor; the app's id."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if driver.poll() is not None:
                raise RuntimeError(f"the job exited {driver.returncode}:\n{self.driver_tail()}")
            executors = self.cluster.executors()
            if get_text(self.url("/metrics")) is not None and len(executors) == 2 and all(executors.values()):
                return get_json(f"http://127.0.0.1:{self.ui_port}/api/v1/applications")[0]["id"]
            time.sleep(1)
        raise TimeoutError(f"the job did not start on the cluster in {timeout_s:.0f} s:\n{self.driver_tail()}")

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.exporter_port}{path}"

    def driver_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def process_groups(self, driver_pid: int) -> dict[str, list[int]]:
        """The processes whose CPU the run reports, by part."""
        from deploy.cluster.standalone import command_line
        executors = [p for pids in self.cluster.executors().values() for p in pids]
        daemons = [p.pid for p in [self.cluster.master, *self.cluster.workers] if p is not None]
        driver = [driver_pid, *descendants(driver_pid)]
        # the driver's JVM names streaming/cli.py among its arguments too: the Python is the one run by python
        driver_python = [p for p in driver if "python" in command_line(p).split(" ")[0]]
        return {"cluster daemons": daemons, "executor JVMs": executors,
                "executors' Python workers": [d for e in executors for d in descendants(e)],
                "driver JVM": [p for p in driver if p not in driver_python], "driver Python": driver_python,
                "broker": [self.broker.pid, *descendants(self.broker.pid)]}

    def run(self) -> ClusterRun:
        from deploy.cluster.standalone import stop_driver
        driver = self.submit()
        try:
            app = self.await_job(driver)
            print(f"job started on {self.cluster.url} (app {app}, UI port {self.ui_port}, exporter port "
                  f"{self.exporter_port})", flush=True)
            return self.measure(driver, app)
        finally:
            stop_driver(driver)

    def measure(self, driver: subprocess.Popen, app: str) -> ClusterRun:
        a = self.args
        run = ClusterRun(a.quorums)
        health = HealthTopic(self.broker.bootstrap, self.health_topic)
        health.start()
        load = CollectorLoad(a.quorums, a.warmup_seconds + a.seconds + a.tail_seconds, self.broker.bootstrap,
                             self.topic, cut_off_after_s=a.warmup_seconds + a.seconds / 3)
        self.watch_until(load.start_ms / 1000 + a.warmup_seconds, load.start_ms / 1000, run)
        t0, log0 = time.time(), self.log_path.stat().st_size
        groups0 = self.process_groups(driver.pid)
        cpu0 = {k: {p: cpu_seconds(p, reaped_children=True) for p in pids} for k, pids in groups0.items()}
        at_warmup = current_statuses(get_text(self.url("/metrics")) or "")
        self.watch_until(t0 + a.seconds, load.start_ms / 1000, run)
        t1 = time.time()
        groups1 = self.process_groups(driver.pid)
        cpu1 = {k: {p: cpu_seconds(p, reaped_children=True) for p in pids} for k, pids in groups1.items()}
        end_text = get_text(self.url("/metrics")) or ""
        log_text = self.log_path.read_bytes()[log0:].decode(errors="replace")
        self.where_tasks_ran(run, app, t0, t1)
        run.seconds = t1 - t0
        run.cpu = {k: TreeCpu.used(cpu0.get(k, {}), cpu1[k]) for k in cpu1}
        run.batches = batch_durations(log_text)
        self.judge_statuses(run, at_warmup, current_statuses(end_text), load.cut)
        run.load = load.await_done()
        run.cpu["load generator"] = run.load.publish_cpu_s * run.seconds / run.load.publish_wall_s
        run.records_read, run.input_delay_s = (exporter_value(get_text(self.url("/metrics")) or "", name) for name in
                                               ("quorum_monitor_input_records_total",
                                                "quorum_monitor_input_delay_seconds"))
        health.done.set()
        health.join(10)
        run.detection_s = detection_s(health.transitions, load.cut)
        return run

    def watch_until(self, wall_s: float, start_s: float, run: ClusterRun) -> None:
        """Until `wall_s`, the exporter scraped every SCRAPE_EVERY_S (as Prometheus would): how
        many quorums it shows healthy."""
        while time.time() < wall_s:
            nxt = time.time() + SCRAPE_EVERY_S
            statuses = current_statuses(get_text(self.url("/metrics")) or "")
            run.healthy_seen.append((time.time() - start_s, sum(1 for s in statuses.values() if s == "healthy")))
            sleep_until(min(nxt, wall_s))

    def judge_statuses(self, run: ClusterRun, at_warmup: dict, at_end: dict, cut) -> None:
        cut_name = f"fleet-{cut.cluster:04d}"
        run.healthy_at_warmup = sum(1 for s in at_warmup.values() if s == "healthy")
        run.watched = watched(at_warmup, at_end, run.quorums, cut_name)
        run.cut_status = at_end.get(cut_name, "not shown")
        run.others_unhealthy = {c: s for c, s in sorted(at_end.items()) if c != cut_name and s != "healthy"}

    def where_tasks_ran(self, run: ClusterRun, app: str, t0: float, t1: float) -> None:
        """Each executor's tasks and worker; the window's health stages' partitions by executor."""
        from deploy.cluster.standalone import command_line
        api = f"http://127.0.0.1:{self.ui_port}/api/v1/applications/{app}"
        worker_of = {executor_id(command_line(pid)): (worker, pid)
                     for worker, pids in self.cluster.executors().items() for pid in pids}
        executors = get_json(f"{api}/executors")
        run.tasks_per_worker = tasks_by_worker(executors, {e: w for e, (w, _) in worker_of.items()})
        for e in executors:
            if e["id"] in worker_of:
                worker, pid = worker_of[e["id"]]
                run.executors[e["id"]] = {"worker": worker, "pid": pid, "tasks": e["totalTasks"]}
        stages = get_json(f"{api}/stages?status=complete")
        (self.tmp / "stages.json").write_text(json.dumps(stages))
        health = [s for s in stages if is_health_stage(s, STATE_PARTITIONS) and "submissionTime" in s]
        window = [s for s in health if t0 <= rest_time_s(s["submissionTime"]) <= t1]
        run.stages_in_window = bool(window)
        health = window or health
        run.health_stages = len(health)
        tasks = [get_json(f"{api}/stages/{s['stageId']}/{s['attemptId']}/taskList?length=100") for s in health[:30]]
        run.health_partitions = partitions_by_executor(tasks)


def exporter_value(text: str, metric: str) -> float | None:
    found = re.search(rf"^{metric} (\S+)$", text, re.M)
    return float(found.group(1)) if found else None


def sleep_until(wall_s: float) -> None:
    while time.time() < wall_s:
        time.sleep(min(0.5, max(0.0, wall_s - time.time())))


def free_port() -> int:
    from quorum.local_kafka.loopback_ports import free_port as port
    return port()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quorums", type=int, default=2000)
    ap.add_argument("--warmup-seconds", type=float, default=90, help="from the load's start, left out")
    ap.add_argument("--seconds", type=float, default=60, help="measured time")
    ap.add_argument("--tail-seconds", type=float, default=15, help="load published on after the window")
    ap.add_argument("--topic-partitions", type=int, default=4, help="of the events topic")
    ap.add_argument("--worker-memory", default="1536m", help="each worker's memory for its executor")
    ap.add_argument("--executor-memory", default="1g")
    ap.add_argument("--quorum-row-refresh-ms", type=int, default=10_000, help="health.quorum_row_refresh_ms")
    ap.add_argument("--quick", action="store_true", help="100 quorums, 30 s warm-up, 20 s measured")
    args = ap.parse_args()
    if args.quick:
        args.quorums, args.warmup_seconds, args.seconds = 100, 30, 20

    from deploy.cluster.standalone import StandaloneCluster
    from quorum.local_kafka.kafka_broker import KafkaBroker
    tmp = Path(tempfile.mkdtemp(prefix="fleet-cluster-"))
    print(f"fleet on a standalone cluster: {args.quorums} collector-shaped quorums, 2 workers of 1 core, "
          f"{STATE_PARTITIONS} state partitions; {args.warmup_seconds:.0f} s warm-up, {args.seconds:.0f} s "
          f"measured; work directory {tmp}", flush=True)
    with KafkaBroker(log_path=tmp / "broker.log") as broker, \
            StandaloneCluster(tmp / "spark", workers=2, cores_per_worker=1, memory_per_worker=args.worker_memory) \
            as cluster:
        run = FleetOnCluster(args, tmp, broker, cluster).run()
    print(run.report(), flush=True)
    for goal in goal_lines(run):
        print(goal.line())


if __name__ == "__main__":
    main()
