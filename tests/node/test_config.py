"""The node's configuration: defaults are Kafka's, errors name the key and say why, and a
data directory of another cluster or node is refused."""
from __future__ import annotations

import subprocess
import sys

import pytest

from quorum.node.config import ConfigError, from_mapping, load

BASE = {"node.id": 2, "cluster.id": "c1", "controller.quorum.voters": "1@h1:9093,2@h2:9093,3@h3:9093",
        "listener": "h2:9093", "data.dir": "/tmp/x"}


def test_defaults_are_kafkas():
    cfg = from_mapping(BASE)
    rc = cfg.raft_config()
    assert (rc.election_timeout_ms, rc.fetch_timeout_ms, rc.election_backoff_max_ms, rc.request_timeout_ms,
            rc.retry_backoff_ms, rc.append_linger_ms, rc.max_idle_interval_ms, rc.fetch_max_wait_ms) == \
        (1000, 2000, 1000, 2000, 20, 25, 500, 500)
    assert cfg.is_voter and sorted(cfg.voters) == [1, 2, 3] and cfg.topic == "__cluster_metadata"
    assert not from_mapping({**BASE, "node.id": 9, "listener": "h9:1"}).is_voter


@pytest.mark.parametrize("change, message", [
    ({"node.id": "two"}, "node.id: expected an integer"),
    ({"controller.quorum.voters": "1@h1"}, "controller.quorum.voters (voter 1): expected host:port"),
    ({"controller.quorum.voters": "x@h1:1"}, "expected id@host:port"),
    ({"controller.quorum.voters": "1@h:1,1@h:2"}, "voter 1 is listed twice"),
    ({"controller.quorum.fetch.timeout.ms": 0}, "must be positive"),
    ({"controller.quorum.fech.timeout.ms": 5}, "did you mean 'controller.quorum.fetch.timeout.ms'"),
    ({"listener": "h2:9999"}, "differs from this node's entry"),
    ({"log.fsync": "maybe"}, "log.fsync: expected true or false"),
])
def test_bad_values_name_the_key(change, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        from_mapping({**BASE, **change})


def test_missing_keys_are_listed():
    with pytest.raises(ConfigError, match="missing required key.*cluster.id.*data.dir"):
        from_mapping({"node.id": 1, "controller.quorum.voters": "1@h:1", "listener": "h:1"})


def test_events_security_settings_in_kafkas_names_reach_the_producer_config():
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="node" password="pw";'
    cfg = from_mapping({**BASE, "events.bootstrap.servers": "k:9092", "events.security.protocol": "SASL_PLAINTEXT",
                        "events.sasl.mechanism": "SCRAM-SHA-512", "events.sasl.jaas.config": jaas})
    assert cfg.events_client == {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512",
                                 "sasl_plain_username": "node", "sasl_plain_password": "pw"}
    assert cfg.events_principal == "node"
    assert "pw" not in repr(cfg)


def test_events_security_settings_from_a_command_config_file(tmp_path):
    path = tmp_path / "events.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
                    "org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
                    '    username="node" password="pw";\n')
    cfg = from_mapping({**BASE, "events.bootstrap.servers": "k:9092", "events.command.config": str(path)})
    assert cfg.events_client["sasl_plain_password"] == "pw"
    with pytest.raises(ConfigError, match="either in that file or as events"):
        from_mapping({**BASE, "events.command.config": str(path), "events.security.protocol": "SSL"})


def test_events_settings_in_another_clients_dialect_are_refused():
    with pytest.raises(ConfigError, match="unknown key 'events.sasl.plain.username'"):
        from_mapping({**BASE, "events.bootstrap.servers": "k:9092", "events.sasl.plain.username": "u"})
    with pytest.raises(ConfigError, match="events.sasl.jaas.config: needed for SASL PLAIN"):
        from_mapping({**BASE, "events.security.protocol": "SASL_SSL", "events.sasl.mechanism": "PLAIN"})


def test_node_command_refuses_another_clusters_data_dir(tmp_path):
    from quorum.storage.meta import check_or_claim
    check_or_claim(tmp_path / "d", "other-cluster", 1)
    cfg = tmp_path / "n.yaml"
    cfg.write_text(f"node.id: 1\ncluster.id: c1\ncontroller.quorum.voters: 1@127.0.0.1:1\n"
                   f"listener: 127.0.0.1:1\ndata.dir: {tmp_path / 'd'}\n")
    assert load(cfg).cluster_id == "c1"
    p = subprocess.run([sys.executable, "-m", "quorum.cli", "node", "--config", str(cfg)], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2 and "belongs to cluster 'other-cluster'" in p.stderr
