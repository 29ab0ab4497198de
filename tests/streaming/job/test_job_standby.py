"""`streaming run --standby` as the local stack's supervisor keeps it: started beside a topic that
records keep arriving on, it warms up and waits without starting the real query (no batch, no
offsets in the checkpoint); on SIGUSR1 it takes over and its batches read every record; on
SIGTERM it stops cleanly."""
from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time

import pytest
import yaml
from confluent_kafka import Producer

from prometheus_tools import wait_for
from quorum.synthetic import SyntheticConfig, publish

pytestmark = [pytest.mark.spark, pytest.mark.slow]

BATCH = re.compile(r"INFO streaming\.batches: batch (\d+): (\d+) records")
WAITING = "waiting for SIGUSR1 to take over"


def test_a_standby_warms_up_waits_and_takes_over_on_sigusr1(broker, topic_factory, tmp_path):
    topic = topic_factory(partitions=2)
    now_ms = int(time.time() * 1000)
    stats, _ = publish(SyntheticConfig(clusters=1, voters=3, observers=0, seed=3, start_ms=now_ms - 20_000),
                       broker.bootstrap, topic, duration_ms=20_000, speed=0)
    # records keep arriving, as the quorum's do on the stack: the warm-up reads from the latest
    stop = threading.Event()
    sent = []

    def keep_publishing():
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        while not stop.wait(0.5):
            producer.produce(topic, value=b"not json")  # a dead letter: the count is what matters
            sent.append(1)
        producer.flush(10)
    publisher = threading.Thread(target=keep_publishing, daemon=True)
    publisher.start()
    checkpoint = tmp_path / "checkpoint"
    config = tmp_path / "job.yaml"
    config.write_text(yaml.safe_dump({
        "spark": {"master": "local[2]"},
        "source": {"bootstrap_servers": broker.bootstrap, "topic": topic, "starting_offsets": "earliest"},
        "job": {"checkpoint_location": str(checkpoint), "trigger_interval_ms": 1000},
        "dead_letters": {"enabled": False},
        "sink": {"prometheus": {"mode": "off"}},
    }))
    log_path = tmp_path / "streaming-job.log"
    with open(log_path, "wb") as out:
        job = subprocess.Popen([sys.executable, "-m", "streaming.cli", "run", "--config", str(config), "--standby"],
                               stdout=out, stderr=subprocess.STDOUT)
    try:
        def log_has(text):
            if job.poll() is not None:
                raise AssertionError(f"the job exited with {job.returncode}:\n{log_path.read_text()[-3000:]}")
            return text in log_path.read_text()
        wait_for(lambda: log_has(WAITING), 240, "the standby ready")
        waiting = [line for line in log_path.read_text().splitlines() if WAITING in line]
        assert "warmed up on a batch of the live topic" in waiting[0], waiting
        assert not BATCH.search(log_path.read_text()), "a batch of the real query before the takeover"
        assert not (checkpoint / "health" / "offsets").exists(), "the real checkpoint written before the takeover"
        job.send_signal(signal.SIGUSR1)
        wait_for(lambda: sum(int(m[2]) for m in BATCH.finditer(log_path.read_text())) >= stats.records, 120,
                 "batches reading every record published")
        assert "standby: taking over" in log_path.read_text()
    finally:
        stop.set()
        publisher.join(10)
        job.send_signal(signal.SIGTERM)
        code = job.wait(60)
    assert code == 0, log_path.read_text()[-3000:]
    print(f"{stats.records} records before the standby started, {len(sent)} sent while it ran")
