"""The simulated fleet (the fleet collector's load fixture) as the collector's own pieces see it:
the brokers' and the controllers' pollers and the node-metrics reader get valid, advancing
records of the event contract from a simulated cluster; a hung cluster gives the collector's
`timeout` within its timeout while its neighbour answers, and answers again once un-hung; the
`python -m` entry is driven by its stdin; /metrics keeps its connections alive."""
from __future__ import annotations

import asyncio
import http.client
import json
import resource
import subprocess
import sys
import time

import pytest

from quorum import events
from quorum.kafka_client.wire_connection import PeerConnection
from quorum.kafka_watch import collector
from quorum.kafka_watch.controller_poller import ControllerQuorumPoller
from quorum.kafka_watch.fleet_file import WatchedCluster
from quorum.kafka_watch.quorum_info import answer_fields, quorum_info
from quorum.synthetic.simulated_fleet import FleetThread, raise_open_files_limit
from quorum.wire import apis as w

TIMEOUT_MS = 600


@pytest.fixture(scope="module")
def fleet():
    with FleetThread(3, seed=7) as f:
        yield f


def collection(cluster: dict) -> collector.Collection:
    """The collector's round for one simulated cluster, as `quorum collect --node-metrics` builds it."""
    metrics = tuple(sorted((int(n), url) for n, url in cluster["node_metrics"].items()))
    c = collector.Collection(WatchedCluster(None, cluster["bootstrap"], None, 1000, TIMEOUT_MS, node_metrics=metrics))
    c.warm_up()
    return c


def through_the_contract(records: list) -> list:
    decoded = [events.decode(events.encode(r)) for r in records]
    assert decoded == records
    return decoded


def test_the_collector_gets_a_snapshot_and_every_nodes_view_and_the_log_advances(fleet):
    cluster = fleet.endpoints()[0]
    c = collection(cluster)
    try:
        assert c.cluster_id == cluster["cluster_id"]
        first = through_the_contract(c.poll().records)
        snap, views = first[0], first[1:]
        assert isinstance(snap, events.QuorumSnapshot) and snap.cluster_id == cluster["cluster_id"]
        assert sorted(v.replica_id for v in snap.voters) == [1, 2, 3] and snap.leader_id in (1, 2, 3)
        assert all(v.directory_id != events.UNKNOWN_DIRECTORY_ID for v in snap.voters)
        assert sorted(m.node_id for m in views) == [1, 2, 3]
        assert [m.node_id for m in views if m.state == "leader"] == [snap.leader_id]
        assert {(m.leader_id, m.epoch) for m in views} == {(snap.leader_id, snap.leader_epoch)}
        deadline = time.monotonic() + 3  # the leader appends a NoOp every 500 ms
        later = snap
        while later.high_watermark <= snap.high_watermark and time.monotonic() < deadline:
            later = through_the_contract(c.poll().records)[0]
        assert later.high_watermark > snap.high_watermark
    finally:
        c.close()


def test_the_controllers_path_agrees_v2_and_learns_every_node(fleet):
    cluster = fleet.endpoints()[1]
    poller = ControllerQuorumPoller(cluster["bootstrap"], timeout_ms=TIMEOUT_MS)
    try:
        assert poller.warm_up(5) == cluster["cluster_id"]
        outcome = poller.poll()
    finally:
        poller.close()
    assert outcome.info is not None, outcome
    ports = sorted(int(e.rpartition(":")[2]) for e in cluster["bootstrap"].split(","))
    assert sorted(e[0].port for e in outcome.info.nodes.values()) == ports


def test_describe_quorum_is_answered_in_v0_v1_and_v2(fleet):
    host, _, port = fleet.endpoints()[1]["bootstrap"].split(",")[0].rpartition(":")

    async def ask(version: int):
        conn = PeerConnection(-1, host, int(port), "test", 1 << 20)
        cls = w.SUPPORTED[w.DESCRIBE_QUORUM].request
        body = cls(topics=[cls.TopicData(topic_name="__cluster_metadata",
                                         partitions=[cls.TopicData.PartitionData(partition_index=0)])])
        try:
            answer = await conn.request(w.DESCRIBE_QUORUM, version, body, 2)
            assert quorum_info(answer_fields(answer)) == quorum_info(answer.to_dict())  # the collector's reading
            return quorum_info(answer.to_dict())
        finally:
            conn.close()
    answers = {v: asyncio.run(ask(v)) for v in (0, 1, 2)}
    assert {len(a.voters) for a in answers.values()} == {3}
    assert answers[0].nodes == {} and len(answers[2].nodes) == 3


def test_a_hung_cluster_times_out_within_the_timeout_and_answers_again_once_woken(fleet):
    hung, neighbour = fleet.endpoints()[2], fleet.endpoints()[0]
    c, other = collection(hung), collection(neighbour)
    try:
        assert isinstance(c.poll().records[0], events.QuorumSnapshot)
        fleet.hang(2)
        start = time.monotonic()
        result = c.poll()
        took = time.monotonic() - start
        assert result.outcome.error == "timeout" and took < TIMEOUT_MS / 1000 + 0.3, (result.outcome, took)
        error = through_the_contract(result.records)[0]
        assert isinstance(error, events.QuorumPollError) and error.error == "timeout"
        assert set(result.silent_nodes) == {1, 2, 3}  # no node's view either
        assert isinstance(other.poll().records[0], events.QuorumSnapshot)
        fleet.unhang(2)
        deadline, answered = time.monotonic() + 10, None
        while answered is None and time.monotonic() < deadline:
            result = c.poll()
            answered = result.records[0] if result.outcome.info is not None else None
        assert isinstance(answered, events.QuorumSnapshot), result.outcome
    finally:
        fleet.unhang(2)
        c.close()
        other.close()


def test_the_controllers_path_times_out_on_a_hung_cluster(fleet):
    cluster = fleet.endpoints()[1]
    poller = ControllerQuorumPoller(cluster["bootstrap"], timeout_ms=TIMEOUT_MS)
    try:
        poller.warm_up(5)
        fleet.hang(1)
        start = time.monotonic()
        outcome = poller.poll()
        assert outcome.error == "timeout" and time.monotonic() - start < TIMEOUT_MS / 1000 + 0.6, outcome
        fleet.unhang(1)
        assert poller.poll().info is not None  # the held answers went out; the connections still serve
    finally:
        fleet.unhang(1)
        poller.close()


def test_metrics_connections_are_kept_alive_and_only_metrics_is_served(fleet):
    url = fleet.endpoints()[0]["node_metrics"]["1"]
    host, port = url.split("/")[2].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=2)
    try:
        conn.request("GET", "/metrics")
        first = conn.getresponse()
        assert first.status == 200 and b"kafka_server_raft_metrics_current_state" in first.read()
        sock = conn.sock
        conn.request("GET", "/other")
        second = conn.getresponse()
        assert second.status == 404 and second.read() == b"" and conn.sock is sock
    finally:
        conn.close()


def test_the_command_line_fixture_hangs_and_wakes_clusters_on_its_stdin():
    fixture = subprocess.Popen([sys.executable, "-m", "quorum.synthetic.simulated_fleet", "--clusters", "2"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        ready = json.loads(fixture.stdout.readline())
        assert [c["cluster_id"] for c in ready["clusters"]] == ["fleet-0000", "fleet-0001"]

        def say(line: str) -> dict:
            fixture.stdin.write(line + "\n")
            fixture.stdin.flush()
            return json.loads(fixture.stdout.readline())
        assert say("hang 1")["hung"] == [1]
        assert say("hang all")["hung"] == [0, 1]
        assert say("unhang 0 1")["hung"] == []
        assert "error" in say("hang 5") and "error" in say("freeze 0")
        fixture.stdin.close()
        assert fixture.wait(timeout=10) == 0
    finally:
        if fixture.poll() is None:
            fixture.kill()
            fixture.wait()


def test_the_open_files_limit_is_raised_to_fit_the_fleet():
    limit = raise_open_files_limit(500)
    assert limit >= 500 * 3 * 2 and resource.getrlimit(resource.RLIMIT_NOFILE)[0] == limit
