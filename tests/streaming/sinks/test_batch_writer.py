"""The foreachBatch body without Spark: snapshot, monitor and sinks fed from health rows."""
from __future__ import annotations

from streaming.health.config import HealthConfig
from streaming.sinks import SinkConfig, make_batch_writer

from .health_rows import ScriptedQuorum


def test_writer_sees_the_input_alive_from_the_health_rows_alone():
    now = [1000.0]
    writer = make_batch_writer(SinkConfig.from_dict({"prometheus": {"mode": "off"}}), HealthConfig())
    writer.monitor.clock = writer.clock = lambda: now[0]
    q = ScriptedQuorum("c1")
    writer.write_rows(q.rows(3000, proc_ms=1000), batch_id=0)
    assert not writer.monitor.input_stalled()
    now[0] += 2.5  # no input for longer than input_stall_after_ms (2 s)
    writer.write_rows(q.rows(2500, proc_ms=3500, silent=True), batch_id=1)
    assert writer.monitor.input_stalled()
    assert writer.monitor.snapshot()["input_delay_s"] is not None
