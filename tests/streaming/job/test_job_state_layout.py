"""A checkpoint whose health state was written one quorum per state key, as before the buckets,
or in buckets by the row-based processor, resumes its state under the job, on Apache Kafka and
local[2]: what it flagged stays flagged, and its quorums' counters go on. A layout file the job
cannot read stops `streaming run` with the file named."""
from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time

import pytest

from prometheus_tools import wait_for
from quorum.synthetic import Fault, SyntheticConfig, publish
from state_operators import ROW_PROCESSOR, state_operators
from streaming.config import JobConfig
from streaming.job import start_job
from streaming.state_layout import LAYOUT_FILE

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TRIGGER_MS = 500


def flagged(writer, status: str) -> list[dict]:
    return [e for e in writer.seen_events if e["kind"] == "transition" and e["cluster_id"] == "cluster-0"
            and e["replica_id"] == 2 and e["status"] == status]


def run_then_resume(spark, broker, topic, root, recording_writer, between) -> tuple[object, dict]:
    """Run the job until cluster-0's replica 2 (cut off) is flagged, call `between()`, run it
    again on the same checkpoint until both quorums were evaluated on: the second run's writer,
    and its views by cluster."""
    cfg = JobConfig.from_dict({
        "source": {"bootstrap_servers": broker.bootstrap, "topic": topic, "starting_offsets": "earliest"},
        "job": {"checkpoint_location": str(root), "trigger_interval_ms": TRIGGER_MS},
        "dead_letters": {"enabled": False},
        "health": {"tick_ms": TRIGGER_MS},
        "sink": {"prometheus": {"mode": "off"}},
    })
    start_ms = int(time.time() * 1000)
    synthetic = SyntheticConfig(clusters=2, voters=3, observers=1, seed=5, start_ms=start_ms,
                                faults=(Fault("cutoff", start_ms=3000, duration_ms=120_000, cluster=0, replica=2),))
    stop = threading.Event()
    publisher = threading.Thread(target=lambda: publish(synthetic, broker.bootstrap, topic, duration_ms=120_000,
                                                        should_stop=stop.is_set), daemon=True)
    publisher.start()
    try:
        writer = recording_writer(cfg)
        job = start_job(spark, cfg, writer)
        try:
            wait_for(lambda: flagged(writer, "unreachable"), 90, "cluster-0/2 flagged unreachable")
        finally:
            job.stop()
        before = {v.quorum["cluster_id"]: v.quorum["seq"] for v in writer.snapshot.views()}
        between()
        writer2 = recording_writer(cfg)
        job2 = start_job(spark, cfg, writer2)
        try:
            wait_for(lambda: {v.quorum["cluster_id"] for v in writer2.snapshot.views()
                              if v.quorum["seq"] > before.get(v.quorum["cluster_id"], 0) + 2} == set(before),
                     90, lambda: f"both quorums evaluated on, from {before}")
            return writer2, {v.quorum["cluster_id"]: v for v in writer2.snapshot.views()}
        finally:
            job2.stop()
    finally:
        stop.set()
        publisher.join(30)


def test_a_checkpoint_written_one_quorum_per_key_resumes_its_state(spark, broker, topic_factory, tmp_path, caplog,
                                                                   recording_writer):
    root = tmp_path / "checkpoint"
    # The first run writes the layout before the buckets (the same processor as then)...
    root.mkdir()
    (root / LAYOUT_FILE).write_text(json.dumps({"health_state_buckets": 0}))

    def as_before_the_buckets():  # ... and a checkpoint from before the buckets has no layout file
        (root / LAYOUT_FILE).unlink()
        caplog.set_level(logging.INFO, "streaming.state_layout")

    writer2, views = run_then_resume(spark, broker, topic_factory(partitions=2), root, recording_writer,
                                     as_before_the_buckets)
    assert any("keeps one quorum per state key" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert json.loads((root / LAYOUT_FILE).read_text()) == {"health_state_buckets": 0, "health_state_processor": "row",
                                                            "health_state_version": 1}
    # the state came back: no second verdict from scratch, the cut-off voter still unreachable
    assert flagged(writer2, "unreachable") == []
    assert views["cluster-0"].replicas[2]["status"] == "unreachable"


def test_buckets_written_by_the_row_processor_go_on_on_it(spark, broker, topic_factory, tmp_path, caplog,
                                                        recording_writer):
    # The buckets' first flavour was the row-based processor, and its layout file named no
    # processor. Spark refuses another stateful operator on a checkpoint, so it goes on on rows.
    root = tmp_path / "checkpoint"
    root.mkdir()
    (root / LAYOUT_FILE).write_text(json.dumps({"health_state_buckets": 4}))
    caplog.set_level(logging.INFO, "streaming.state_layout")
    writer2, views = run_then_resume(spark, broker, topic_factory(partitions=2), root, recording_writer,
                                     lambda: None)
    assert json.loads((root / LAYOUT_FILE).read_text()) == {"health_state_buckets": 4}
    assert state_operators(root / "health") == {ROW_PROCESSOR}
    assert "checkpoint %s keeps the health state in 4 quorum buckets, on the row processor" % root in caplog.text
    assert flagged(writer2, "unreachable") == []
    assert views["cluster-0"].replicas[2]["status"] == "unreachable"


def test_streaming_run_refuses_a_layout_file_it_cannot_read_and_names_it(tmp_path):
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    (checkpoint / LAYOUT_FILE).write_text("{truncated")
    config = tmp_path / "job.yaml"
    config.write_text(json.dumps({  # YAML reads JSON
        "spark": {"master": "local[1]"},
        "source": {"bootstrap_servers": "127.0.0.1:1", "topic": "events"},
        "job": {"checkpoint_location": str(checkpoint)},
        "sink": {"prometheus": {"mode": "off"}},
    }))
    done = subprocess.run([sys.executable, "-m", "streaming.cli", "run", "--config", str(config)],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 2, done.stderr[-3000:]
    assert f"streaming: cannot start: {checkpoint / LAYOUT_FILE} does not say how the health state is kept" in done.stderr
    assert "Traceback" not in done.stderr
