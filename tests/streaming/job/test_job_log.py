"""The job's log as an operator reads it: `streaming run` started as the local stack starts it,
on a topic holding a known number of records and dead letters. The log has one line per micro-batch
whose numbers add up to what was published, and none of py4j's INFO lines, Spark's INFO lines or
its progress bars."""
from __future__ import annotations

import re
import signal
import subprocess
import sys
import time

import pytest
import yaml
from confluent_kafka import Producer

from prometheus_tools import wait_for
from quorum.synthetic import SyntheticConfig, publish
from streaming.job_logging import batch_line, batch_time_line

pytestmark = [pytest.mark.spark, pytest.mark.slow]

BATCH = re.compile(r"INFO streaming\.batches: batch (\d+): (\d+) records, (\d+) dead letters, (\d+) quorums?, "
                   r"(\d+) unhealthy(?: \((.*)\))?, (\d+) ms$")


def test_batch_line_names_the_unhealthy_quorums():
    progress = {"batchId": 7, "numInputRows": 12, "durationMs": {"triggerExecution": 830}}
    observed = {"records": 12, "newest_event_ms": 1}
    quorums = [{"cluster_id": "b", "status": "degraded"}, {"cluster_id": "a", "status": "healthy"},
               {"cluster_id": "c", "status": "leaderless"}]
    assert batch_line(progress, observed, quorums, dead=3) == \
        "batch 7: 12 records, 3 dead letters, 3 quorums, 2 unhealthy (b degraded, c leaderless), 830 ms"
    assert batch_line({"batchId": 0}, None, [{"cluster_id": "a", "status": "healthy"}]) == \
        "batch 0: 0 records, 0 dead letters, 1 quorum, 0 unhealthy, 0 ms"


def test_a_slow_batch_line_says_where_its_time_went_largest_first():
    progress = {"batchId": 53, "durationMs": {"triggerExecution": 9069, "walCommit": 310, "addBatch": 6120,
                                              "queryPlanning": 1450, "latestOffset": 890}}
    assert batch_time_line(progress) == \
        "batch 53 took 9069 ms: addBatch 6120, queryPlanning 1450, latestOffset 890, walCommit 310"
    assert batch_time_line({"batchId": 1}) == "batch 1 took 0 ms: no parts reported"


def test_streaming_run_logs_one_line_per_batch_and_no_noise(broker, topic_factory, tmp_path):
    topic = topic_factory(partitions=2)
    # twenty seconds of two healthy quorums, ending now (so no record is from the future)
    now_ms = int(time.time() * 1000)
    stats, _ = publish(SyntheticConfig(clusters=2, voters=3, observers=1, seed=5, start_ms=now_ms - 20_000),
                       broker.bootstrap, topic, duration_ms=20_000, speed=0)
    bad = [b"not json", b'{"type": "gossip", "version": 1}', b'{"type": "fetch", "version": 1}']
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for value in bad:
        producer.produce(topic, value=value)
    assert producer.flush(10) == 0
    config = tmp_path / "job.yaml"
    config.write_text(yaml.safe_dump({
        "spark": {"master": "local[2]"},
        "source": {"bootstrap_servers": broker.bootstrap, "topic": topic,
                   "starting_offsets": "earliest"},
        "job": {"checkpoint_location": str(tmp_path / "checkpoint"), "trigger_interval_ms": 1000},
        "dead_letters": {"enabled": False},
        "sink": {"prometheus": {"mode": "off"}},
    }))
    log_path = tmp_path / "streaming-job.log"
    with open(log_path, "wb") as out:
        job = subprocess.Popen([sys.executable, "-m", "streaming.cli", "run", "--config", str(config)],
                               stdout=out, stderr=subprocess.STDOUT)
    try:
        def batches():
            if job.poll() is not None:
                raise AssertionError(f"the job exited with {job.returncode}:\n{log_path.read_text()[-3000:]}")
            return [BATCH.search(line) for line in log_path.read_text().splitlines() if BATCH.search(line)]
        lines = wait_for(lambda: (b := batches()) and sum(int(m[2]) for m in b) >= stats.records + len(bad) and b,
                         240, "batch lines accounting for every record")
    finally:
        job.send_signal(signal.SIGTERM)
        assert job.wait(60) == 0
    text = log_path.read_text()
    print("\n".join(m[0] for m in lines))
    [started] = [line for line in text.splitlines() if " started " in line]
    assert f"topic {topic}," in started and "dead letters off, Prometheus metrics off, health topic off" in started
    assert sum(int(m[2]) for m in lines) == stats.records + len(bad)
    assert sum(int(m[3]) for m in lines) == len(bad)
    assert [int(m[1]) for m in lines] == list(range(int(lines[0][1]), int(lines[0][1]) + len(lines)))
    assert int(lines[-1][4]) == 2, "both quorums are known after their records are read"
    for m in lines:
        named = m[6].split(", ") if m[6] else []
        assert int(m[5]) == len(named), m[0]
    assert "Received command" not in text and "INFO py4j" not in text, "py4j INFO lines"
    assert not re.search(r"\[Stage \d+", text), "Spark's progress bars"
    spark_lines = [line for line in text.splitlines() if re.search(r" (INFO|DEBUG) (spark|org\.apache)\.", line)]
    assert not spark_lines, spark_lines[:5]
