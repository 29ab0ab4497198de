"""The job's YAML configuration: documented defaults, errors that name the key, the CLI's answer."""
from __future__ import annotations

import json

import dataclasses
import os
from pathlib import Path

import pytest
import yaml

from streaming.cli import main
from streaming.config import ConfigError, JobConfig, load_config

EXAMPLE = Path(__file__).resolve().parents[3] / "deploy" / "job.local.yaml"


def keys(d: dict, prefix: str = "") -> set[str]:
    out = set()
    for k, v in d.items():
        out.add(prefix + k)
        if isinstance(v, dict):
            out |= keys(v, f"{prefix}{k}.")
    return out


def test_the_example_config_documents_every_key_with_its_default():
    example = yaml.safe_load(EXAMPLE.read_text())
    defaults = JobConfig().to_dict()
    assert keys(example) == keys(defaults)
    assert load_config(EXAMPLE) == JobConfig()


def test_an_empty_file_means_all_defaults(tmp_path):
    (tmp_path / "job.yaml").write_text("")
    assert load_config(tmp_path / "job.yaml") == JobConfig()


@pytest.mark.parametrize("config, message", [
    ({"sourc": {}}, "sourc: unknown key"),
    ({"source": {"topc": "x"}}, "source.topc: unknown key"),
    ({"source": {"kind": "python"}}, "source.kind: unknown key"),
    ({"source": {"kafka": {"auto.offset.reset": "earliest"}}}, "kafka.auto.offset.reset: set by Spark's Kafka connector"),
    ({"source": {"fail_on_data_loss": "yes"}}, "source.fail_on_data_loss: expected bool"),
    ({"source": {"starting_offsets": "middle"}}, "source.starting_offsets"),
    ({"source": {"max_offsets_per_trigger": 0}}, "source.max_offsets_per_trigger: must be >= 1"),
    ({"source": {"kafka": {"kafka.security.protocol": "SSL"}}}, "kafka.kafka.security.protocol"),
    ({"job": {"trigger_interval_ms": "1s"}}, "job.trigger_interval_ms: expected int"),
    ({"job": {"trigger_interval_ms": 5000}}, "job.trigger_interval_ms: 5000 is longer than health.tick_ms"),
    ({"health": {"stall_after_ms": -1}}, "health.stall_after_ms"),
    ({"sink": {"prometheus": {"mode": "push"}}}, "sink.prometheus.mode"),
    ({"spark": {"shuffle_partitions": 0}}, "spark.shuffle_partitions: must be >= 1 or auto"),
    ({"spark": {"shuffle_partitions": "many"}}, "spark.shuffle_partitions: must be >= 1 or auto"),
    ({"spark": {"shuffle_partitions": 2.5}}, "spark.shuffle_partitions: expected int | str"),
])
def test_a_bad_config_is_refused_naming_the_key(config, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        JobConfig.from_dict(config)


def test_source_options_use_the_connectors_names_and_pass_client_settings_through(tmp_path):
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="job" password="pw";'
    (tmp_path / "job.properties").write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.jaas.config={jaas}\n"
                                             "sasl.mechanism=PLAIN\n")
    cfg = JobConfig.from_dict({"source": {"bootstrap_servers": "b:9092", "topic": "ev", "max_offsets_per_trigger": 10,
                                          "command_config": str(tmp_path / "job.properties"),
                                          "kafka": {"sasl.mechanism": "SCRAM-SHA-512"}}})
    assert cfg.source.reader_options() == {
        "kafka.bootstrap.servers": "b:9092", "subscribe": "ev", "startingOffsets": "latest",
        "failOnDataLoss": "false", "maxRecordsPerPartition": "10000", "maxOffsetsPerTrigger": "10",
        "kafka.fetch.max.wait.ms": "10",
        "kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.jaas.config": jaas,
        "kafka.sasl.mechanism": "SCRAM-SHA-512"}
    assert cfg.shown()["source"]["kafka"] == {"sasl.mechanism": "SCRAM-SHA-512"}


def test_check_config_exits_2_on_a_missing_truststore_and_never_prints_a_secret(tmp_path, capsys):
    from streaming.cli import main
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="job" password="hunter2";'
    source = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": jaas,
              "ssl.truststore.password": "trust-pw"}
    config = tmp_path / "job.yaml"
    config.write_text(json.dumps({"source": {"kafka": {**source, "ssl.truststore.location": "/nonexistent.jks"}}}))
    assert main(["check-config", "--config", str(config)]) == 2
    out = capsys.readouterr()
    assert "ssl.truststore.location: /nonexistent.jks cannot be read here" in out.err
    config.write_text(json.dumps({"source": {"kafka": source},
                                  "sink": {"kafka": {"properties": {**source, "security.protocol": "SASL_PLAINTEXT"}}}}))
    assert main(["check-config", "--config", str(config)]) == 0
    out = capsys.readouterr()
    assert '"sasl.jaas.config": "[hidden]"' in out.out and '"ssl.truststore.password": "[hidden]"' in out.out
    for secret in ("hunter2", "trust-pw"):
        assert secret not in out.out + out.err


def test_the_reads_short_fetch_wait_gives_way_to_the_users_own():
    cfg = JobConfig.from_dict({"source": {"bootstrap_servers": "b:9092", "topic": "ev",
                                          "kafka": {"fetch.max.wait.ms": 250}}})
    assert cfg.source.reader_options()["kafka.fetch.max.wait.ms"] == "250"


def test_cli_exits_2_with_the_file_and_key_for_a_bad_config(tmp_path, capsys):
    path = tmp_path / "job.yaml"
    path.write_text("source:\n  topic: ''\n")
    assert main(["check-config", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "source.topic: must not be empty" in err


def test_cli_check_config_prints_every_default(tmp_path, capsys):
    path = tmp_path / "job.yaml"
    path.write_text("source: {topic: events}\n")
    assert main(["check-config", "--config", str(path)]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed == dataclasses.asdict(dataclasses.replace(JobConfig(), source=JobConfig.from_dict(
        {"source": {"topic": "events"}}).source))


@pytest.mark.parametrize("master, partitions", [
    ("local[2]", 2), ("local[1]", 1), ("local", 1), ("local[3,2]", 3), ("local[64]", 8),
    ("local[*]", min(os.cpu_count() or 1, 8)), ("spark://master:7077", 8), ("yarn", 8),
    ("k8s://https://10.0.0.1:6443", 8)])
def test_auto_state_partitions_are_the_local_cores_or_room_to_grow_on_a_cluster(master, partitions):
    # every state partition is a task in every micro-batch: more than can run at once only costs
    assert JobConfig().spark.state_partitions(master) == partitions


def test_a_state_partition_count_given_is_kept_on_any_master():
    cfg = JobConfig.from_dict({"spark": {"shuffle_partitions": 16}})
    assert cfg.spark.state_partitions("local[2]") == cfg.spark.state_partitions("yarn") == 16


@pytest.mark.parametrize("master, fleet, partitions", [
    ("local[2]", 0, 1), ("local[2]", 1, 1), ("local[2]", 200, 1), ("local[2]", 201, 2), ("local[2]", 5000, 2),
    ("local[8]", 450, 3), ("local[2]", None, 2), ("spark://master:7077", 1, 8)])
def test_auto_gives_a_new_local_checkpoint_one_state_partition_per_200_quorums(master, fleet, partitions):
    # each partition is a task in every batch; one keeps up with a few hundred quorums
    assert JobConfig().spark.state_partitions(master, fleet) == partitions


def test_only_auto_on_several_local_cores_asks_for_the_fleet():
    assert JobConfig().spark.quorums_to_count("local[2]") == 201  # more would not change the answer
    assert JobConfig().spark.quorums_to_count("local[8]") == 1401
    assert JobConfig().spark.quorums_to_count("local[1]") == 0
    assert JobConfig().spark.quorums_to_count("yarn") == 0
    assert JobConfig.from_dict({"spark": {"shuffle_partitions": 4}}).spark.quorums_to_count("local[2]") == 0
