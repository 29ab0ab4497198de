"""The synthetic quorum: its records all validate, it replays from its seed, and each scripted
fault shows in the records and on the ground-truth timeline."""
import collections
import os
import random

import pytest
from confluent_kafka import Consumer, TopicPartition

from kip836_replay import Kip836Replay
from quorum import events
from quorum.synthetic import Fault, FaultSpecError, SyntheticConfig, SyntheticQuorum, demo_faults, parse_fault, publish

START = 1_700_000_000_000


def run(duration_ms, **kw):
    cfg = SyntheticConfig(start_ms=START, **kw)
    q = SyntheticQuorum(cfg)
    records = [(k, events.decode(v), t) for k, v, t in q.events_until(START + duration_ms)]
    return q, records


def kip836_last_caught_up(records, cluster, replica, until_ms):
    """The caught-up time the leader of the replica's newest fetch record up to `until_ms` reports."""
    replay, last = Kip836Replay(), -1
    for _k, r, _t in records:
        if isinstance(r, events.Fetch) and r.cluster_id == cluster and r.replica_id == replica and r.time_ms <= until_ms:
            last = replay.apply(r)[2]
    return last


def test_every_record_validates_and_is_keyed_by_its_quorum():
    seed = int(os.environ.get("SYNTH_SEED", random.randrange(1 << 30)))
    print(f"seed={seed} (replay with SYNTH_SEED={seed})")
    _q, records = run(260_000, clusters=2, voters=3, observers=2, seed=seed, append_interval_ms=50,
                      faults=tuple(demo_faults(3)))
    assert len(records) > 10_000
    assert {type(r) for _k, r, _t in records} == {events.Fetch, events.Metrics, events.StateChange}
    for key, record, t in records:
        assert key == events.record_key(record) and t == record.time_ms


def test_each_fetch_record_carries_the_leaders_kip836_view_that_its_term_replayed_gives():
    seed = int(os.environ.get("SYNTH_SEED", random.randrange(1 << 30)))
    print(f"seed={seed} (replay with SYNTH_SEED={seed})")
    _q, records = run(260_000, clusters=2, voters=3, observers=1, seed=seed, faults=tuple(demo_faults(3)))
    replay = Kip836Replay()
    checked = collections.Counter()
    for _k, r, _t in records:
        if not isinstance(r, events.Fetch):
            continue
        assert (r.replica_log_end_offset, r.last_fetch_timestamp_ms, r.last_caught_up_timestamp_ms) == \
            replay.apply(r), r
        checked[r.outcome] += 1
    assert checked["valid"] > 1000 and checked["diverging"] > 0, checked


def test_same_seed_replays_the_same_records():
    a = [v for _k, v, _t in SyntheticQuorum(SyntheticConfig(seed=5, start_ms=START, faults=tuple(demo_faults(3))))
         .events_until(START + 240_000)]
    b = [v for _k, v, _t in SyntheticQuorum(SyntheticConfig(seed=5, start_ms=START, faults=tuple(demo_faults(3))))
         .events_until(START + 240_000)]
    assert a == b


def test_healthy_idle_quorum_fetches_twice_a_second_and_every_follower_stays_caught_up():
    _q, records = run(60_000, voters=3, observers=1, seed=1)
    fetches = collections.Counter(r.replica_id for _k, r, _t in records if isinstance(r, events.Fetch))
    assert set(fetches) == {2, 3, 4}
    assert all(100 <= n <= 140 for n in fetches.values()), fetches  # ~2/s: one per NoOp
    hws = [r.high_watermark for _k, r, _t in records if isinstance(r, events.Fetch)]
    assert hws == sorted(hws) and hws[-1] - hws[0] >= 110  # a NoOp every 500 ms commits
    for replica in (2, 3, 4):
        assert START + 60_000 - kip836_last_caught_up(records, "cluster-0", replica, START + 60_000) < 1_000


def test_stalled_voter_keeps_fetching_but_its_caught_up_time_freezes():
    q, records = run(60_000, seed=2, faults=(Fault("stall", 10_000, 30_000, 0, 2),))
    during = [r for _k, r, _t in records if isinstance(r, events.Fetch) and r.replica_id == 2
              and START + 12_000 <= r.time_ms < START + 40_000]
    assert len(during) >= 20  # still fetching, about once a second
    assert all(r.fetch_offset < r.leader_log_end_offset for r in during)
    frozen = kip836_last_caught_up(records, "cluster-0", 2, START + 39_000)
    assert START + 9_000 <= frozen <= START + 10_100
    assert kip836_last_caught_up(records, "cluster-0", 2, START + 60_000) > START + 58_000  # recovered
    assert [(e.kind, e.replica_id, e.start_ms - START, e.end_ms - START) for e in q.timeline] == [
        ("stall", 2, 10_000, 40_000)]


def test_cut_off_voter_stops_fetching_loses_its_leader_and_rejoins():
    q, records = run(40_000, seed=3, faults=(Fault("cutoff", 10_000, 15_000, 0, 3),))
    fetch_times = [r.time_ms - START for _k, r, _t in records if isinstance(r, events.Fetch) and r.replica_id == 3]
    assert not [t for t in fetch_times if 10_010 <= t < 25_000]
    assert [t for t in fetch_times if t >= 25_000]
    changes = [(r.from_state, r.to_state, r.time_ms - START) for _k, r, _t in records
               if isinstance(r, events.StateChange) and r.node_id == 3]
    assert changes == [("follower", "unattached", 12_000), ("unattached", "follower", 25_000)]
    assert q.timeline[0].kind == "cutoff" and q.timeline[0].replica_id == 3


def test_partitioned_leader_is_replaced_resigns_and_truncates_when_it_rejoins():
    q, records = run(40_000, voters=3, seed=4, faults=(Fault("leader_partition", 10_000, 15_000, 0),))
    kinds = [(e.kind, e.replica_id) for e in q.timeline]
    assert kinds[0] == ("leader_partition", 1)
    election = next(e for e in q.timeline if e.kind == "election")
    assert election.replica_id != 1 and 12_000 <= election.start_ms - START <= 12_300
    resignation = next(e for e in q.timeline if e.kind == "resignation")
    assert resignation.replica_id == 1 and resignation.start_ms - START == 13_000  # 1.5 x fetch timeout
    truncation = next(e for e in q.timeline if e.kind == "truncation")
    assert truncation.replica_id == 1 and truncation.detail["records_lost"] >= 1
    # node 1 keeps reporting leadership of the old epoch until it resigns: after the election
    # (a window under a second, so one metrics record may or may not fall in it) it is a zombie
    claims = [r for _k, r, _t in records if isinstance(r, events.Metrics) and r.node_id == 1
              and r.state == "leader" and START + 10_000 < r.time_ms < resignation.start_ms]
    assert claims and all(r.epoch == election.detail["epoch"] - 1 for r in claims)
    assert not [r for _k, r, _t in records if isinstance(r, events.Metrics) and r.node_id == 1
                and r.state == "leader" and resignation.start_ms < r.time_ms]
    diverging = [r for _k, r, _t in records if isinstance(r, events.Fetch) and r.outcome == "diverging"]
    assert [r.replica_id for r in diverging] == [1]


def test_hw_stall_freezes_the_high_watermark_while_followers_stay_caught_up():
    _q, records = run(30_000, seed=5, faults=(Fault("hw_stall", 10_000, 10_000, 0),))
    during = [r for _k, r, _t in records if isinstance(r, events.Fetch) and START + 10_100 <= r.time_ms < START + 20_000]
    assert during and len({r.high_watermark for r in during}) == 1
    assert all(r.fetch_offset == r.leader_log_end_offset for r in during)
    lags = [r.last_applied_lag_ms for _k, r, _t in records if isinstance(r, events.Metrics) and r.node_id == 1
            and START + 18_000 <= r.time_ms < START + 20_000]
    assert lags and min(lags) > 7_000  # KIP-835 lag grows while nothing commits


def test_election_storm_moves_leadership_every_storm_period():
    q, records = run(30_000, seed=6, faults=(Fault("election_storm", 10_000, 9_000, 0),))
    elections = [e for e in q.timeline if e.kind == "election"]
    assert len(elections) == 6
    epochs = [e.detail["epoch"] for e in elections]
    assert epochs == list(range(epochs[0], epochs[0] + 6))
    leaders = {r.leader_id for _k, r, _t in records if isinstance(r, events.Fetch)}
    assert leaders == {1, 2, 3}


def test_split_brain_shows_two_leaders_in_one_epoch():
    _q, records = run(20_000, seed=7, faults=(Fault("split_brain", 5_000, 5_000, 0, 2),))
    claims = collections.defaultdict(set)
    for _k, r, _t in records:
        if isinstance(r, events.Metrics) and r.state == "leader":
            claims[(r.epoch, r.time_ms // 1000)].add(r.node_id)
    assert any(nodes == {1, 2} for nodes in claims.values())
    late = [r for _k, r, _t in records if isinstance(r, events.Metrics) and r.time_ms > START + 11_000]
    assert {r.node_id for r in late if r.state == "leader"} == {1}


def test_fault_specs_parse_and_bad_ones_say_what_is_wrong():
    assert parse_fault("stall@30s+20s:cluster-0/2") == Fault("stall", 30_000, 20_000, 0, 2)
    assert parse_fault("hw_stall@1m+500ms") == Fault("hw_stall", 60_000, 500, 0, None)
    with pytest.raises(FaultSpecError, match="unknown fault kind"):
        parse_fault("meltdown@1s+1s")
    with pytest.raises(FaultSpecError, match="expected KIND@START"):
        parse_fault("stall")
    with pytest.raises(FaultSpecError, match="names cluster 3"):
        SyntheticConfig(clusters=2, faults=(Fault("stall", 0, 1, 3),))


def test_published_records_reach_the_topic_complete(broker, topic_factory):
    topic = topic_factory(partitions=4)
    cfg = SyntheticConfig(clusters=4, voters=3, observers=1, seed=8, start_ms=START,
                          faults=(Fault("stall", 1_000, 5_000, 1, 2),))
    stats, timeline = publish(cfg, broker.bootstrap, topic, duration_ms=20_000, speed=0, processes=2)
    assert [(e.kind, e.cluster_id) for e in timeline] == [("stall", "cluster-1")]
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "t", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(4)])
    got, idle = [], 0
    while len(got) < stats.records and idle < 20:
        batch = consumer.consume(10_000, timeout=0.5)
        idle = 0 if batch else idle + 1
        got.extend(batch)
    consumer.close()
    assert len(got) == stats.records
    clusters = {events.decode(m.value()).cluster_id for m in got}
    assert clusters == {"cluster-0", "cluster-1", "cluster-2", "cluster-3"}
