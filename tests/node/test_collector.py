"""`quorum collect` publishes the DescribeQuorum answer of a running quorum as
quorum_snapshot records."""
from __future__ import annotations

import argparse

import pytest

from quorum import collector, events
from quorum.node.local_cluster import FAST, Cluster, read_events

pytestmark = pytest.mark.slow


def test_snapshot_record_from_a_describe_result():
    result = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{
        "partition_index": 0, "leader_id": 2, "leader_epoch": 4, "high_watermark": 10, "error": None,
        "current_voters": [{"replica_id": 2, "log_end_offset": 11, "last_fetch_timestamp": 5,
                            "last_caught_up_timestamp": 5}],
        "observers": [{"replica_id": 7, "log_end_offset": 3, "last_fetch_timestamp": -1,
                       "last_caught_up_timestamp": -1}]}]}]}
    snap = collector.snapshot(result, "c1", "host:1", 1000)
    assert events.validate(snap) == snap
    assert snap.voters[0] == events.ReplicaState(2, 11, 5, 5) and snap.observers[0].replica_id == 7


def test_collect_from_a_running_quorum(tmp_path, broker, topic_factory):
    topic = topic_factory(1)
    c = Cluster(tmp_path, voters=3, observers=0, settings=FAST)
    c.start()
    try:
        leader = c.wait_leader()
        follower = next(i for i in c.voter_ids if i != leader)
        args = argparse.Namespace(bootstrap_server=c.bootstrap(follower), interval_ms=100,
                                  events_bootstrap_server=broker.bootstrap, events_topic=topic, cluster_id=None,
                                  command_config=None, events_command_config=None, count=3, timeout_ms=5000)
        assert collector.run(args) == 0
        snaps = read_events(broker.bootstrap, topic, lambda rs: len(rs) >= 3)
        assert all(isinstance(s, events.QuorumSnapshot) for s in snaps)
        assert {s.leader_id for s in snaps} == {leader} and snaps[0].cluster_id == "test-cluster"
        assert sorted(v.replica_id for v in snaps[-1].voters) == c.voter_ids
    finally:
        c.stop_all()
