"""What the nodes publish: the leader's `fetch` records replayed through the KIP-836 rule
give the timestamps the leader reports in DescribeQuorum, and each carries the state the replay
reaches with it; every node publishes `metrics`
and `state_change`; with the events broker unreachable the quorum still elects and
commits, and the drops are counted."""
from __future__ import annotations

from collections import defaultdict

import pytest

from kip836_replay import Kip836Replay
from quorum import events
from quorum.local_kafka.loopback_ports import free_port
from quorum.testing.local_cluster import FAST, Cluster, read_events

pytestmark = pytest.mark.slow


def kip836_states(fetches: list[events.Fetch]) -> list[tuple[int, tuple[int, int, int]]]:
    """(replica, (end offset, last fetch, last caught up)) after every valid fetch."""
    replay = Kip836Replay()
    return [(f.replica_id, replay.apply(f)) for f in fetches if f.outcome == "valid"]


def test_replayed_fetch_records_give_the_leaders_describe_quorum_timestamps(tmp_path, broker, topic_factory):
    topic = topic_factory(1)
    c = Cluster(tmp_path, voters=3, observers=1, settings=FAST, events_bootstrap=broker.bootstrap,
                events_topic=topic)
    c.start()
    try:
        leader = c.wait_leader()
        c.append(leader, [f"v{i}".encode() for i in range(30)])
        described = c.describe_direct(leader)["topics"][0]["partitions"][0]
        epoch = described["leader_epoch"]
        expected = {r["replica_id"]: (r["log_end_offset"], r["last_fetch_timestamp"], r["last_caught_up_timestamp"])
                    for r in described["current_voters"] + described["observers"] if r["replica_id"] != leader}

        def replay_matches(records) -> bool:
            fetches = [r for r in records if isinstance(r, events.Fetch) and r.leader_id == leader
                       and r.leader_epoch == epoch]
            seen = defaultdict(set)
            for replica, state in kip836_states(fetches):
                seen[replica].add(state)
            # the DescribeQuorum answer is the state after some prefix of each replica's fetches
            return all(expected[r] in seen[r] for r in expected)

        def every_node_reported(records) -> bool:
            # a node's first metrics record comes one interval after it starts: wait for it
            kinds = {(type(r).__name__, getattr(r, "node_id", None)) for r in records}
            return all(("Metrics", i) in kinds and ("StateChange", i) in kinds for i in c.ids)

        records = read_events(broker.bootstrap, topic, lambda rs: replay_matches(rs) and every_node_reported(rs))
        # and each valid fetch record carries, itself, the state the replay reaches with it
        fetches = [r for r in records if isinstance(r, events.Fetch) and r.leader_id == leader
                   and r.leader_epoch == epoch]
        carried = [(f.replica_id, (f.replica_log_end_offset, f.last_fetch_timestamp_ms, f.last_caught_up_timestamp_ms))
                   for f in fetches if f.outcome == "valid"]
        assert carried == kip836_states(fetches) and len(carried) > 10
        assert all(r.dropped_events_total == 0 for r in records if isinstance(r, events.Metrics))
        assert {r.replica_role for r in records if isinstance(r, events.Fetch) and r.replica_id == 4} == {"observer"}
    finally:
        c.stop_all()


def test_an_election_completes_and_commits_with_the_events_broker_down(tmp_path):
    dead = f"127.0.0.1:{free_port()}"
    c = Cluster(tmp_path, voters=3, observers=0, events_bootstrap=dead, events_topic="events",
                settings={**FAST, "events.buffer.records": 20, "events.metrics.interval.ms": 100})
    c.start()
    try:
        leader = c.wait_leader()
        offsets = c.append(leader, [b"a", b"b"])
        assert offsets[1] == offsets[0] + 1
        c.wait_for(lambda: c.try_status(leader)["dropped_events_total"] > 0, 15,
                   "the leader to count the events it could not publish")
    finally:
        c.stop_all()
