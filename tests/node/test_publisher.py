"""The event publisher delivers in order when the broker is up and, when it is not, drops
oldest-first and counts, without ever blocking the caller."""
from __future__ import annotations

from quorum import events
from quorum.local_kafka.loopback_ports import free_port
from quorum.node.publisher import EventPublisher
from quorum.testing.local_cluster import read_events


def state_change(i: int) -> events.StateChange:
    return events.StateChange("c1", "__cluster_metadata", 0, 1_700_000_000_000 + i, 1, "follower", "candidate",
                              i, -1, f"test {i}")


def test_records_arrive_in_order_and_decode(broker, topic_factory):
    topic = topic_factory(1)
    pub = EventPublisher(broker.bootstrap, topic).start()
    try:
        for i in range(200):
            pub.publish(state_change(i))
        got = read_events(broker.bootstrap, topic, lambda rs: len(rs) >= 200)
    finally:
        pub.close()
    assert [r.epoch for r in got] == list(range(200))
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
