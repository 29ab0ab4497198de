"""The health stream as a real Structured Streaming query: JSON files dropped into a directory
(the file source), transformWithStateInPandas with RocksDB state and processing-time timers,
and the batch writer's snapshot. Silence is real: the test stops writing and waits."""
from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path

import pytest

from prometheus_tools import wait_for
from streaming.event_schema import envelope_spark_schema
from streaming.health import build_health_stream
from streaming.health import statuses as S
from streaming.health.config import HealthConfig
from streaming.sinks import SinkConfig, listen_to_progress, make_batch_writer

from .quorum_script import QuorumScript

pytestmark = pytest.mark.spark


class Inbox:
    """A directory the stream reads; each write is one new file, renamed in whole."""

    def __init__(self, path: Path):
        self.path = path
        path.mkdir()

    def write(self, records: list[dict]) -> None:
        name = uuid.uuid4().hex
        tmp = self.path / f".{name}.tmp"
        tmp.write_text("".join(json.dumps(r) + "\n" for r in records))
        tmp.rename(self.path / f"{name}.json")


class Feeder(threading.Thread):
    """Keeps one cluster talking (a file every 300 ms) so the input as a whole stays alive."""

    def __init__(self, inbox: Inbox, script: QuorumScript):
        super().__init__(daemon=True)
        self.inbox, self.script, self.stop = inbox, script, threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.3):
            self.inbox.write(self.script.run(300))


def test_stream_flags_unreachable_then_silence_and_holds_verdicts_while_the_input_stalls(spark, tmp_path):
    inbox = Inbox(tmp_path / "in")
    c1, c2 = QuorumScript(cluster="c1"), QuorumScript(cluster="c2")
    batches: list[list[dict]] = []
    writer = make_batch_writer(SinkConfig.from_dict({"prometheus": {"mode": "off"}}), HealthConfig())
    listener = listen_to_progress(spark, writer.monitor)

    def write_batch(df, batch_id):
        rows = df.toArrow().to_pylist()
        batches.append(rows)
        writer.write_rows(rows, batch_id)

    def quorum(cluster):
        view = [v for v in writer.snapshot.views(cluster)]
        return view[0] if view else None

    inbox.write(c1.run(3000) + c2.run(3000))
    events = spark.readStream.schema(envelope_spark_schema()).json(str(inbox.path))
    query = (build_health_stream(events, HealthConfig()).writeStream.foreachBatch(write_batch)
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(processingTime="500 milliseconds").start())
    feeder = Feeder(inbox, c2)
    try:
        wait_for(lambda: quorum("c1") and quorum("c1").quorum["status"] == S.HEALTHY, 120, "c1 healthy")
        feeder.start()

        # Replica 3 of c1 stops fetching while its leader carries on: unreachable, on event time.
        c1.mode[3] = "silent"
        inbox.write(c1.run(3000))
        wait_for(lambda: quorum("c1").replicas[3]["status"] == S.UNREACHABLE, 60, "c1 replica 3 unreachable")
        assert quorum("c1").replicas[2]["status"] == S.CAUGHT_UP

        # Then all of c1 goes quiet while c2 keeps the input alive: timers find the silence.
        wait_for(lambda: quorum("c1").quorum["status"] == S.LEADERLESS, 60, "c1 leaderless from silence")
        assert {r["status"] for r in quorum("c1").replicas.values()} == {S.UNKNOWN}
        assert quorum("c2").quorum["status"] == S.HEALTHY

        # Now the whole input stops: the job says so and holds c2's last verdict.
        feeder.stop.set()
        feeder.join()
        wait_for(writer.monitor.input_stalled, 30, "input stalled")
        held_from = len(batches)
        wait_for(lambda: any(r["cluster_id"] == "c2" and r["kind"] == "quorum" and r["status"] == S.LEADERLESS
                             for b in batches[held_from:] for r in b), 60, "c2 silent verdict from the processor")
        assert quorum("c2").quorum["status"] == S.HEALTHY  # ...held, not published
        assert writer.monitor.snapshot()["input_records_total"] > 0
    finally:
        feeder.stop.set()
        query.stop()
        listener.remove()
        writer.close()
    assert query.exception() is None
    for rows in batches:  # one snapshot per quorum per micro-batch, input or timer
        keys = [r["cluster_id"] for r in rows if r["kind"] == "quorum"]
        assert len(keys) == len(set(keys))
