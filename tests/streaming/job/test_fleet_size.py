"""A new checkpoint's state partitions follow the fleet in the events topic: the quorums counted
from a real broker's recent records (old records and other keys left out), the count cut short
once the answer is known, a missing topic is no fleet, a broker that cannot be reached leaves
`auto` at the cores with a warning, and a checkpoint with batches is never counted for."""
from __future__ import annotations

import logging
import time

from confluent_kafka import Producer

from quorum.events import key_of, quorum_key
from quorum.local_kafka.loopback_ports import free_port
from streaming.config import JobConfig
from streaming.fleet_size import is_new_local_checkpoint, quorum_of, recent_quorums
from streaming.job import new_checkpoint_partitions


def publish_keys(bootstrap: str, topic: str, keys: list[bytes], age_ms: int = 0) -> None:
    """One record per key, stamped `age_ms` ago."""
    producer = Producer({"bootstrap.servers": bootstrap})
    stamp = int(time.time() * 1000) - age_ms
    for i, key in enumerate(keys):
        producer.produce(topic, key=key, value=b"{}", partition=i % 4, timestamp=stamp)
    assert producer.flush(30) == 0


def job_config(broker, topic: str, checkpoint) -> JobConfig:
    return JobConfig.from_dict({"source": {"bootstrap_servers": broker.bootstrap, "topic": topic},
                                "job": {"checkpoint_location": str(checkpoint)}})


def test_a_record_key_names_its_quorum_whether_per_quorum_or_per_replica():
    assert quorum_of(quorum_key("c1", "__cluster_metadata", 0)) == b"c1/__cluster_metadata-0"
    assert quorum_of(key_of("c1", "__cluster_metadata", 0, 3)) == b"c1/__cluster_metadata-0"
    assert quorum_of(None) is None and quorum_of(b"") is None


def test_the_quorums_of_the_last_minute_are_counted(broker, topic):
    publish_keys(broker.bootstrap, topic, [quorum_key(f"old{i}", "t", 0) for i in range(6)], age_ms=600_000)
    recent = [quorum_key(f"c{i}", "t", 0) for i in range(5)] + [key_of(f"c{i}", "t", 0, r) for i in range(5)
                                                                 for r in range(3)]
    publish_keys(broker.bootstrap, topic, recent)
    source = job_config(broker, topic, "unused").source
    assert recent_quorums(source, enough=100) == 5
    assert recent_quorums(source, enough=3) == 3  # enough to decide: counted no further


def test_the_connectors_own_settings_are_left_to_it_and_a_login_python_cannot_speak_is_no_count(broker, topic,
                                                                                                   caplog):
    publish_keys(broker.bootstrap, topic, [quorum_key("c", "t", 0)])
    tuned = JobConfig.from_dict({"source": {"bootstrap_servers": broker.bootstrap, "topic": topic,
                                            "kafka": {"fetch.max.wait.ms": "250", "request.timeout.ms": "20000"}}})
    assert recent_quorums(tuned.source, enough=10) == 1
    kerberos = JobConfig.from_dict({"source": {"bootstrap_servers": broker.bootstrap, "topic": topic, "kafka": {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI",
        "sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required;"}}})
    assert recent_quorums(kerberos.source, enough=10) is None
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "GSSAPI is not supported" in warning and "not sized by the fleet" in warning


def test_a_topic_not_created_yet_has_no_fleet(broker):
    assert recent_quorums(job_config(broker, "no-such-topic-yet", "unused").source, enough=10) == 0


def test_a_broker_out_of_reach_leaves_the_count_unknown_within_its_budget(caplog):
    cfg = JobConfig.from_dict({"source": {"bootstrap_servers": f"127.0.0.1:{free_port()}"}})
    started = time.monotonic()
    assert recent_quorums(cfg.source, enough=10, budget_s=2) is None
    assert time.monotonic() - started < 10
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "could not count the quorums of topic quorum-events" in warning


def test_a_new_checkpoint_on_local_2_takes_one_partition_per_200_quorums(broker, topic_factory, tmp_path, caplog):
    caplog.set_level(logging.INFO, "streaming.job")
    few, many = topic_factory(), topic_factory()
    publish_keys(broker.bootstrap, few, [quorum_key(f"c{i}", "t", 0) for i in range(3)])
    publish_keys(broker.bootstrap, many, [quorum_key(f"c{i}", "t", 0) for i in range(201)])
    assert new_checkpoint_partitions(job_config(broker, few, tmp_path / "a"), "local[2]") == 1
    assert "records of 3 quorum(s) in its last 60 s: 1 state partition(s)" in caplog.text
    assert new_checkpoint_partitions(job_config(broker, many, tmp_path / "b"), "local[2]") == 2
    assert "records of 201+ quorum(s)" in caplog.text
    # nothing to share out on one core, a cluster keeps room to grow, a number set is kept
    assert new_checkpoint_partitions(job_config(broker, few, tmp_path / "c"), "local[1]") == 1
    assert new_checkpoint_partitions(job_config(broker, few, tmp_path / "d"), "spark://m:7077") == 8


def test_a_checkpoint_with_batches_is_not_counted_for(broker, topic, tmp_path, caplog):
    caplog.set_level(logging.INFO, "streaming.job")
    publish_keys(broker.bootstrap, topic, [quorum_key("c", "t", 0)])
    (tmp_path / "health" / "offsets").mkdir(parents=True)
    assert is_new_local_checkpoint(str(tmp_path / "health"))
    (tmp_path / "health" / "offsets" / "0").write_text("v1\n{}\n")
    assert not is_new_local_checkpoint(str(tmp_path / "health"))
    assert not is_new_local_checkpoint("hdfs://namenode/checkpoints/health")
    # the checkpoint keeps its own number: `auto` says the cores, and nothing is counted
    assert new_checkpoint_partitions(job_config(broker, topic, tmp_path), "local[2]") == 2
    assert "quorum(s)" not in caplog.text
