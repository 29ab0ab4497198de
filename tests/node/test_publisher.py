"""The event publisher delivers in order when the broker is up and, when it is not, drops
oldest-first and counts, without ever blocking the caller."""
from __future__ import annotations

import time

from quorum import events
from quorum.embedded_broker import free_port
from quorum.node.publisher import EventPublisher


def state_change(i: int) -> events.StateChange:
    return events.StateChange("c1", "__cluster_metadata", 0, 1_700_000_000_000 + i, 1, "follower", "candidate",
                              i, -1, f"test {i}")


def read_all(bootstrap: str, topic: str, expected: int, timeout_s: float = 30.0, partitions: int = 1) -> list[bytes]:
    """Read by assignment (no consumer group: joining one is slow and not what is tested)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{topic}", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    out: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(out) < expected and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and not msg.error():
                out.append(msg.value())
    finally:
        c.close()
    return out


def test_records_arrive_in_order_and_decode(broker, topic_factory):
    topic = topic_factory(1)
    pub = EventPublisher(broker.bootstrap, topic).start()
    try:
        for i in range(200):
            pub.publish(state_change(i))
        got = read_all(broker.bootstrap, topic, 200)
    finally:
        pub.close()
    assert [events.decode(v).epoch for v in got] == list(range(200))
    assert pub.dropped_total == 0


def test_broker_down_drops_oldest_and_counts_without_blocking():
    pub = EventPublisher(f"127.0.0.1:{free_port()}", "events", buffer_records=5).start()
    try:
        for i in range(20):
            pub.publish(state_change(i))     # returns at once: only a deque append
        assert pub.dropped_total == 15
        kept = [events.decode(v).epoch for _, v in list(pub._buffer)]
        assert kept == list(range(15, 20))[-len(kept):]   # the newest survive
    finally:
        pub.close(flush_timeout_s=0.1)
