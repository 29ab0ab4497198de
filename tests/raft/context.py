"""A test context for one RaftNode (Kafka's RaftClientTestContext shape): build a node in a
given state, deliver requests and responses, and look at what it sent."""
from __future__ import annotations

import random

from quorum import contract_records
from quorum.raft import messages as m
from quorum.raft.config import DEFAULT_TOPIC, RaftConfig
from quorum.raft.log import DATA, LogRecord, MemoryLog
from quorum.raft.node import RaftNode
from quorum.raft.output import Output
from quorum.raft.quorum_state_store import ElectionState, MemoryQuorumStateStore

CLUSTER = "test-cluster"
T = DEFAULT_TOPIC


class Ctx:
    def __init__(self, node_id: int = 0, voters=(0, 1, 2), stored: ElectionState | None = None,
                 log_epochs=(), config: RaftConfig | None = None, seed: int = 0, now: int = 0,
                 may_vote: bool = True) -> None:
        self.log = MemoryLog()
        self.log.append([LogRecord(i, e, b"r%d" % i, 0, DATA) for i, e in enumerate(log_epochs)])
        self.log.flush()
        self.store = MemoryQuorumStateStore(stored)
        self.now = now
        self.config = config or RaftConfig()
        self.node = RaftNode(node_id, voters, self.log, self.store, random.Random(seed), now, self.config,
                             cluster_id=CLUSTER, may_vote=may_vote)
        self.id = node_id
        self.voters = tuple(voters)
        self.out = Output()
        self.corr = 1000

    # --- driving ---

    def deliver(self, source: int, body, correlation_id: int | None = None) -> Output:
        if correlation_id is None:
            self.corr += 1
            correlation_id = self.corr
        self.out = self.node.handle(m.Message(source, self.id, correlation_id, body), self.now)
        if self.out.flush_log:
            self.log.flush()
        return self.out

    def tick(self, advance: int = 0) -> Output:
        self.now += advance
        self.out = self.node.tick(self.now)
        if self.out.flush_log:
            self.log.flush()
        return self.out

    def tick_until(self, predicate, limit_ms: int = 60_000) -> None:
        """Advance to successive deadlines until predicate(out) holds."""
        end = self.now + limit_ms
        while self.now <= end:
            self.now = max(self.now, self.node.next_deadline())
            self.tick()
            if predicate(self.out):
                return
        raise AssertionError("condition not reached")

    def sent(self, body_type, out: Output | None = None) -> list[m.Message]:
        out = out or self.out
        return [x for x in out.messages if isinstance(x.body, body_type)]

    def records(self, out: Output | None = None) -> list:
        """The event contract's records of an output's observations, as the node publishes them."""
        return contract_records.records(self.node, (out or self.out).observations)

    def answer(self, request: m.Message, body) -> Output:
        """Deliver `body` as the response to `request` sent by this node."""
        return self.deliver(request.destination, body, request.correlation_id)

    # --- reaching a state ---

    def become_leader(self) -> None:
        """Run an election (pre-vote and vote) that every other voter grants."""
        self.tick_until(lambda out: bool(self.sent(m.VoteRequest, out)) or self.node.is_leader)
        reqs = self.sent(m.VoteRequest)
        while reqs and not self.node.is_leader:
            req, reqs = reqs[0], reqs[1:]
            part = req.body.topics[0].partitions[0]
            out = self.answer(req, vote_response(True, -1, self.node.epoch if part.pre_vote else part.candidate_epoch))
            reqs = self.sent(m.VoteRequest, out) or reqs
        assert self.node.is_leader, self.node.state

    def fetch_from(self, replica: int, offset: int, last_epoch: int, epoch: int | None = None,
                   max_wait_ms: int = 0) -> Output:
        return self.deliver(replica, fetch_request(epoch if epoch is not None else self.node.epoch,
                                                   offset, last_epoch, replica, max_wait_ms))


# --- message builders ---

def vote_request(candidate: int, epoch: int, last_epoch: int, last_offset: int, pre_vote: bool = False,
                 cluster_id: str | None = CLUSTER) -> m.VoteRequest:
    return m.VoteRequest(cluster_id, (m.VoteTopicRequest(T, (m.VotePartitionRequest(
        0, epoch, candidate, last_epoch, last_offset, pre_vote),)),))


def vote_response(granted: bool, leader: int, epoch: int, error: int = 0) -> m.VoteResponse:
    return m.VoteResponse(0, (m.VoteTopicResponse(T, (m.VotePartitionResponse(0, error, leader, epoch, granted),)),))


def begin_request(leader: int, epoch: int, cluster_id: str | None = CLUSTER) -> m.BeginQuorumEpochRequest:
    return m.BeginQuorumEpochRequest(cluster_id, (m.BeginQuorumEpochTopicRequest(
        T, (m.BeginQuorumEpochPartitionRequest(0, leader, epoch),)),))


def epoch_response(cls, leader: int, epoch: int, error: int = 0):
    return cls(0, (m.EpochTopicResponse(T, (m.EpochPartitionResponse(0, error, leader, epoch),)),))


def end_request(leader: int, epoch: int, successors, cluster_id: str | None = CLUSTER) -> m.EndQuorumEpochRequest:
    return m.EndQuorumEpochRequest(cluster_id, (m.EndQuorumEpochTopicRequest(
        T, (m.EndQuorumEpochPartitionRequest(0, leader, epoch, tuple(successors)),)),))


def fetch_request(epoch: int, offset: int, last_epoch: int, replica: int, max_wait_ms: int = 0,
                  cluster_id: str | None = CLUSTER) -> m.FetchRequest:
    return m.FetchRequest(cluster_id, replica, max_wait_ms, (m.FetchTopic(T, (m.FetchPartition(
        0, epoch, offset, last_epoch),)),))


def fetch_response(leader: int, epoch: int, hw: int, records=(), diverging=None, error: int = 0) -> m.FetchResponse:
    return m.FetchResponse(0, (m.FetchableTopicResponse(T, (m.FetchPartitionData(
        0, error, hw, m.LeaderIdAndEpoch(leader, epoch), diverging, tuple(records)),)),))


def describe_request() -> m.DescribeQuorumRequest:
    return m.DescribeQuorumRequest((m.DescribeQuorumTopicRequest(T, (m.DescribeQuorumPartitionRequest(0),)),))


def only_partition(body):
    """The single partition answer inside a batched response."""
    topics = getattr(body, "topics", None)
    if topics is None:
        topics = body.responses
    (topic,) = topics
    (part,) = topic.partitions
    return part


def records(start: int, epochs, kind: str = DATA) -> tuple[LogRecord, ...]:
    return tuple(LogRecord(start + i, e, b"x%d" % (start + i), 0, kind) for i, e in enumerate(epochs))
