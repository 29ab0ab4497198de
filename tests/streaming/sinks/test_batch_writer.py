"""The foreachBatch body without Spark: snapshot, monitor and sinks fed from health rows."""
from __future__ import annotations

import pyarrow as pa
import pytest

from streaming.health.config import HealthConfig
from streaming.health.schema import HEALTH_COLUMNS, pack_health_row, unpack_health_row
from streaming.sinks import SinkConfig, make_batch_writer
from streaming.sinks.batch_writer import health_rows

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


def test_an_event_listener_sees_each_batchs_events_as_applied():
    writer = make_batch_writer(SinkConfig.from_dict({"prometheus": {"mode": "off"}}), HealthConfig())
    seen: list[list[dict]] = []
    writer.add_event_listener(seen.append)
    q = ScriptedQuorum("c1")
    writer.write_rows(q.rows(3000, proc_ms=1000), batch_id=0)
    q.script.mode[3] = "silent"
    writer.write_rows(q.rows(4000, proc_ms=5000), batch_id=1)
    assert len(seen) == 2  # one call per batch
    unreachable = [[(e["cluster_id"], e["replica_id"]) for e in batch if e["kind"] == "transition"
                    and e["status"] == "unreachable"] for batch in seen]
    assert unreachable == [[], [("c1", 3)]]


def test_a_health_batch_is_read_by_column_name_whatever_else_the_frame_carries():
    rows = batch_rows()
    columns = list(reversed(HEALTH_COLUMNS))
    table = pa.Table.from_pylist([{c: r[c] for c in columns} | {"extra": 1} for r in rows])
    assert health_rows(table) == [{c: r[c] for c in HEALTH_COLUMNS} for r in rows]
    assert list(health_rows(table)[0]) == HEALTH_COLUMNS


def test_a_frame_without_the_health_columns_is_refused_by_name():
    rows = batch_rows()
    table = pa.Table.from_pylist([{c: v for c, v in r.items() if c not in ("status", "cause")} for r in rows])
    with pytest.raises(ValueError, match="no column status, cause"):
        health_rows(table)


def batch_rows() -> list[dict]:
    """A batch's rows as Spark gives them: packed by the processor, expanded to every health column."""
    return [unpack_health_row(pack_health_row(r)) for r in ScriptedQuorum("c1").rows(3000, proc_ms=1000)]
