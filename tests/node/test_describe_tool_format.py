"""The describe tool's text, from a describe_metadata_quorum() result (facts file:
kafka-metadata-quorum describe)."""
from __future__ import annotations

import pytest

from quorum.describe_tool import (DescribeError, format_replication, format_status, max_follower_lag,
                                  quorum_info)


def result(voters, observers=(), leader=1):
    def rs(t):
        return {"replica_id": t[0], "log_end_offset": t[1], "last_fetch_timestamp": t[2],
                "last_caught_up_timestamp": t[3]}
    return {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{
        "partition_index": 0, "leader_id": leader, "leader_epoch": 15, "high_watermark": 234130,
        "current_voters": [rs(v) for v in voters], "observers": [rs(o) for o in observers], "error": None}]}],
        "nodes": []}


VOTERS = [(1, 234134, 10_000, 10_000), (2, 234130, 9_990, 9_990), (3, 234100, 9_985, 9_985)]
OBSERVERS = [(4, 234124, 9_999, 9_988)]


def test_status_lines_and_laggiest_voter():
    text = format_status("SomeClusterId", quorum_info(result(VOTERS, OBSERVERS)))
    assert text.splitlines() == [
        "ClusterId:              SomeClusterId",
        "LeaderId:               1",
        "LeaderEpoch:            15",
        "HighWatermark:          234130",
        "MaxFollowerLag:         34",
        "MaxFollowerLagTimeMs:   15",
        "CurrentVoters:          [1,2,3]",
        "CurrentObservers:       [4]",
    ]


def test_max_follower_lag_time_is_zero_when_the_laggiest_is_the_leader():
    info = quorum_info(result([(1, 10, 5, 5), (2, 10, 4, 4)]))
    assert max_follower_lag(info) == (0, 0)


def test_max_follower_lag_time_is_unknown_when_a_timestamp_is_unknown():
    info = quorum_info(result([(1, 10, 5, 5), (2, 3, -1, -1)]))
    assert max_follower_lag(info) == (7, -1)


def test_replication_rows_leader_then_followers_then_observers():
    text = format_replication(quorum_info(result(list(reversed(VOTERS)), OBSERVERS)))
    lines = [line.split() for line in text.splitlines()]
    assert lines[0] == ["NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status"]
    assert lines[1] == ["1", "234134", "0", "10000", "10000", "Leader"]
    assert [row[0] for row in lines[2:]] == ["3", "2", "4"]
    assert [row[-1] for row in lines[2:]] == ["Follower", "Follower", "Observer"]
    assert lines[2][2] == "34"
    # columns line up
    assert len({line.index("\t") for line in text.splitlines()}) == 1


def test_human_readable_prints_ms_ago_and_refuses_future_timestamps():
    info = quorum_info(result(VOTERS, OBSERVERS))
    text = format_replication(info, human_readable=True, now_ms=10_500)
    assert "500 ms ago" in text.splitlines()[1] and "515 ms ago" in text.splitlines()[3]
    with pytest.raises(DescribeError, match="possible drift in system clock"):
        format_replication(info, human_readable=True, now_ms=9_000)


def test_partition_error_is_reported():
    r = result(VOTERS)
    r["topics"][0]["partitions"][0]["error"] = "NotLeaderOrFollowerError"
    with pytest.raises(DescribeError, match="NotLeaderOrFollower"):
        quorum_info(r)
