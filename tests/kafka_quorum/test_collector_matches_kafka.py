"""`quorum describe` and `quorum collect`'s snapshot of a real KRaft quorum (each shape of the
package: three controllers and a broker, or three combined nodes) say what Kafka's own
`kafka-metadata-quorum describe --status --replication` says, the tool of the cluster's own
version, asked in the same breath: leader, epoch, high watermark, voters and observers with
their directory ids (where that version's tool prints them), log end offsets and timestamps
(values that move between the calls within a stated tolerance: the leader appends a NoOp every
500 ms, and Kafka's tool starts a JVM, ~2 s here)."""
from __future__ import annotations

import json
import subprocess
import sys

from kafka_tools import (OFFSET_TOLERANCE, TIME_TOLERANCE_MS, assert_describe_replication_matches,
                         assert_describe_status_matches, metadata_quorum, replicas)
from quorum import events
from quorum.events import UNKNOWN_DIRECTORY_ID
from quorum.kafka_watch.kafka_node_metrics import APPLIED, KAFKA_STATES, RAFT, RAFT_GAUGES, samples
from quorum.kafka_watch.metrics_connection import scrape
from quorum.testing.local_cluster import read_events


def collect_once(cluster, events_bootstrap: str, topic: str, *options: str, records: int = 1) -> list[dict]:
    """One poll of `quorum collect`; the records it published."""
    out = subprocess.run([sys.executable, "-m", "quorum.cli", "collect", "--bootstrap-server", cluster.bootstrap,
                          "--events-bootstrap-server", events_bootstrap, "--events-topic", topic, "--count", "1",
                          *options], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    got = read_events(events_bootstrap, topic, lambda rs: len(rs) >= records)
    assert len(got) == records, (got, out.stderr)
    return [events.to_dict(r) for r in got]


def test_quorum_describe_status_matches_kafkas_tool(kafka_cluster):
    assert_describe_status_matches(kafka_cluster.bootstrap, kafka_cluster.kafka_version)


def test_quorum_describe_through_the_controllers_matches_kafkas_tool(kafka_cluster):
    """`--bootstrap-controller` (KIP-919): the controllers asked, no broker on the path."""
    assert_describe_status_matches(kafka_cluster.bootstrap_controllers, kafka_cluster.kafka_version,
                                   path="--bootstrap-controller")


def test_quorum_describe_replication_matches_kafkas_tool(kafka_cluster):
    assert_describe_replication_matches(kafka_cluster.bootstrap, kafka_cluster.kafka_version)


def test_the_collectors_snapshot_says_what_kafkas_tool_says(kafka_cluster, broker, topic_factory):
    kafka_cluster.wait_for(kafka_cluster.every_replica_fetching, 60, "every replica fetching")
    [snap] = collect_once(kafka_cluster, broker.bootstrap, topic_factory(1))
    version = kafka_cluster.kafka_version
    status = dict(line.split(":", 1) for line in metadata_quorum(kafka_cluster.bootstrap, "--status",
                                                                 version=version).splitlines() if ":" in line)
    status = {k.strip(): v.strip() for k, v in status.items()}
    table = [line.split() for line in metadata_quorum(kafka_cluster.bootstrap, "--replication",
                                                      version=version).splitlines() if line]
    rows = {int(r[0]): dict(zip(table[0], r)) for r in table[1:]}
    print("collector:", json.dumps(snap), "\nkafka-metadata-quorum:", status, rows)

    assert snap["type"] == "quorum_snapshot" and snap["cluster_id"] == status["ClusterId"]
    assert snap["leader_id"] == int(status["LeaderId"]) and snap["leader_epoch"] == int(status["LeaderEpoch"])
    assert 0 <= int(status["HighWatermark"]) - snap["high_watermark"] <= OFFSET_TOLERANCE
    # 3.7's tool prints ids alone (its DescribeQuorum has no directory ids): unknown, as ours says
    theirs_voters = {i: r.get("directoryId", UNKNOWN_DIRECTORY_ID)
                     for i, r in replicas(status["CurrentVoters"]).items()}
    theirs_observers = {i: r.get("directoryId", UNKNOWN_DIRECTORY_ID)
                        for i, r in replicas(status["CurrentObservers"]).items()}
    assert {v["replica_id"]: v["directory_id"] for v in snap["voters"]} == theirs_voters
    assert {o["replica_id"]: o["directory_id"] for o in snap["observers"]} == theirs_observers
    assert set(theirs_voters) == set(kafka_cluster.controller_ids())
    # a combined node is a voter, never an observer: only broker-only nodes observe
    assert set(theirs_observers) == set(kafka_cluster.broker_ids()) - set(kafka_cluster.controller_ids())
    for replica in snap["voters"] + snap["observers"]:
        row = rows[replica["replica_id"]]
        assert row.get("DirectoryId", UNKNOWN_DIRECTORY_ID) == replica["directory_id"]
        assert row["Status"] == ("Leader" if replica["replica_id"] == snap["leader_id"]
                                 else "Follower" if replica["replica_id"] in theirs_voters else "Observer")
        assert 0 <= int(row["LogEndOffset"]) - replica["log_end_offset"] <= OFFSET_TOLERANCE
        for column, field in (("LastFetchTimestamp", "last_fetch_timestamp_ms"),
                              ("LastCaughtUpTimestamp", "last_caught_up_timestamp_ms")):
            assert 0 <= int(row[column]) - replica[field] <= TIME_TOLERANCE_MS, (column, row, replica)


def test_with_node_metrics_each_node_reports_its_own_view_beside_the_snapshot(kafka_cluster, broker, topic_factory):
    """--node-metrics: one `metrics` record per node from its JMX exporter endpoint, in the same
    poll as the snapshot, agreeing with it on the leader, the epoch and each node's role."""
    kafka_cluster.wait_for(kafka_cluster.every_replica_fetching, 60, "every replica fetching")
    nodes = sorted(kafka_cluster.nodes)
    options = [a for i in nodes for a in ("--node-metrics", f"{i}={kafka_cluster.metrics_url(i)}")]
    got = collect_once(kafka_cluster, broker.bootstrap, topic_factory(1), *options, records=1 + len(nodes))
    [snap] = [r for r in got if r["type"] == "quorum_snapshot"]
    metrics = {r["node_id"]: r for r in got if r["type"] == "metrics"}
    print(json.dumps(metrics, indent=1))
    assert sorted(metrics) == nodes
    voters = sorted(v["replica_id"] for v in snap["voters"])
    for node, m in metrics.items():
        # stamped when its endpoint answered: within the round, as the snapshot is
        assert abs(m["time_ms"] - snap["time_ms"]) <= 1000 and m["voter_set"] == voters
        assert (m["leader_id"], m["epoch"]) == (snap["leader_id"], snap["leader_epoch"]), m
        assert m["state"] == ("leader" if node == snap["leader_id"] else "follower" if node in voters
                              else "observer"), m
        assert m["high_watermark"] > 0 and m["log_end_offset"] >= m["high_watermark"] - 20
        assert 0 <= m["last_applied_offset"] <= m["log_end_offset"] and m["last_applied_lag_ms"] >= 0


def test_every_gauge_the_collector_reads_comes_out_of_each_nodes_exporter(kafka_cluster):
    """deploy/kafka-jmx-exporter.yml's rules on this shape's Kafka line: each node's endpoint
    serves every raft-metrics gauge the collector reads, and the KIP-835 gauges of each of its
    roles (a controller's KafkaController ones, a broker's broker-metadata-metrics ones), each a
    number; a line that renames one fails here by name, not as a quiet -1 in a record."""
    kafka_cluster.wait_for(kafka_cluster.every_replica_fetching, 60, "every replica fetching")
    controller_names = {names[0] for names in APPLIED.values()}
    broker_names = {names[1] for names in APPLIED.values() if len(names) > 1}
    for node_id, node in sorted(kafka_cluster.nodes.items()):
        values = samples(scrape(kafka_cluster.metrics_url(node_id), 5))
        states = {k.split('state="', 1)[1].rstrip('"}'): v for k, v in values.items()
                  if k.startswith(f"{RAFT}current_state{{")}
        print(f"{node.role} {node_id}: {len(values)} series, states {states}")
        assert [s for s, v in states.items() if v == 1] and set(states) <= set(KAFKA_STATES), (node_id, states)
        wanted = {RAFT + g for g in RAFT_GAUGES if g != "current_state"}
        wanted |= (controller_names if node.is_controller else set()) | (broker_names if node.is_broker else set())
        missing = sorted(wanted - values.keys())
        assert not missing, f"{node.role} {node_id} on Kafka {kafka_cluster.kafka_version}: no {missing}"
        nan = sorted(n for n in wanted if values[n] != values[n])
        assert not nan, f"{node.role} {node_id}: {nan} not a number"
