"""A project node cannot fetch snapshots (FetchSnapshot): when a Kafka leader's log no longer starts
at 0, the leader answers its fetches with the snapshot to fetch instead, and the node says plainly
that it cannot follow, and why, rather than fetching forever in silence."""
from __future__ import annotations

import time

import pytest

from kafka_interop.conftest import PROJECT_NODE_ID, start_project_observer
from quorum.local_kafka.kafka_cluster import KafkaCluster

# Tiny segments, a snapshot every second and no retention: Kafka deletes the head of its log soon
SHORT_LOG = {"internal.metadata.log.segment.bytes": "4096", "metadata.log.segment.ms": "1000",
             "metadata.log.max.snapshot.interval.ms": "1000", "metadata.log.max.record.bytes.between.snapshots": "1",
             "metadata.max.retention.ms": "1000", "metadata.max.retention.bytes": "1"}


@pytest.fixture(scope="module")
def short_log_cluster(tmp_path_factory):
    with KafkaCluster(base_dir=tmp_path_factory.mktemp("kafka-short-log"), settings=SHORT_LOG) as cluster:
        yield cluster


def log_start(cluster, node_id: int) -> int:
    """The first offset of a controller's metadata log: its oldest segment not yet deleted."""
    directory = cluster.nodes[node_id].data_dir / "data" / "__cluster_metadata-0"
    return min(int(p.name.split(".")[0]) for p in directory.iterdir() if p.name.endswith(".log"))


def test_a_node_behind_the_kafka_leaders_log_start_says_it_cannot_follow(short_log_cluster, tmp_path):
    start = time.monotonic()
    leader = short_log_cluster.wait_for(lambda: (i := short_log_cluster.leader()) >= 0 and log_start(short_log_cluster, i) > 0
                                        and i, 180, "the Kafka leader's log starting above offset 0")
    print(f"\nleader {leader}'s log starts at {log_start(short_log_cluster, leader)} "
          f"{time.monotonic() - start:.0f} s after the cluster was ready")
    node = start_project_observer(short_log_cluster, tmp_path)
    try:
        status = node.wait_for(lambda: (s := node.try_status(PROJECT_NODE_ID))["cannot_follow"] and s, 30,
                               "the node saying it cannot follow")
        print(f"node {PROJECT_NODE_ID}: {status['cannot_follow']}")
        assert "snapshot" in status["cannot_follow"] and "FetchSnapshot" in status["cannot_follow"]
        assert status["log_end_offset"] == 0          # nothing appended from a log it cannot continue
        errors = [line for line in node.log_text(PROJECT_NODE_ID).splitlines() if " ERROR " in line]
        assert any(status["cannot_follow"] in line for line in errors)
    finally:
        node.stop_all()
