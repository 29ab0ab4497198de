"""A KafkaCluster's configuration per shape, before anything starts: combined nodes are brokers
and controllers on two ports each (the client ports are the bootstrap, the CONTROLLER ports the
controllers' bootstrap and the voters), a static voter set is controller.quorum.voters on every
node, and a shape Kafka cannot run is refused by name. tests/kafka_quorum starts every shape."""
from __future__ import annotations

import pytest

from quorum.local_kafka.kafka_broker import BrokerError
from quorum.local_kafka.kafka_cluster import KafkaCluster


def test_combined_static_nodes_are_brokers_and_controllers_on_two_ports(tmp_path):
    c = KafkaCluster(base_dir=tmp_path, kafka_version="3.9.1", topology="combined", voter_set="static")
    assert c.controller_ids() == c.broker_ids() == [1, 2, 3] == sorted(c.nodes)
    clients = [c.nodes[i].port for i in (1, 2, 3)]
    controllers = [c.nodes[i].controller_port for i in (1, 2, 3)]
    assert not set(clients) & set(controllers)
    assert c.bootstrap == ",".join(f"127.0.0.1:{p}" for p in clients)
    assert c.bootstrap_controllers == ",".join(f"127.0.0.1:{p}" for p in controllers)
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in zip((1, 2, 3), controllers))
    for i in (1, 2, 3):
        props = c.properties(c.nodes[i])
        assert props["process.roles"] == "broker,controller"
        assert props["listeners"] == \
            f"PLAINTEXT://127.0.0.1:{clients[i - 1]},CONTROLLER://127.0.0.1:{controllers[i - 1]}"
        assert props["advertised.listeners"] == f"PLAINTEXT://127.0.0.1:{clients[i - 1]}"
        assert props["controller.quorum.voters"] == voters and "controller.quorum.bootstrap.servers" not in props
        assert c._format_quorum_args(c.nodes[i]) == []
        assert c.node_of_port(clients[i - 1]) == c.node_of_port(controllers[i - 1]) == i
    assert c.node_of_port(1) is None


def test_dedicated_dynamic_is_the_default_and_formats_the_initial_controllers(tmp_path):
    c = KafkaCluster(base_dir=tmp_path)
    assert (c.kafka_version, c.topology, c.voter_set) == ("4.4.0", "dedicated", "dynamic")
    assert c.controller_ids() == [1, 2, 3] and c.broker_ids() == [4]
    broker = c.properties(c.nodes[4])
    assert broker["process.roles"] == "broker" and "controller.quorum.voters" not in broker
    assert broker["controller.quorum.bootstrap.servers"] == c.bootstrap_controllers
    [flag, voters] = c._format_quorum_args(c.nodes[1])
    assert flag == "--initial-controllers" and voters.split(",")[0] == \
        f"1@{c.controller_endpoint(1)}:{c.nodes[1].directory_id}"
    assert c._format_quorum_args(c.nodes[4]) == ["--no-initial-controllers"]


def test_a_static_dedicated_cluster_gives_every_node_the_voters_and_takes_no_new_controller(tmp_path):
    c = KafkaCluster(base_dir=tmp_path, kafka_version="3.7.2", voter_set="static")
    assert {c.properties(n)["controller.quorum.voters"] for n in c.nodes.values()} == {c.static_voters}
    assert c.describe_version == 1  # 3.7 answers DescribeQuorum v0-v1
    with pytest.raises(BrokerError, match="static voter set"):
        c.add_controller_node()


@pytest.mark.parametrize("options, says", [
    ({"kafka_version": "3.7.2", "voter_set": "dynamic"}, "static voter sets only"),
    ({"kafka_version": "3.8.0"}, "not pinned"),
    ({"topology": "mixed"}, "topology 'mixed'"),
    ({"other_voters": {100: 1}, "voter_set": "dynamic"}, "static"),
])
def test_a_shape_kafka_cannot_run_is_refused_by_name(tmp_path, options, says):
    with pytest.raises(Exception, match=says):
        KafkaCluster(base_dir=tmp_path, **options)
