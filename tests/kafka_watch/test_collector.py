"""`quorum collect` publishes one record per DescribeQuorum poll: a quorum_snapshot when the
quorum answers, a quorum_poll_error when it does not, keyed per quorum."""
from __future__ import annotations

import argparse
import socket
import time

import pytest

from quorum import events
from quorum.cli import main
from quorum.kafka_watch import collector
from quorum.kafka_watch.brokers_poller import HEDGE_FRACTION, QuorumPoller
from quorum.kafka_watch.controller_poller import BlockingPoller
from quorum.kafka_watch.poll_outcome import PollOutcome
from quorum.kafka_watch.quorum_info import quorum_info
from quorum.local_kafka.loopback_ports import free_port
from quorum.storage.meta import directory_id
from quorum.testing.local_cluster import FAST, Cluster

pytestmark = pytest.mark.slow

V2_RESULT = {"error_code": 0, "topics": [{"topic_name": "__cluster_metadata", "partitions": [{
    "partition_index": 0, "leader_id": 2, "leader_epoch": 4, "high_watermark": 10, "error_code": 0,
    "current_voters": [{"replica_id": 2, "replica_directory_id": "4ae1bef9-f260-497a-9f1c-0bb4c4b37fbe",
                        "log_end_offset": 11, "last_fetch_timestamp": 5, "last_caught_up_timestamp": 5}],
    "observers": [{"replica_id": 7, "replica_directory_id": None, "log_end_offset": 3, "last_fetch_timestamp": -1,
                   "last_caught_up_timestamp": -1}]}]}],
    "nodes": [{"node_id": 2, "listeners": [{"name": "CONTROLLER", "host": "c-2", "port": 9093}]}]}


def test_snapshot_record_from_a_v2_answer_carries_directory_ids_and_the_poll():
    snap = collector.snapshot(V2_RESULT, "c1", "host:1", 1000, poll_interval_ms=500, latency_ms=7, answered_by=3)
    assert events.validate(snap) == snap
    assert snap.voters[0] == events.SnapshotReplica(2, 11, 5, 5, "SuG--fJgSXqfHAu0xLN_vg")
    assert snap.observers[0].directory_id == events.UNKNOWN_DIRECTORY_ID
    assert (snap.poll_interval_ms, snap.latency_ms, snap.answered_by) == (500, 7, 3)


def test_a_failed_poll_becomes_a_poll_error_record():
    outcome = PollOutcome(latency_ms=12, answered_by=3, error_code=6, error="NOT_LEADER_OR_FOLLOWER",
                                    leader_id=-1, leader_epoch=9)
    rec = collector.record_of(outcome, "c1", "host:1", 1000, interval_ms=500)
    assert events.validate(rec) == rec and isinstance(rec, events.QuorumPollError)
    assert (rec.error_code, rec.error, rec.answered_by, rec.leader_epoch, rec.latency_ms) == (
        6, "NOT_LEADER_OR_FOLLOWER", 3, 9, 12)
    assert events.record_key(rec) == b"c1/__cluster_metadata-0"


@pytest.mark.parametrize("argv,named", [
    (["--interval-ms", "1500"], ["1500", "2000", "every 1000 ms or less"]),
    (["--interval-ms", "3000", "--unreachable-after-ms", "5000"], ["3000", "5000", "every 2500 ms"]),
    (["--interval-ms", "500", "--timeout-ms", "800"], ["--timeout-ms 800", "--interval-ms 500"]),
])
def test_a_combination_that_cannot_work_is_refused_with_exit_code_2(argv, named, capsys):
    code = main(["collect", "--bootstrap-server", "127.0.0.1:1", "--events-bootstrap-server", "127.0.0.1:1", *argv])
    err = capsys.readouterr().err
    assert code == 2 and all(n in err for n in named), err


def test_defaults_are_the_jobs_and_pass_the_rule():
    from quorum.cli import build_parser
    args = build_parser().parse_args(["collect", "--bootstrap-server", "a:1", "--events-bootstrap-server", "b:1"])
    assert (args.interval_ms, args.unreachable_after_ms, args.timeout_ms) == (1000, 2000, None)
    assert collector.check_arguments(args) is None


# the collector's poller, and quorum describe's through the brokers (kafka-python's admin client)
POLLERS = {"collector": lambda bootstrap, **kw: BlockingPoller(brokers=bootstrap, **kw), "describe": QuorumPoller}


@pytest.mark.parametrize("which", POLLERS)
def test_a_refused_connection_is_named_and_bounded_by_the_timeout(which):
    port = free_port()  # nothing listens there
    poller = POLLERS[which](f"127.0.0.1:{port}", timeout_ms=800)
    try:
        outcome = poller.poll()
    finally:
        poller.close()
    assert outcome.info is None and (outcome.error_code, outcome.error) == (-1, "connection_refused")
    assert outcome.latency_ms <= 800 + 300


@pytest.mark.parametrize("which", POLLERS)
def test_a_silent_server_gives_a_timeout_within_the_timeout(which):
    with socket.socket() as s:  # accepts TCP connections, never answers
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        poller = POLLERS[which](f"127.0.0.1:{s.getsockname()[1]}", timeout_ms=500)
        start = time.monotonic()
        try:
            outcome = poller.poll()
        finally:
            poller.close()
        assert time.monotonic() - start < 1.5
    assert outcome.info is None and outcome.error == "timeout" and 0 < outcome.latency_ms < 1500


def collect(broker, topic, bootstrap, **kw) -> int:
    """`quorum collect` run in this process: its own parser's defaults, then `kw`."""
    parser = argparse.ArgumentParser()
    collector.add_arguments(parser)
    args = parser.parse_args(["--bootstrap-server", bootstrap, "--events-bootstrap-server", broker.bootstrap,
                              "--events-topic", topic, "--unreachable-after-ms", "2000"])
    return collector.run(argparse.Namespace(**{**vars(args), **kw}))


def read_keyed(bootstrap: str, topic: str, n: int, timeout_s: float = 30) -> list[tuple[bytes, events.Record]]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "t", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    out = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(out) < n and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None and not msg.error():
                out.append((msg.key(), events.decode(msg.value())))
        time.sleep(0)  # nothing more is expected; the count below says if more came
        extra = c.poll(1.0)
    finally:
        c.close()
    assert extra is None or extra.error(), "more records than polls"
    return out


def test_a_healthy_quorum_gives_one_snapshot_per_poll_with_latency_answerer_and_directory_ids(
        tmp_path, broker, topic_factory):
    topic = topic_factory(1)
    c = Cluster(tmp_path, voters=3, observers=1, settings=FAST)
    c.start()
    try:
        leader = c.wait_leader()
        follower = next(i for i in c.voter_ids if i != leader)
        assert collect(broker, topic, c.bootstrap(follower), interval_ms=1000, cluster_id=None, count=4) == 0
        got = read_keyed(broker.bootstrap, topic, 4)
        for version in (0, 1):  # older clients still get their answer, without directory ids or nodes
            old = quorum_info(c.describe_direct(leader, version))
            assert old.leader_id == leader and sorted(v.replica_id for v in old.voters) == c.voter_ids
            assert {v.directory_id for v in old.voters} == {events.UNKNOWN_DIRECTORY_ID} and old.nodes == {}
    finally:
        c.stop_all()
    assert len(got) == 4
    assert {k for k, _ in got} == {events.quorum_key("test-cluster", "__cluster_metadata", 0)}
    snaps = [r for _, r in got]
    assert all(isinstance(s, events.QuorumSnapshot) for s in snaps), snaps
    assert {s.leader_id for s in snaps} == {leader} and {s.poll_interval_ms for s in snaps} == {1000}
    assert all(0 <= s.latency_ms <= 1000 and s.answered_by in c.ids for s in snaps)
    dirs = {i: directory_id(tmp_path / f"node-{i}") for i in c.ids}
    assert len(set(dirs.values())) == 4 and events.UNKNOWN_DIRECTORY_ID not in dirs.values()
    last = snaps[-1]
    assert {v.replica_id: v.directory_id for v in last.voters + last.observers} == dirs


def test_a_quorum_without_leader_gives_one_poll_error_per_poll_naming_the_error(tmp_path, broker, topic_factory):
    topic = topic_factory(1)
    c = Cluster(tmp_path, voters=3, observers=0, settings=FAST)
    c.start()
    try:
        leader = c.wait_leader()
        survivor = next(i for i in c.voter_ids if i != leader)
        for i in c.voter_ids:
            if i != survivor:
                c.kill(i)
        epoch = c.try_status(survivor)["epoch"]
        assert collect(broker, topic, c.bootstrap(survivor), interval_ms=1000, cluster_id="test-cluster",
                       count=4) == 0
        got = [r for _, r in read_keyed(broker.bootstrap, topic, 4)]
    finally:
        c.stop_all()
    assert len(got) == 4 and all(isinstance(r, events.QuorumPollError) for r in got), got
    # the first poll also bootstraps the client: on a loaded machine it may run out of time
    assert got[0].error in ("NOT_LEADER_OR_FOLLOWER", "timeout")
    for r in got[1:]:
        assert (r.error_code, r.error, r.answered_by) == (6, "NOT_LEADER_OR_FOLLOWER", survivor), r
        assert r.leader_epoch >= epoch and r.source == c.bootstrap(survivor) and r.poll_interval_ms == 1000
    assert all(0 <= r.latency_ms <= 1000 for r in got)


@pytest.mark.parametrize("endpoint", ["http://c-1:7071/metrics", "1:http://c-1:7071/metrics", "one=http://c-1/m",
                                      "1=c-1:7071/metrics"])
def test_a_node_metrics_endpoint_not_given_as_id_equals_url_is_refused_with_exit_code_2(endpoint, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["collect", "--bootstrap-server", "a:1", "--events-bootstrap-server", "b:1", "--node-metrics", endpoint])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "NODE_ID=http://HOST:PORT/metrics" in err and endpoint in err, err


def test_node_metrics_endpoints_are_kept_by_node_id():
    from quorum.cli import build_parser
    args = build_parser().parse_args(["collect", "--bootstrap-server", "a:1", "--events-bootstrap-server", "b:1",
                                      "--node-metrics", "1=http://c-1:7071/metrics",
                                      "--node-metrics", "2=https://c-2:7071/metrics"])
    assert dict(args.node_metrics) == {1: "http://c-1:7071/metrics", 2: "https://c-2:7071/metrics"}


@pytest.mark.parametrize("which", POLLERS)
def test_a_hung_node_costs_the_poller_part_of_one_poll_and_is_asked_last_after_it(tmp_path, which):
    """The node the poller talks to is frozen (SIGSTOP: it accepts connections and answers
    nothing): the very next poll still answers, from another node, within its timeout, and the
    ones after do not wait on the frozen node at all."""
    import signal
    c = Cluster(tmp_path, voters=3, observers=0, settings=FAST)
    c.start()
    poller = None
    try:
        leader = c.wait_leader()
        c.wait_every_replica_caught_up(leader)
        followers = [i for i in c.voter_ids if i != leader]
        poller = POLLERS[which](",".join(c.bootstrap(f) for f in followers), timeout_ms=1000, want_cluster_id=False)
        first = c.wait_for(lambda: (o := poller.poll()).info is not None and o, 15, "a first answer")
        hung = first.answered_by
        assert hung in c.ids
        c.signal(hung, signal.SIGSTOP)
        try:
            outcomes = [poller.poll() for _ in range(5)]
        finally:
            c.signal(hung, signal.SIGCONT)
    finally:
        if poller is not None:
            poller.close()
        c.stop_all()
    print(f"node {hung} frozen: " + ", ".join(f"{o.answered_by} in {o.latency_ms} ms" if o.info else o.error
                                              for o in outcomes))
    # an answer from another node every time: the quorum's view, or, when the frozen node was the
    # leader, NOT_LEADER_OR_FOLLOWER while the others elect a new one (the truth of that moment)
    assert all(o.answered_by not in (hung, -1) and (o.info is not None or o.error == "NOT_LEADER_OR_FOLLOWER")
               for o in outcomes), outcomes
    assert HEDGE_FRACTION * 1000 <= outcomes[0].latency_ms < 1000
    assert all(o.latency_ms < HEDGE_FRACTION * 1000 for o in outcomes[1:]), outcomes


def test_through_the_brokers_the_controllers_an_answer_names_are_the_fallback_with_the_same_properties():
    from quorum.kafka_watch.controller_fallback import ControllerFallback, controller_endpoints
    info = quorum_info(V2_RESULT)
    assert controller_endpoints(info) == ("c-2:9093",)  # voters only: observer 7 has no controller listener
    plain = collector.brokers_poller("127.0.0.1:1", 500, {}, want_cluster_id=False)
    secured = collector.brokers_poller("127.0.0.1:1", 500, {"security_protocol": "SASL_SSL"}, want_cluster_id=False)
    try:
        assert isinstance(plain, ControllerFallback) and plain.bootstrap == "127.0.0.1:1"
        assert isinstance(secured, ControllerFallback)
        secured._learn(info)  # the controllers are asked with the brokers' client properties
        assert secured._controllers.client_config == {"security_protocol": "SASL_SSL"}
    finally:
        plain.close()
        secured.close()
