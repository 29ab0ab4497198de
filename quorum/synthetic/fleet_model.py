"""The quorum state a simulated fleet serves (simulated_fleet.py): one idle KRaft quorum of 3
combined nodes per cluster, in closed form, so that hundreds of clusters cost the fixture almost
nothing between questions.

Each cluster's state is a function of the wall clock and its seed: the leader appends a NoOp
every NOOP_INTERVAL_MS (KIP-835's metadata.max.idle.interval.ms), each follower fetches it a few
milliseconds later (a caught-up follower's fetch is parked at the leader until the next append),
and leadership moves to the next voter every `election_period_ms` (a new epoch, its leader-change
record appended). DescribeQuorum is answered as the leader would (a broker forwards it there),
and each node's own view as its JMX exporter serves it (deploy/kafka-jmx-exporter.yml's names).
The event-driven synthetic quorum (model.py) simulates every fetch instead: right for the
job's records, too costly per question to answer hundreds of clusters live.
"""
from __future__ import annotations

import random
import uuid
from dataclasses import dataclass

from quorum.raft import messages as m

NOOP_INTERVAL_MS = 500
DEFAULT_ELECTION_PERIOD_MS = 600_000
TOPIC = "__cluster_metadata"
NOT_LEADER_OR_FOLLOWER = 6
UNKNOWN_TOPIC_OR_PARTITION = 3


@dataclass(frozen=True)
class View:
    """One cluster at one instant."""
    leader_id: int
    epoch: int
    leader_end: int               # the leader's log end offset
    high_watermark: int
    last_append_ms: int           # when the leader appended its last record
    followers: dict[int, tuple[int, int]]  # follower id -> (its log end offset, its last fetch time)


class ClusterModel:
    """One simulated cluster: its id, its 3 voters, its state at any instant."""

    def __init__(self, index: int, seed: int, start_ms: int, election_period_ms: int = DEFAULT_ELECTION_PERIOD_MS):
        rng = random.Random(f"fleet/{seed}/{index}")
        self.index = index
        self.cluster_id = f"fleet-{index:04d}"
        self.voter_ids = (1, 2, 3)
        self.start_ms = start_ms
        self.election_period_ms = election_period_ms
        self._base_offset = rng.randint(1_000, 100_000)
        self._base_epoch = rng.randint(1, 30)
        self._first_leader = rng.randrange(3)
        self._phase_ms = rng.randrange(election_period_ms)
        self._fetch_delay_ms = {v: rng.randint(1, 6) for v in self.voter_ids}
        self.directory_ids = {v: uuid.UUID(int=rng.getrandbits(128)) for v in self.voter_ids}

    def view(self, now_ms: int) -> View:
        elapsed = max(0, now_ms - self.start_ms)
        term = (elapsed + self._phase_ms) // self.election_period_ms
        leader = self.voter_ids[(self._first_leader + term) % len(self.voter_ids)]
        appends = elapsed // NOOP_INTERVAL_MS
        last_append = self.start_ms + appends * NOOP_INTERVAL_MS
        end = self._base_offset + appends + term + 1
        followers = {}
        for v in self.voter_ids:
            if v == leader:
                continue
            fetched = last_append + self._fetch_delay_ms[v]
            if fetched <= now_ms:  # it fetched the last append
                followers[v] = (end, fetched)
            else:                  # its fetch of it is on its way: it has the one before
                followers[v] = (end - 1, fetched - NOOP_INTERVAL_MS)
        hw = max(offset for offset, _ in followers.values())  # the leader and its fastest follower
        return View(leader, self._base_epoch + term, end, hw, last_append, followers)

    def describe_partition(self, now_ms: int) -> m.DescribeQuorumPartitionResponse:
        """The leader's DescribeQuorum answer for the metadata partition (KIP-836's fields)."""
        v = self.view(now_ms)
        def state(r: int) -> m.DescribeQuorumReplica:
            if r == v.leader_id:  # the leader reports itself with `now` for both timestamps
                return m.DescribeQuorumReplica(r, v.leader_end, now_ms, now_ms)
            offset, fetched = v.followers[r]
            return m.DescribeQuorumReplica(r, offset, fetched, fetched)  # each fetch reaches the leader's end
        voters = tuple(state(r) for r in self.voter_ids)
        return m.DescribeQuorumPartitionResponse(0, 0, v.leader_id, v.epoch, v.high_watermark, voters, ())

    def node_values(self, node_id: int, now_ms: int) -> dict[str, float | str]:
        """Node `node_id`'s own view at `now_ms`: the values its JMX exporter serves (`exporter_text`)."""
        v = self.view(now_ms)
        if node_id == v.leader_id:
            state, end, fetched = "leader", v.leader_end, now_ms
        else:
            state, (end, fetched) = "follower", v.followers[node_id]
        hw = min(v.high_watermark, end)  # a follower learns the high watermark with its fetch
        applied_at = v.last_append_ms if end == v.leader_end else v.last_append_ms - NOOP_INTERVAL_MS
        return dict(state=state, epoch=float(v.epoch), leader=float(v.leader_id), end=float(end),
                    hw=float(hw), applied=float(hw - 1), applied_at=float(applied_at),
                    lag=float(max(0, now_ms - applied_at)), committed=float(hw - 1),
                    fetch_rate=2.0 if state == "follower" else 0.0, scrape_s=0.001 + (fetched % 7) / 1000)

    def exporter_text(self, node_id: int, now_ms: int) -> str:
        """Node `node_id`'s own view, as its JMX exporter serves it with the project's rules."""
        return EXPORTER_TEXT.format(**self.node_values(node_id, now_ms))


def describe_response(cluster: ClusterModel, wanted: m.DescribeQuorumRequest, now_ms: int) -> m.DescribeQuorumResponse:
    """The answer to each partition asked: the quorum's for the metadata partition, an error for
    any other (as cluster_info answers it)."""
    topics = []
    for t in wanted.topics:
        parts = tuple(cluster.describe_partition(now_ms) if t.topic_name == TOPIC and p.partition_index == 0
                      else m.DescribeQuorumPartitionResponse(p.partition_index, UNKNOWN_TOPIC_OR_PARTITION, -1, -1,
                                                             -1, (), (), "unknown topic or partition")
                      for p in t.partitions)
        topics.append(m.DescribeQuorumTopicResponse(t.topic_name, parts))
    return m.DescribeQuorumResponse(0, tuple(topics))


# What the JMX exporter agent serves with deploy/kafka-jmx-exporter.yml on a controller (its
# format: HELP and TYPE lines, values as Java prints doubles), plus the agent's own series.
EXPORTER_TEXT = """\
# HELP jmx_scrape_duration_seconds Time this JMX scrape took, in seconds.
# TYPE jmx_scrape_duration_seconds gauge
jmx_scrape_duration_seconds {scrape_s}
# HELP jmx_scrape_error Non-zero if this scrape failed.
# TYPE jmx_scrape_error gauge
jmx_scrape_error 0.0
# HELP kafka_server_raft_metrics_current_state raft-metrics current-state
# TYPE kafka_server_raft_metrics_current_state gauge
kafka_server_raft_metrics_current_state{{state="{state}"}} 1.0
# HELP kafka_server_raft_metrics_current_leader The current quorum leader's id; -1 indicates unknown
# TYPE kafka_server_raft_metrics_current_leader gauge
kafka_server_raft_metrics_current_leader {leader}
# HELP kafka_server_raft_metrics_current_epoch The current quorum epoch.
# TYPE kafka_server_raft_metrics_current_epoch gauge
kafka_server_raft_metrics_current_epoch {epoch}
# HELP kafka_server_raft_metrics_current_vote The current voted leader's id; -1 indicates not voted for anyone
# TYPE kafka_server_raft_metrics_current_vote gauge
kafka_server_raft_metrics_current_vote -1.0
# HELP kafka_server_raft_metrics_log_end_offset The current raft log end offset.
# TYPE kafka_server_raft_metrics_log_end_offset gauge
kafka_server_raft_metrics_log_end_offset {end}
# HELP kafka_server_raft_metrics_log_end_epoch The current raft log end epoch.
# TYPE kafka_server_raft_metrics_log_end_epoch gauge
kafka_server_raft_metrics_log_end_epoch {epoch}
# HELP kafka_server_raft_metrics_high_watermark The high watermark maintained on this member; -1 if it is unknown
# TYPE kafka_server_raft_metrics_high_watermark gauge
kafka_server_raft_metrics_high_watermark {hw}
# HELP kafka_server_raft_metrics_commit_latency_avg The average time in milliseconds to commit an entry in the raft log.
# TYPE kafka_server_raft_metrics_commit_latency_avg gauge
kafka_server_raft_metrics_commit_latency_avg NaN
# HELP kafka_server_raft_metrics_fetch_records_rate The average number of records fetched from the leader of the raft quorum.
# TYPE kafka_server_raft_metrics_fetch_records_rate gauge
kafka_server_raft_metrics_fetch_records_rate {fetch_rate}
# HELP kafka_server_raft_metrics_number_unknown_voter_connections Number of unknown voters whose connection information is not cached.
# TYPE kafka_server_raft_metrics_number_unknown_voter_connections gauge
kafka_server_raft_metrics_number_unknown_voter_connections 0.0
# HELP kafka_controller_kafkacontroller_value Attribute exposed for management kafka.controller:name=LastAppliedRecordOffset,type=KafkaController,attribute=Value
# TYPE kafka_controller_kafkacontroller_value gauge
kafka_controller_kafkacontroller_value{{name="LastAppliedRecordOffset"}} {applied}
kafka_controller_kafkacontroller_value{{name="LastAppliedRecordTimestamp"}} {applied_at}
kafka_controller_kafkacontroller_value{{name="LastAppliedRecordLagMs"}} {lag}
kafka_controller_kafkacontroller_value{{name="LastCommittedRecordOffset"}} {committed}
"""
