"""The describe tool's text, from a describe_metadata_quorum() result (facts file:
kafka-metadata-quorum describe)."""
from __future__ import annotations

import pytest

from quorum.events import UNKNOWN_DIRECTORY_ID
from quorum.kafka_watch.describe_tool import format_replication, format_status, max_follower_lag
from quorum.kafka_watch.quorum_info import DescribeError, quorum_info


def result(voters, observers=(), leader=1, directory_ids=None, nodes=()):
    """A describe_metadata_quorum() result; `directory_ids` (replica -> dashed UUID, as
    kafka-python gives it) and `nodes` make it a v2 answer."""
    def rs(t):
        r = {"replica_id": t[0], "log_end_offset": t[1], "last_fetch_timestamp": t[2],
             "last_caught_up_timestamp": t[3]}
        if directory_ids is not None:
            r["replica_directory_id"] = directory_ids.get(t[0])
        return r
    return {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{
        "partition_index": 0, "leader_id": leader, "leader_epoch": 15, "high_watermark": 234130,
        "current_voters": [rs(v) for v in voters], "observers": [rs(o) for o in observers], "error": None}]}],
        "nodes": [{"node_id": i, "listeners": [{"name": name, "host": host, "port": port}
                                               for name, host, port in listeners]} for i, listeners in nodes]}


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
        'CurrentVoters:          [{"id": 1}, {"id": 2}, {"id": 3}]',
        'CurrentObservers:       [{"id": 4}]',
    ]


# Kafka prints a Uuid as base64url of its 16 bytes: these are the same ids in both forms.
DIR_1 = ("4ae1bef9-f260-497a-9f1c-0bb4c4b37fbe", "SuG--fJgSXqfHAu0xLN_vg")
DIR_4 = ("00000000-0000-0000-0000-000000000007", "AAAAAAAAAAAAAAAAAAAABw")
V2 = result(VOTERS, OBSERVERS, directory_ids={1: DIR_1[0], 2: "00000000-0000-0000-0000-000000000000", 4: DIR_4[0]},
            nodes=[(1, [("CONTROLLER", "c-1", 9093)]), (2, [("CONTROLLER", "c-2", 9093), ("SSL", "::1", 9094)]),
                   (3, [])])


def test_v2_status_prints_directory_ids_and_endpoints_as_kafka_4_does():
    status = dict(line.split(":", 1) for line in format_status("X", quorum_info(V2)).splitlines())
    assert status["CurrentVoters"].strip() == (
        '[{"id": 1, "directoryId": "SuG--fJgSXqfHAu0xLN_vg", "endpoints": ["CONTROLLER://c-1:9093"]}, '
        '{"id": 2, "endpoints": ["CONTROLLER://c-2:9093", "SSL://[::1]:9094"]}, {"id": 3}]')
    assert status["CurrentObservers"].strip() == '[{"id": 4, "directoryId": "AAAAAAAAAAAAAAAAAAAABw"}]'


def test_v2_replication_has_a_directory_id_column_after_the_node_id():
    lines = [line.split() for line in format_replication(quorum_info(V2)).splitlines()]
    assert lines[0][:3] == ["NodeId", "DirectoryId", "LogEndOffset"]
    assert {row[0]: row[1] for row in lines[1:]} == {"1": DIR_1[1], "2": UNKNOWN_DIRECTORY_ID,
                                                     "3": UNKNOWN_DIRECTORY_ID, "4": DIR_4[1]}


def test_a_v0_or_v1_answer_has_unknown_directory_ids_and_no_endpoints():
    info = quorum_info(result(VOTERS, OBSERVERS))
    assert {r.directory_id for r in info.voters + info.observers} == {UNKNOWN_DIRECTORY_ID} and info.nodes == {}


def test_max_follower_lag_time_is_zero_when_the_laggiest_is_the_leader():
    info = quorum_info(result([(1, 10, 5, 5), (2, 10, 4, 4)]))
    assert max_follower_lag(info) == (0, 0)


def test_max_follower_lag_time_is_unknown_when_a_timestamp_is_unknown():
    info = quorum_info(result([(1, 10, 5, 5), (2, 3, -1, -1)]))
    assert max_follower_lag(info) == (7, -1)


def test_replication_rows_leader_then_followers_then_observers():
    text = format_replication(quorum_info(result(list(reversed(VOTERS)), OBSERVERS)))
    lines = [line.split() for line in text.splitlines()]
    assert lines[0] == ["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp",
                        "Status"]
    assert lines[1] == ["1", UNKNOWN_DIRECTORY_ID, "234134", "0", "10000", "10000", "Leader"]
    assert [row[0] for row in lines[2:]] == ["3", "2", "4"]
    assert [row[-1] for row in lines[2:]] == ["Follower", "Follower", "Observer"]
    assert lines[2][3] == "34"
    # columns line up
    assert len({line.index("\t") for line in text.splitlines()}) == 1


def test_human_readable_prints_ms_ago_and_refuses_future_timestamps():
    info = quorum_info(result(VOTERS, OBSERVERS))
    text = format_replication(info, human_readable=True, now_ms=10_500)
    assert "500 ms ago" in text.splitlines()[1] and "515 ms ago" in text.splitlines()[3]
    unknown = quorum_info(result([(1, 10, 5, 5), (2, 3, -1, -1)]))
    assert format_replication(unknown, human_readable=True, now_ms=10).splitlines()[2].split()[4:6] == ["-1", "-1"]
    with pytest.raises(DescribeError, match="possible drift in system clock"):
        format_replication(info, human_readable=True, now_ms=9_000)


def test_partition_error_is_reported():
    r = result(VOTERS)
    r["topics"][0]["partitions"][0]["error"] = "NotLeaderOrFollowerError"
    with pytest.raises(DescribeError, match="NotLeaderOrFollower"):
        quorum_info(r)


def test_a_raw_error_answer_gives_kafkas_error_name_and_the_leader_it_names():
    r = result(VOTERS)
    p = r["topics"][0]["partitions"][0]
    p.update(error_code=6, error_message="this node is not the leader", leader_id=-1, leader_epoch=9)
    del p["error"]
    with pytest.raises(DescribeError, match="NOT_LEADER_OR_FOLLOWER") as info:
        quorum_info(r)
    assert (info.value.error_code, info.value.error, info.value.leader_id, info.value.leader_epoch) == (
        6, "NOT_LEADER_OR_FOLLOWER", -1, 9)
    with pytest.raises(DescribeError) as info:
        quorum_info({"error_code": 31, "error_message": None, "topics": []})
    assert (info.value.error_code, info.value.error) == (31, "CLUSTER_AUTHORIZATION_FAILED")
