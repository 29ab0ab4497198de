"""The Raft core: one deterministic state machine per quorum member (KIP-595 with KIP-996
pre-vote, KIP-835 and KIP-836).

Entry points, each taking `now` (milliseconds, any monotonic origin) and returning one
`Output` (see output.py for what the caller must do with it and in which order):
    handle(message, now)   a request or response addressed to this node
    tick(now)              timers; call it at `next_deadline()` (calling earlier is harmless)
    append(values, now)    leader only: append data records, returns their offsets
    resign(now)            graceful shutdown: a leader hands over with EndQuorumEpoch
The core does no I/O of its own: it reads and writes through the `ReplicatedLog` and
`QuorumStateStore` ports and draws election jitter from the `random.Random` it is given.

`RaftNode` composes the parts and routes each call to them. Each part is given what it reads
and changes when it is made: who the node is (identity.py), its state and high watermark
(node_state.py), the call being handled with its Output (step.py), the messages it sends and
the requests it awaits (outbox.py), the log, the store, the config and the random source.
The parts:
    transitions.py      the moves between epoch states and what each starts with
    vote.py             Vote: a campaign's requests, the answers to requests, the counting
    quorum_epoch.py     BeginQuorumEpoch and EndQuorumEpoch
    fetch_follower.py   this node's own fetches and what their answers change
    fetch_leader.py     the answer to a fetch, served by the leader
    fetch_answers.py    how a fetch answer is built and reported; held fetches
    leader_appends.py   the leader's appends and the high watermark
    timers.py           what each state does on a tick, and when the next one is due
    status.py           DescribeQuorum and the raft metrics
"""
from __future__ import annotations

import random
from typing import Sequence

from quorum.raft.config import DEFAULT_TOPIC, RaftConfig
from quorum.raft.epoch_states import EpochState
from quorum.raft.errors import NotLeaderError
from quorum.raft.fetch_answers import FetchAnswers
from quorum.raft.fetch_follower import FetchResponseHandler, FollowerFetches
from quorum.raft.fetch_leader import FetchRequestHandler
from quorum.raft.identity import NodeIdentity
from quorum.raft.leader_appends import LeaderAppends
from quorum.raft.leader_state import LeaderState
from quorum.raft.log import DATA, ReplicatedLog
from quorum.raft.messages import (BeginQuorumEpochRequest, BeginQuorumEpochResponse,
                                  DescribeQuorumPartitionResponse, DescribeQuorumRequest, DescribeQuorumResponse,
                                  EndQuorumEpochRequest, EndQuorumEpochResponse, FetchRequest, FetchResponse,
                                  Message, VoteRequest, VoteResponse)
from quorum.raft.metrics import MetricsTracker, RaftMetrics
from quorum.raft.node_state import NodeState
from quorum.raft.outbox import Outbox
from quorum.raft.output import Output
from quorum.raft.quorum_epoch import EpochAnnouncements, QuorumEpochHandler
from quorum.raft.quorum_state_store import QuorumStateStore
from quorum.raft.status import NodeStatus
from quorum.raft.step import Step
from quorum.raft.timers import StateTimers
from quorum.raft.transitions import Transitions, initial_state
from quorum.raft.vote import VoteHandler, VoteRequests


class RaftNode:
    """One quorum member's Raft state machine (see the module's documentation)."""

    def __init__(self, node_id: int, voters: Sequence[int], log: ReplicatedLog, store: QuorumStateStore,
                 rng: random.Random, now: int, config: RaftConfig = RaftConfig(),
                 cluster_id: str = "quorum", topic: str = DEFAULT_TOPIC, partition: int = 0,
                 may_vote: bool = True) -> None:
        """`may_vote=False` is for a voter that lost its disk: it cannot know which epochs it
        voted in, so it only follows (the directory id of KIP-853 solves this in Kafka)."""
        if not voters:
            raise ValueError("the voter set is empty")
        voters = tuple(sorted(set(voters)))
        me = NodeIdentity(node_id, voters, node_id in voters and may_vote, cluster_id, topic, partition)
        self.identity = me
        self.node_id, self.voters, self.is_voter = node_id, voters, me.is_voter
        self.cluster_id, self.topic, self.partition = cluster_id, topic, partition
        self.log = log
        self.store = store
        self.config = config
        first_correlation_id = rng.randrange(1 << 30)   # drawn before the first election deadline
        self._node = node = NodeState(initial_state(me, config, rng, store.read(), now))
        self._step = step = Step(now)
        self._next_metrics_ms = now
        metrics = MetricsTracker()
        outbox = Outbox(node_id, config, node, step, first_correlation_id)
        answers = FetchAnswers(me, config, log, node, step, outbox)
        appends = LeaderAppends(log, node, step, metrics, answers)
        fetches = FollowerFetches(me, config, rng, log, step, outbox)
        announcements = EpochAnnouncements(me, step, outbox)
        transitions = Transitions(me, config, rng, log, store, node, step, outbox, metrics,
                                  VoteRequests(me, log, outbox), fetches, announcements, appends, answers)
        self._appends = appends
        self._transitions = transitions
        self._timers = StateTimers(me, config, node, step, outbox, transitions, fetches, announcements,
                                   appends, answers)
        self._status = NodeStatus(me, config, log, node, step, outbox, metrics)
        vote = VoteHandler(me, config, rng, log, node, step, outbox, transitions)
        epochs = QuorumEpochHandler(me, config, node, step, outbox, transitions, self._timers)
        fetch_responses = FetchResponseHandler(me, config, log, node, step, outbox, metrics, fetches, transitions)
        fetch_requests = FetchRequestHandler(me, config, log, node, step, answers, appends)
        self._handlers = {
            VoteRequest: vote.handle_request, VoteResponse: vote.handle_response,
            BeginQuorumEpochRequest: epochs.handle_begin_request,
            BeginQuorumEpochResponse: epochs.handle_begin_response,
            EndQuorumEpochRequest: epochs.handle_end_request, EndQuorumEpochResponse: epochs.handle_end_response,
            FetchRequest: fetch_requests.handle_request, FetchResponse: fetch_responses.handle_response,
            DescribeQuorumRequest: self._status.handle_describe_request,
            DescribeQuorumResponse: _ignore,
        }

    # ------------------------------------------------------------------ public API

    def handle(self, message: Message, now: int) -> Output:
        self._step.begin(now)
        body = message.body
        handler = self._handlers.get(type(body))
        if handler is not None and message.destination == self.node_id:
            handler(message, body)
        return self._finish()

    def tick(self, now: int) -> Output:
        self._step.begin(now)
        self._timers.tick()
        return self._finish()

    def append(self, values: Sequence[bytes], now: int) -> Output:
        """Append data records as leader; `Output.append_offsets` has their offsets. They are
        committed once `Output.committed` of a later (or this) call contains them."""
        st = self.state
        if not isinstance(st, LeaderState):
            raise NotLeaderError(self.leader_id, st.epoch)
        self._step.begin(now)
        if values:
            first = self.log.end_offset()
            self._appends.append(st, [(v, DATA) for v in values])
            self._step.out.append_offsets = (first, first + len(values) - 1)
        return self._finish()

    def resign(self, now: int) -> Output:
        """Graceful shutdown: a leader sends EndQuorumEpoch and resigns; others do nothing."""
        self._step.begin(now)
        st = self.state
        if isinstance(st, LeaderState):
            self._transitions.resign(st, "graceful shutdown")
        return self._finish()

    def next_deadline(self) -> int:
        """When `tick` must next be called."""
        return self._timers.next_deadline()

    def describe_quorum(self, now: int) -> DescribeQuorumPartitionResponse:
        """The DescribeQuorum answer for this partition, as this node would give it."""
        return self._status.describe_quorum(now)

    def metrics(self, now: int) -> RaftMetrics:
        return self._status.metrics(now)

    # ------------------------------------------------------------------ what it is

    @property
    def state(self) -> EpochState:
        return self._node.state

    @property
    def high_watermark(self) -> int:
        return self._node.high_watermark

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_id(self) -> int:
        return self._node.known_leader

    @property
    def is_leader(self) -> bool:
        return isinstance(self.state, LeaderState)

    @property
    def state_name(self) -> str:
        """raft-metrics current-state."""
        return self._status.state_name

    # ------------------------------------------------------------------ the end of a call

    def _finish(self) -> Output:
        """Hand out what became committed, and a metrics snapshot at most once an interval."""
        node, step = self._node, self._step
        out, now = step.out, step.now
        hw = node.high_watermark
        if hw > node.applied:
            committed = self.log.read(node.applied, hw - node.applied)
            out.committed.extend(committed)
            node.applied = hw
            node.last_applied = committed[-1]
        if now >= self._next_metrics_ms:   # snapshots cost; one per interval is plenty
            out.metrics = self.metrics(now)
            self._next_metrics_ms = now + self.config.metrics_snapshot_interval_ms
        return out


def _ignore(message: Message, body) -> None:
    return
