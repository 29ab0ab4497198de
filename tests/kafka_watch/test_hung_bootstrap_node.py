"""The first bootstrap node hangs (SIGSTOP: it accepts connections and answers nothing) when an
operator runs `quorum describe` or starts `quorum collect`: the answer comes from another node of
the list within part of one timeout, and no `timeout` is reported while another node answers."""
from __future__ import annotations

import logging
import signal
import threading
import time

import pytest

from quorum.cli import main
from quorum.kafka_watch import collector
from quorum.kafka_watch.bootstrap_race import MAX_HEDGE_S
from quorum.testing.local_cluster import FAST, Cluster

from tests.kafka_watch.test_collector import collect, read_keyed

pytestmark = pytest.mark.slow

DESCRIBE_TIMEOUT_MS = 10_000  # the command's default


@pytest.fixture(scope="module")
def hung_first(tmp_path_factory):
    """A 3-voter, 1-observer quorum with a follower frozen; its nodes' addresses with the frozen
    one first. The follower is continued at the end."""
    c = Cluster(tmp_path_factory.mktemp("hung-first"), voters=3, observers=1, settings=FAST)
    c.start()
    frozen = None
    try:
        leader = c.wait_leader()
        c.wait_every_replica_caught_up(leader)
        frozen = next(i for i in c.voter_ids if i != leader)
        c.signal(frozen, signal.SIGSTOP)
        yield c, frozen, ",".join(c.bootstrap(i) for i in [frozen] + [i for i in c.ids if i != frozen])
    finally:
        if frozen is not None:
            c.signal(frozen, signal.SIGCONT)
        c.stop_all()


def describe_answered(bootstrap: str, what: str, capsys, frozen: str) -> tuple[str, float]:
    """`quorum describe` run in this process: its output, and how long it took, which it prints;
    it must answer (exit 0) with no `timeout` said."""
    capsys.readouterr()
    start = time.monotonic()
    code = main(["describe", "--bootstrap-server", bootstrap, what])
    took = time.monotonic() - start
    out, err = capsys.readouterr()
    print(f"quorum describe {what}, {frozen} frozen and listed first: {took:.2f} s")
    assert code == 0 and "timeout" not in err, err
    return out, took


@pytest.mark.parametrize("what", ["--replication", "--status"])
def test_describe_answers_from_another_node_within_part_of_its_timeout(hung_first, what, capsys):
    c, frozen, bootstrap = hung_first
    out, took = describe_answered(bootstrap, what, capsys, f"node {frozen}")
    if what == "--replication":
        assert sorted(int(line.split()[0]) for line in out.splitlines()[1:]) == c.ids, out
    else:
        assert "ClusterId:              test-cluster" in out, out
    # the frozen node costs one hedge delay at most, not the bootstrap's timeout (7.5 s before)
    assert took < MAX_HEDGE_S + 2.0 < DESCRIBE_TIMEOUT_MS / 1000 / 2


def test_a_collector_started_while_its_first_node_hangs_publishes_its_first_snapshot_within_an_interval_and_a_timeout(
        hung_first, broker, topic_factory, caplog):
    c, frozen, bootstrap = hung_first
    topic = topic_factory(1)
    interval_ms = timeout_ms = 1000
    threads_before = threading.active_count()
    with caplog.at_level(logging.INFO, logger="quorum.kafka_watch.collector"):
        assert collect(broker, topic, bootstrap, interval_ms=interval_ms, timeout_ms=timeout_ms, cluster_id=None,
                       count=3) == 0
    started_ms = next(r.created for r in caplog.records if r.getMessage().startswith("polling DescribeQuorum")) * 1000
    got = [r for _, r in read_keyed(broker.bootstrap, topic, 3)]
    first_after_ms = got[0].time_ms - started_ms
    print(f"first snapshot {first_after_ms:.0f} ms after the collector started polling, node {frozen} frozen and first")
    assert [r.TYPE for r in got] == ["quorum_snapshot"] * 3, got
    assert all(r.answered_by != frozen for r in got), got
    assert first_after_ms <= interval_ms + timeout_ms
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    # the race's losers end by their own bootstrap timeout: no thread is left behind for long
    c.wait_for(lambda: threading.active_count() <= threads_before, collector.WARM_UP_S + 5, "the race's threads ended")
