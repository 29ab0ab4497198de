"""The job on a real Spark standalone cluster: a master and two workers, each its own JVM from the
installed pyspark's launcher, on loopback. The job is submitted with `deploy/cluster/spark-submit.sh`
exactly as an operator would (client deploy mode, Spark's Kafka connector with --packages), its executors
run in the workers' processes, it flags a synthetic quorum's stalled voter and clears it, and when
one worker is SIGKILLed mid-run (its JVM and its executor) the job goes on on the other worker:
every record is read exactly once and no verdict is missed."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, TopicPartition

from deploy.cluster.standalone import StandaloneCluster, alive, descendants, identity, stop_driver
from prometheus_tools import wait_for
from quorum.local_kafka.loopback_ports import free_port
from quorum.synthetic import Fault, SyntheticConfig, publish

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SUBMIT = ROOT / "deploy" / "cluster" / "spark-submit.sh"
STALL_MS = 4000
TRIGGER_MS = 1000


def job_yaml(path: Path, bootstrap: str, topic: str, health_topic: str, exporter_port: int, workdir: Path) -> Path:
    path.write_text(yaml.safe_dump({
        "spark": {"conf": {"spark.executor.memory": "512m",
                           # retried tasks go to the surviving worker at once rather than waiting for locality
                           "spark.locality.wait": "0s"}},
        "source": {"bootstrap_servers": bootstrap, "topic": topic, "starting_offsets": "earliest"},
        "job": {"checkpoint_location": str(workdir / "checkpoint"), "trigger_interval_ms": TRIGGER_MS},
        "dead_letters": {"enabled": False},
        "health": {"stall_after_ms": STALL_MS, "tick_ms": TRIGGER_MS},
        "sink": {"prometheus": {"mode": "exporter", "exporter_host": "127.0.0.1", "exporter_port": exporter_port},
                 "kafka": {"enabled": True, "bootstrap_servers": bootstrap, "topic": health_topic}},
    }))
    return path


def exporter_text(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
            return response.read().decode()
    except OSError:
        return None


def exporter_value(port: int, metric: str) -> float | None:
    text = exporter_text(port)
    if text is None:
        return None
    match = re.search(rf"^{metric} (\S+)$", text, re.M)
    return float(match.group(1)) if match else None


class HealthTopic:
    """The job's health events as they arrive on its Kafka topic."""

    def __init__(self, bootstrap: str, topic: str):
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cluster-test",
                                  "enable.auto.commit": False})
        self.consumer.assign([TopicPartition(topic, 0, 0)])
        self.events: list[dict] = []

    def poll(self) -> list[dict]:
        for message in self.consumer.consume(1000, 0.2):
            if message.error() is None:
                self.events.append(json.loads(message.value()))
        return self.events

    def transitions(self, cluster: str, replica: int | None = None, status: str | None = None) -> list[dict]:
        return [e for e in self.poll() if e["event"] == "transition" and e["cluster_id"] == cluster
                and (replica is None or e.get("replica_id") == replica) and (status is None or e["status"] == status)]


def test_job_on_a_standalone_cluster_survives_a_killed_worker(broker, topic_factory, tmp_path):
    topic, health_topic = topic_factory(partitions=2), topic_factory(partitions=1, prefix="health")
    exporter_port = free_port()
    config = job_yaml(tmp_path / "job.yaml", broker.bootstrap, topic, health_topic, exporter_port, tmp_path)
    env = {**os.environ, "PYTHON": sys.executable, "SPARK_SUBMIT": str(Path(sys.executable).parent / "spark-submit"),
           "DIST_DIR": str(tmp_path / "dist"), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    dry = subprocess.run(["bash", str(SUBMIT), "--master", "spark://127.0.0.1:7077", "--config", str(config),
                          "--dry-run"], capture_output=True, text=True, env=env, timeout=60)
    assert dry.returncode == 0 and "--packages org.apache.spark:spark-sql-kafka-0-10_2.13:" in dry.stdout, \
        dry.stdout + dry.stderr

    with StandaloneCluster(tmp_path / "spark", workers=2, cores_per_worker=2, memory_per_worker="768m") as cluster:
        driver_log = (tmp_path / "driver.log").open("wb")
        driver = subprocess.Popen(["bash", str(SUBMIT), "--master", cluster.url, "--config", str(config)],
                                  stdout=driver_log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        driver_processes: set = set()

        def driver_tail() -> str:
            return "\n".join((tmp_path / "driver.log").read_text(errors="replace").splitlines()[-40:])
        try:
            def job_started():  # its exporter serves once the queries are started
                assert driver.poll() is None, f"the job exited {driver.returncode}:\n{driver_tail()}"
                return exporter_value(exporter_port, "quorum_monitor_input_records_total") is not None
            wait_for(job_started, 240, "the job to start on the cluster")
            driver_processes = {identity(p) for p in [driver.pid, *descendants(driver.pid)]} - {None}

            # Executors run in their own JVMs, one under each worker, none of them the driver.
            executors = wait_for(lambda: (e := cluster.executors()) and all(e.values()) and e, 60,
                                 "an executor under each worker")
            driver_pids = {pid for pid, _ in driver_processes}
            assert all(pid not in driver_pids for pids in executors.values() for pid in pids), (executors, driver_pids)
            (app,) = cluster.state()["activeapps"]
            assert app["name"] == "quorum-health"

            # The synthetic quorum starts now; its fault comes after the worker is gone.
            health = HealthTopic(broker.bootstrap, health_topic)
            start_ms = int(time.time() * 1000)
            stall = Fault("stall", start_ms=15_000, duration_ms=12_000, cluster=1, replica=3)
            synthetic = SyntheticConfig(clusters=2, voters=3, observers=1, seed=5, start_ms=start_ms, faults=(stall,))
            published: dict = {}
            publisher = threading.Thread(target=lambda: published.update(
                result=publish(synthetic, broker.bootstrap, topic, duration_ms=40_000, speed=1.0)), daemon=True)
            publisher.start()
            wait_for(lambda: (exporter_value(exporter_port, "quorum_monitor_input_records_total") or 0) > 0, 180,
                     "the first records processed")

            killed = cluster.kill_worker(0)
            assert killed == executors[0] and all(identity(pid) is None for pid in killed)  # gone
            assert driver.poll() is None, driver_tail()

            def diagnosis() -> str:  # what the job shows, for a failure message
                text = exporter_text(exporter_port) or ""
                seen = [line for line in text.splitlines() if "quorum_monitor_input_records_total " in line
                        or ('replica_status{' in line and 'replica="3"' in line and line.endswith(" 1.0"))]
                return f"health events: {health.poll()[-6:]}; exporter: {seen}"
            try:
                wait_for(lambda: health.transitions("cluster-1", 3, "stalled"), 180, "the stalled voter flagged")
                wait_for(lambda: health.transitions("cluster-1", 3, "caught_up")
                         and health.transitions("cluster-1", 3, "caught_up")[-1]["now_ms"] > start_ms + stall.start_ms,
                         180, "the stalled voter caught up again")
            except pytest.fail.Exception as e:
                pytest.fail(f"{e}\n{diagnosis()}", pytrace=False)
            publisher.join(120)
            stats, _timeline = published["result"]
            wait_for(lambda: exporter_value(exporter_port, "quorum_monitor_input_records_total") == stats.records,
                     120, f"all {stats.records} records read once "
                          f"(got {exporter_value(exporter_port, 'quorum_monitor_input_records_total')})")
            assert driver.poll() is None, driver_tail()
            assert all(cluster.executors().get(1, [])), "the surviving worker's executor runs on"
        finally:
            stop_driver(driver)
            driver_log.close()
        assert driver.returncode == 0, driver_tail()
        # the stop let the running micro-batch end (one cut short makes Spark log a StackOverflowError)
        assert "StackOverflowError" not in (tmp_path / "driver.log").read_text(errors="replace"), driver_tail()

    # Verdicts: the stall flagged within its threshold plus two triggers (quorum clock), and cleared;
    # the healthy quorum never flagged; every replica's transitions form one unbroken chain.
    stalled = health.transitions("cluster-1", 3, "stalled")[0]
    delay = stalled["now_ms"] - (start_ms + stall.start_ms)
    assert 0 <= delay <= STALL_MS + 2 * TRIGGER_MS + TRIGGER_MS, delay
    assert not [e for e in health.transitions("cluster-0") if e["status"] not in ("caught_up", "healthy", "unknown")]
    chains: dict = {}
    for e in health.poll():
        if e["event"] == "transition":
            chains.setdefault((e["cluster_id"], e.get("replica_id")), []).append(e)
    for key, chain in chains.items():
        for before, after in zip(chain, chain[1:]):
            assert after["previous_status"] == before["status"], (key, before, after)
    # nothing the cluster started is left running
    assert cluster.leftovers() == []
    assert not any(alive(p) for p in driver_processes)
