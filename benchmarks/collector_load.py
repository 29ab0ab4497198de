"""A live collector-shaped load for the job: what `quorum collect` publishes for a fleet of idle
KRaft quorums, made from the synthetic fleet model (quorum/synthetic/fleet_model.py) and
published by the raw producer in a process of its own.

Every `interval_ms` each cluster gives one `quorum_snapshot` (its leader's DescribeQuorum answer,
through the collector's own `snapshot_of`) and one `metrics` record per node (the values its JMX
exporter serves, `ClusterModel.node_values`, as the collector's `metrics_record` reads them),
stamped with the poll's time. The clusters' polls are spread over the interval, as collectors
started at different times poll. The records are made while publishing (a fleet's hour does not
fit in memory encoded), so the process's CPU is reported: a benchmark can tell it from the job's.

A voter can be cut off (`CutOff`): from its moment on, the leader's answer shows the voter where
its last fetch left it (its log end and fetch times stand still), and its exporter no longer
answers the collector, so it gives no `metrics` record.
"""
from __future__ import annotations

import multiprocessing
import time
from dataclasses import dataclass

from paced_load import LoadResult

POLL_INTERVAL_MS = 1000  # the collector's default
LATENCY_MS = 3           # the poll's round trip, as the snapshot reports it
SLICE_MS = 20            # how often the publisher wakes to publish the polls that fell due


@dataclass(frozen=True)
class CutOff:
    """Voter `replica` of cluster `cluster` (an index) cut off from the rest at `at_ms`."""
    cluster: int
    replica: int
    at_ms: int


def follower_at(model, at_ms: int) -> int:
    """A voter that follows at `at_ms`: the one a cut-off takes (a leader cut off is an election)."""
    return next(v for v in model.voter_ids if v != model.view(at_ms).leader_id)


def snapshot_record(model, now_ms: int, interval_ms: int = POLL_INTERVAL_MS, cut: CutOff | None = None):
    """The `quorum_snapshot` the collector publishes for `model`'s cluster polled at `now_ms`;
    with `cut` (from its moment), the cut-off voter as its last fetch left it."""
    from quorum.kafka_watch.collector import snapshot_of
    from quorum.kafka_watch.quorum_info import QuorumInfo, Replica
    p = model.describe_partition(now_ms)
    frozen = {}
    if cut is not None and now_ms >= cut.at_ms:
        frozen = {r.replica_id: r for r in model.describe_partition(cut.at_ms).current_voters
                  if r.replica_id == cut.replica}

    def replicas(states):
        return tuple(Replica(r.replica_id, r.log_end_offset, r.last_fetch_timestamp, r.last_caught_up_timestamp)
                     for r in (frozen.get(s.replica_id, s) for s in states))
    info = QuorumInfo(p.leader_id, p.leader_epoch, p.high_watermark, replicas(p.current_voters), replicas(p.observers))
    return snapshot_of(info, model.cluster_id, "fleet-bench", now_ms, poll_interval_ms=interval_ms,
                       latency_ms=LATENCY_MS, answered_by=p.leader_id)


def metrics_record(model, node_id: int, now_ms: int):
    """The `metrics` record the collector makes of node `node_id`'s exporter at `now_ms`: the
    same as `kafka_node_metrics.metrics_record` of its text, without parsing the text (that costs
    150 us a node, more than the job's share of a record)."""
    from quorum import events
    from quorum.kafka_watch.kafka_node_metrics import KAFKA_STATES
    v = model.node_values(node_id, now_ms)
    committed = int(v["committed"]) if v["applied"] <= v["committed"] else -1
    return events.Metrics(cluster_id=model.cluster_id, topic="__cluster_metadata", partition=0, time_ms=now_ms,
                          node_id=node_id, state=KAFKA_STATES[v["state"]], leader_id=max(int(v["leader"]), -1),
                          epoch=max(int(v["epoch"]), 0), log_end_offset=max(int(v["end"]), 0),
                          high_watermark=max(int(v["hw"]), -1), last_applied_offset=int(v["applied"]),
                          last_applied_timestamp_ms=int(v["applied_at"]), last_applied_lag_ms=int(v["lag"]),
                          last_committed_offset=committed, voter_set=tuple(sorted(model.voter_ids)))


def poll_records(model, now_ms: int, cut: CutOff | None = None) -> list:
    """One poll of one cluster: its snapshot, then each node's metrics (none from a voter cut off)."""
    gone = cut.replica if cut is not None and now_ms >= cut.at_ms else None
    return [snapshot_record(model, now_ms, cut=cut),
            *(metrics_record(model, n, now_ms) for n in model.voter_ids if n != gone)]


def _run(clusters: int, seconds: float, start_ms: int, bootstrap: str, topic: str, cut: CutOff | None,
         conn) -> None:
    from confluent_kafka import Producer

    from quorum import events
    from quorum.synthetic.publish import PRODUCER_DEFAULTS

    models = fleet_models(clusters, start_ms)
    producer = Producer({**PRODUCER_DEFAULTS, "bootstrap.servers": bootstrap})
    produce, poll = producer.produce, producer.poll
    due = [start_ms + i * POLL_INTERVAL_MS // clusters for i in range(clusters)]  # each cluster's next poll
    end_ms = start_ms + int(seconds * 1000)
    conn.send(("ready",))
    while time.time() * 1000 < start_ms:
        time.sleep(0.001)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    n, max_late, nxt = 0, 0.0, 0  # `nxt`: the cluster whose poll falls due first (they keep their order)
    while True:
        now = time.time() * 1000
        if due[nxt] >= end_ms:
            break
        if due[nxt] > now:
            time.sleep(min(SLICE_MS, due[nxt] - now) / 1000)
            continue
        max_late = max(max_late, now - due[nxt])
        while due[nxt] <= now and due[nxt] < end_ms:
            its_cut = cut if cut is not None and cut.cluster == nxt else None
            for record in poll_records(models[nxt], due[nxt], its_cut):
                while True:
                    try:
                        produce(topic, events.encode(record), events.record_key(record), timestamp=due[nxt])
                        break
                    except BufferError:
                        poll(0.01)
                n += 1
            due[nxt] += POLL_INTERVAL_MS
            nxt = (nxt + 1) % clusters
        poll(0)
    remaining = producer.flush(60)
    conn.send(("done", LoadResult(n - remaining, 0.0, time.process_time() - cpu0, time.perf_counter() - wall0,
                                  max_late, 0.0, seconds)))


def fleet_models(clusters: int, start_ms: int) -> list:
    """The load's clusters; they started some minutes before it, so their logs are not empty."""
    from quorum.synthetic.fleet_model import ClusterModel
    return [ClusterModel(i, seed=7, start_ms=start_ms - 300_000) for i in range(clusters)]


class CollectorLoad:
    """`clusters` clusters polled every second for `seconds`, from a start `lead_s` ahead; with
    `cut_off_after_s`, a follower of cluster 0 cut off that long after the start (`self.cut`)."""

    def __init__(self, clusters: int, seconds: float, bootstrap: str, topic: str, lead_s: float = 3.0,
                 cut_off_after_s: float | None = None):
        self.clusters, self.seconds = clusters, seconds
        self.start_ms = int((time.time() + lead_s) * 1000)
        self.cut = None
        if cut_off_after_s is not None:
            at_ms = self.start_ms + int(cut_off_after_s * 1000)
            self.cut = CutOff(0, follower_at(fleet_models(1, self.start_ms)[0], at_ms), at_ms)
        context = multiprocessing.get_context("spawn")
        parent, child = context.Pipe()
        self._conn = parent
        self._process = context.Process(target=_run, daemon=True,
                                        args=(clusters, seconds, self.start_ms, bootstrap, topic, self.cut, child))
        self._process.start()
        self.pid = self._process.pid

    def await_done(self) -> LoadResult:
        timeout_s = max(0.0, self.start_ms / 1000 - time.time()) + self.seconds + 120
        while True:
            if not self._conn.poll(timeout_s):
                raise RuntimeError("the collector-shaped load did not finish publishing")
            message = self._conn.recv()
            if message[0] == "done":
                self._process.join(10)
                return message[1]
