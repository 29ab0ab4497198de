"""Health events on a Kafka topic (Apache Kafka): JSON values, one key per quorum so its events
stay in order, every event numbered for exactly-once consumers; a topic that is down neither stops
the job nor loses events."""
from __future__ import annotations

import json
import uuid

from confluent_kafka import Consumer

from prometheus_tools import http_get, wait_for
from quorum.local_kafka.loopback_ports import free_port
from streaming.health.config import HealthConfig
from streaming.sinks import SinkConfig, make_batch_writer

from .health_rows import ScriptedQuorum


def consume_all(bootstrap: str, topic: str, expected: int) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: list = []

    def poll():
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg)
        return len(got) >= expected

    try:
        wait_for(poll, 60, f"{expected} health events", interval_s=0)
    finally:
        consumer.close()
    return got


def test_transitions_windows_and_truncations_are_published_as_json(broker, topic):
    writer = make_batch_writer(SinkConfig.from_dict({
        "prometheus": {"mode": "off"},
        "kafka": {"enabled": True, "bootstrap_servers": broker.bootstrap, "topic": topic}}), HealthConfig())
    q = ScriptedQuorum("c1")
    writer.write_rows(q.rows(3000), batch_id=0)
    q.script.mode[3] = "stuck"
    rows = q.rows(13_000, proc_ms=2000)
    writer.write_rows(rows, batch_id=1)
    events = [r for r in rows if r["kind"] in ("transition", "window", "truncation", "forget")]
    assert events, "the stuck replica must have produced transitions"
    writer.close()

    messages = consume_all(broker.bootstrap, topic, len(events))
    values = [json.loads(m.value()) for m in messages]
    assert {m.key() for m in messages} == {b"c1/__cluster_metadata-0"}  # one quorum, one key
    replica3 = [v for v in values if v.get("replica_id") == 3]
    transitions = [(v["previous_status"], v["status"]) for v in replica3 if v["event"] == "transition"]
    assert transitions == [("caught_up", "lagging"), ("lagging", "stalled")]
    window = next(v for v in replica3 if v["event"] == "window")
    assert window["status"] == "caught_up" and window["window_end_ms"] > window["window_start_ms"]
    quorum = [v for v in values if v.get("replica_id") is None and v["event"] == "transition"]
    assert [(v["previous_status"], v["status"]) for v in quorum] == [("healthy", "degraded")]
    # exactly-once: every event names its quorum, its number in the quorum's sequence and its batch
    seqs = [v["seq"] for v in values]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert all(v["cluster_id"] == "c1" and v["partition"] == 0 and v["batch_id"] in (0, 1) for v in values)
    assert all(None not in v.values() for v in values)


def test_a_health_topic_that_is_down_stops_nothing_and_loses_nothing(broker, topic, tmp_path):
    spool = tmp_path / "checkpoint" / "health-events-pending.jsonl"
    down = SinkConfig.from_dict({
        "prometheus": {"mode": "exporter", "exporter_host": "127.0.0.1", "exporter_port": free_port()},
        "kafka": {"enabled": True, "bootstrap_servers": f"127.0.0.1:{free_port()}", "topic": topic,
                  "flush_timeout_s": 0.5, "delivery_timeout_s": 1.0}})
    writer = make_batch_writer(down, HealthConfig(), spool_path=str(spool))
    q = ScriptedQuorum("c1")
    writer.write_rows(q.rows(3000), batch_id=0)
    q.script.mode[3] = "silent"
    rows = q.rows(4000, proc_ms=2000)
    writer.write_rows(rows, batch_id=1)  # does not raise
    events = [r for r in rows if r.get("event_seq") is not None]
    snap = writer.monitor.snapshot()
    assert snap["health_events_pending"] == len(events) and snap["sink_failures_total"]["kafka"] >= 1
    # the verdict reached Prometheus anyway
    metrics = http_get(f"http://127.0.0.1:{down.prometheus.exporter_port}/metrics").decode()
    assert 'quorum_replica_status{cluster="c1",partition="__cluster_metadata-0",replica="3",role="voter",' \
           'status="unreachable"} 1.0' in metrics
    assert "quorum_monitor_sink_failures_total" in metrics
    writer.close()
    assert spool.exists()

    # The job restarts with the topic back: the spooled events are delivered, in order.
    up = SinkConfig.from_dict({"prometheus": {"mode": "off"},
                               "kafka": {"enabled": True, "bootstrap_servers": broker.bootstrap, "topic": topic}})
    writer = make_batch_writer(up, HealthConfig(), spool_path=str(spool))
    writer.write_rows([], batch_id=2)
    writer.close()
    values = [json.loads(m.value()) for m in consume_all(broker.bootstrap, topic, len(events))]
    assert [v["seq"] for v in values] == [r["event_seq"] for r in events]
    assert not spool.exists()
