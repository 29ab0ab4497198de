"""Apache Kafka as the tests and the local stack start it: it answers, keeps every record of a
100,000-record batch in order per key, reports the log end both ways, stops in order and leaves
nothing behind; a missing part or a failed start is an error that says where to look."""
import collections
import os
import re
import socket

import pytest

from confluent_kafka import Consumer, Producer, TopicPartition

from quorum import events
from quorum import jvm
from quorum.local_kafka.kafka_broker import BrokerError, KafkaBroker, random_cluster_id
from quorum.local_kafka.loopback_ports import free_port
from quorum.synthetic.publish import PRODUCER_DEFAULTS

N = 100_000
KEYS = 500


def _produce_contract_records(bootstrap, topic):
    producer = Producer({**PRODUCER_DEFAULTS, "bootstrap.servers": bootstrap})
    encode = events.make_encoder(events.Fetch, topic="__cluster_metadata", partition=0, leader_id=1, leader_epoch=3,
                                 replica_role="voter", fetch_epoch=3, outcome="valid", replica_log_end_offset=-1,
                                 last_fetch_timestamp_ms=-1, last_caught_up_timestamp_ms=-1)
    for i in range(N):
        replica = i % KEYS
        offset = i // KEYS  # per key, the fetch offset counts up: the order check
        value = encode(f"cluster-{replica // 5}", 1_700_000_000_000 + i, replica, offset, offset, offset)
        key = events.key_of(f"cluster-{replica // 5}", "__cluster_metadata", 0, replica)
        while True:
            try:
                producer.produce(topic, value, key)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0


def _read_all(bootstrap, topic, partitions, expected):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "t", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = []
    idle = 0
    while len(got) < expected and idle < 20:
        batch = consumer.consume(10_000, timeout=0.5)
        idle = 0 if batch else idle + 1
        got.extend(m for m in batch if not m.error())
    high = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), cached=True)[1] for p in range(partitions)}
    listed = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    consumer.close()
    return got, high, listed


def test_a_100k_batch_of_contract_records_is_read_back_complete_and_in_order_per_key(broker, topic_factory):
    topic = topic_factory(partitions=4)
    _produce_contract_records(broker.bootstrap, topic)
    got, fetch_high_watermarks, _ = _read_all(broker.bootstrap, topic, 4, N)
    assert len(got) == N
    per_key = collections.defaultdict(list)
    partition_of = {}
    for m in got:
        record = events.decode(m.value())
        per_key[m.key()].append(record.fetch_offset)
        assert partition_of.setdefault(m.key(), m.partition()) == m.partition()
    assert len(per_key) == KEYS
    assert all(offsets == list(range(N // KEYS)) for offsets in per_key.values())
    # the high watermark cached from Fetch responses is the true log end of each partition
    counts = collections.Counter(m.partition() for m in got)
    assert fetch_high_watermarks == {p: counts[p] for p in range(4)}


def test_list_offsets_latest_is_the_log_end(broker, topic_factory):
    topic = topic_factory(partitions=1)
    producer = Producer({**PRODUCER_DEFAULTS, "bootstrap.servers": broker.bootstrap, "linger.ms": 200})
    for i in range(50):
        producer.produce(topic, b"x%d" % i)
    assert producer.flush(30) == 0
    got, high, listed = _read_all(broker.bootstrap, topic, 1, 50)
    assert len(got) == 50 and high[0] == 50 and listed[0] == 50


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_broker_stops_in_order_frees_its_port_and_leaves_nothing_behind(tmp_path):
    port = free_port()
    b = KafkaBroker(port=port)
    with b:
        pid, data_dir = b.pid, b.data_dir
        assert pid is not None and (data_dir / "data" / "meta.properties").exists()
        b.create_topic("a", 2)
    assert not _alive(pid) and not data_dir.exists()
    log = tmp_path / "kafka.log"
    with KafkaBroker(port=port, log_path=log) as again:  # the port is free again at once
        again.create_topic("a", 2)
    assert "shut down completed" in log.read_text()


def test_a_broker_that_cannot_start_says_so_with_its_log(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        log = tmp_path / "kafka.log"
        with pytest.raises(BrokerError, match=f"exited with code .*{log}"):
            KafkaBroker(port=taken.getsockname()[1], log_path=log).start()


def test_missing_jars_name_the_set_up_that_fetches_them(tmp_path, monkeypatch):
    monkeypatch.setenv("QUORUM_JVM_DIR", str(tmp_path))
    with pytest.raises(jvm.JvmPartsMissing, match="deploy/setup.sh.*'kafka' profile"):
        KafkaBroker().start()


def test_a_random_cluster_id_is_kafkas_form_and_never_reads_as_an_option():
    ids = {random_cluster_id() for _ in range(5000)}  # ~78 would start with '-' if drawn blindly
    assert len(ids) == 5000
    assert all(len(i) == 22 and not i.startswith("-") and re.fullmatch(r"[A-Za-z0-9_-]+", i) for i in ids)
