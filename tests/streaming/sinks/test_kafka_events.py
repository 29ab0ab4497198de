"""Health events on a Kafka topic (embedded broker): JSON values, keys that keep a replica's
events in order, every transition and closed window delivered."""
from __future__ import annotations

import json
import uuid

from confluent_kafka import Consumer

from prometheus_tools import wait_for
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
    replica3 = [v for m, v in zip(messages, values) if m.key() == b"c1/__cluster_metadata-0/3"]
    transitions = [(v["previous_status"], v["status"]) for v in replica3 if v["event"] == "transition"]
    assert transitions == [("caught_up", "lagging"), ("lagging", "stalled")]
    window = next(v for v in replica3 if v["event"] == "window")
    assert window["status"] == "caught_up" and window["window_end_ms"] > window["window_start_ms"]
    quorum = [v for m, v in zip(messages, values) if m.key() == b"c1/__cluster_metadata-0/quorum"]
    assert [(v["previous_status"], v["status"]) for v in quorum] == [("healthy", "degraded")]
    assert all(None not in v.values() and "seq" not in v for v in values)
