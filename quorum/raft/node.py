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

`RaftNode` is the coordinator: it holds the current epoch state (epoch_states.py,
leader_state.py), which answers what depends on it alone, and does the transitions, the
persistence, the sending and the output itself, here. Each API's requests and responses are
handled in a module of their own, mixed into the class: vote.py, quorum_epoch.py
(BeginQuorumEpoch, EndQuorumEpoch), fetch_leader.py and fetch_follower.py, status.py
(DescribeQuorum, metrics); timers.py has what each state does on a tick.

Transitions (a voter; observers only ever follow or look for the leader):
    unattached --election timeout--> prospective --majority pre-votes--> candidate
    prospective --majority rejects | election timeout--> follower (leader still known) | unattached
    candidate --majority votes--> leader;  --rejected--> backoff --> prospective;
              --election timeout--> prospective
    leader --check quorum lost | resign()--> resigned (sends EndQuorumEpoch until answered)
    resigned --election timeout--> unattached in the next epoch
    follower --fetch timeout--> prospective;  --EndQuorumEpoch--> successor backoff --> candidate
    any --higher epoch seen (a pre-vote's too)--> unattached (or follower when the leader is named)
    restart with a stored leadership of its own --> resigned in that epoch
"""
from __future__ import annotations

import random
from collections import deque
from typing import Sequence

from quorum.raft import kafka_records
from quorum.raft.config import DEFAULT_TOPIC, RaftConfig
from quorum.raft.epoch_states import (CandidateState, EpochState, FollowerState, ProspectiveState,
                                      ResignedState, UnattachedState)
from quorum.raft.errors import NotLeaderError
from quorum.raft.fetch_follower import FetchFollower
from quorum.raft.fetch_leader import FetchLeader
from quorum.raft.leader_state import LeaderState
from quorum.raft.log import DATA, LEADER_CHANGE, LogRecord, ReplicatedLog
from quorum.raft.messages import (NO_LEADER, BeginQuorumEpochRequest, BeginQuorumEpochResponse,
                                  DescribeQuorumRequest, DescribeQuorumResponse, EndQuorumEpochRequest,
                                  EndQuorumEpochResponse, Errors, FetchRequest, FetchResponse, Message,
                                  VoteRequest, VoteResponse)
from quorum.raft.metrics import MetricsTracker
from quorum.raft.observations import StateTransition
from quorum.raft.output import Output
from quorum.raft.quorum_epoch import QuorumEpochProtocol
from quorum.raft.quorum_state_store import ElectionState, QuorumStateStore
from quorum.raft.status import NodeStatus
from quorum.raft.timers import StateTimers
from quorum.raft.vote import VoteProtocol


class _Pending:
    __slots__ = ("kind", "destination", "deadline", "state")

    def __init__(self, kind: str, destination: int, deadline: int, state: EpochState) -> None:
        self.kind = kind
        self.destination = destination
        self.deadline = deadline
        self.state = state  # the state that sent it: answers to an older state are stale


class RaftNode(VoteProtocol, QuorumEpochProtocol, FetchLeader, FetchFollower, NodeStatus, StateTimers):
    """One quorum member's Raft state machine (see the module's documentation)."""

    def __init__(self, node_id: int, voters: Sequence[int], log: ReplicatedLog, store: QuorumStateStore,
                 rng: random.Random, now: int, config: RaftConfig = RaftConfig(),
                 cluster_id: str = "quorum", topic: str = DEFAULT_TOPIC, partition: int = 0,
                 may_vote: bool = True) -> None:
        """`may_vote=False` is for a voter that lost its disk: it cannot know which epochs it
        voted in, so it only follows (the directory id of KIP-853 solves this in Kafka)."""
        if not voters:
            raise ValueError("the voter set is empty")
        self.node_id = node_id
        self.voters = tuple(sorted(set(voters)))
        self.log = log
        self.store = store
        self.rng = rng
        self.config = config
        self.cluster_id = cluster_id
        self.topic = topic
        self.partition = partition
        self.is_voter = node_id in self.voters and may_vote
        self.high_watermark = 0
        self._applied = 0                 # next offset to hand out as committed
        self._last_applied: LogRecord | None = None
        self._next_correlation = rng.randrange(1 << 30)
        self._pending: dict[int, _Pending] = {}
        self._commit_waits: deque[tuple[int, int]] = deque()  # (end offset, append time)
        self._election_started_ms: int | None = None
        self._metrics = MetricsTracker()
        self._next_metrics_ms = now
        self._out = Output()
        self._now = now
        self.state: EpochState = self._initial_state(store.read(), now)
        self._persisted = store.read()

    # ------------------------------------------------------------------ public API

    def handle(self, message: Message, now: int) -> Output:
        self._begin(now)
        body = message.body
        handler = _HANDLERS.get(type(body))
        if handler is not None and message.destination == self.node_id:
            handler(self, message, body)
        return self._finish()

    def tick(self, now: int) -> Output:
        self._begin(now)
        self._expire_pending()
        st = self.state
        self._TICKS[type(st)](self, st)
        return self._finish()

    def append(self, values: Sequence[bytes], now: int) -> Output:
        """Append data records as leader; `Output.append_offsets` has their offsets. They are
        committed once `Output.committed` of a later (or this) call contains them."""
        st = self.state
        if not self.is_leader:
            raise NotLeaderError(self._known_leader(), st.epoch)
        self._begin(now)
        if values:
            first = self.log.end_offset()
            self._append_as_leader(st, [(v, DATA) for v in values])
            self._out.append_offsets = (first, first + len(values) - 1)
        return self._finish()

    def resign(self, now: int) -> Output:
        """Graceful shutdown: a leader sends EndQuorumEpoch and resigns; others do nothing."""
        self._begin(now)
        if self.is_leader:
            self._resign(self.state, "graceful shutdown")
        return self._finish()

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_id(self) -> int:
        return self._known_leader()

    @property
    def is_leader(self) -> bool:
        return isinstance(self.state, LeaderState)

    @property
    def state_name(self) -> str:
        """raft-metrics current-state."""
        return self.state.current_state(self.is_voter)

    # ------------------------------------------------------------------ step bookkeeping

    def _begin(self, now: int) -> None:
        if now < self._now:
            now = self._now  # time never runs backwards inside the core
        self._now = now
        self._out = Output()

    def _finish(self) -> Output:
        out = self._out
        hw = self.high_watermark
        if hw > self._applied:
            committed = self.log.read(self._applied, hw - self._applied)
            out.committed.extend(committed)
            self._applied = hw
            self._last_applied = committed[-1]
        if self._now >= self._next_metrics_ms:   # snapshots cost; one per interval is plenty
            out.metrics = self.metrics(self._now)
            self._next_metrics_ms = self._now + self.config.metrics_snapshot_interval_ms
        return out

    def _initial_state(self, stored: ElectionState | None, now: int) -> EpochState:
        if stored is None:
            return UnattachedState(0, -1, self._election_deadline(now) if self.is_voter else None)
        if stored.leader_id == self.node_id:
            # It cannot know who is most caught up: it names the other voters in id order
            # (Kafka names none, which starts every voter's election at once).
            return ResignedState(stored.epoch, self.node_id, self._election_deadline(now),
                                 tuple(v for v in self.voters if v != self.node_id))
        if stored.leader_id != NO_LEADER:
            return FollowerState(stored.epoch, stored.leader_id, stored.voted_id, now,
                                 self.config.fetch_timeout_ms)
        return UnattachedState(stored.epoch, stored.voted_id,
                               self._election_deadline(now) if self.is_voter else None)

    def _election_deadline(self, now: int) -> int:
        t = self.config.election_timeout_ms
        return now + t + self.rng.randint(0, t)

    def _known_leader(self) -> int:
        # A resigned node still names itself: it led this epoch, and nobody else can.
        return self.state.leader_id

    def _majority(self) -> int:
        return len(self.voters) // 2 + 1

    # ------------------------------------------------------------------ transitions

    def _transition(self, new: EpochState, reason: str, persist: bool = True) -> None:
        old_name = self.state_name
        old = self.state
        if persist:
            es = new.election_state(self.voters)
            if es != self._persisted:
                self.store.write(es)
                self._persisted = es
                self._out.quorum_state = es
        self.state = new
        if isinstance(old, LeaderState):
            # held fetches learn at once that this node no longer leads
            for pf in old.parked.values():
                self._fetch_response(pf.message, Errors.NOT_LEADER_OR_FOLLOWER, self.high_watermark)
            old.parked.clear()
        if not new.keeps_requests_of(old):
            self._pending.clear()   # answers to what the old state asked are stale
        new_name = self.state_name
        if (old_name, old.epoch, old.leader_id) != (new_name, new.epoch, new.leader_id):
            now = self._now
            if new.ends_election and self._election_started_ms is not None:
                self._metrics.election_latency.record(now - self._election_started_ms, now)
                self._election_started_ms = None
            self._out.observations.append(StateTransition(now, old_name, new_name, new.epoch, new.leader_id,
                                                          reason))

    def _start_pre_vote(self, reason: str) -> None:
        st = self.state
        if not self.config.pre_vote:
            self._become_candidate(reason)
            return
        if self._election_started_ms is None:
            self._election_started_ms = self._now
        # a follower keeps its leader (unattached and candidate know none); a candidate its retries
        new = ProspectiveState(st.epoch, st.leader_id, st.voted_id, self._election_deadline(self._now),
                               self.node_id, st.retries)
        self._transition(new, reason, persist=False)
        if new.won(self._majority()):
            self._become_candidate("pre-vote won")
            return
        self._send_vote_requests(new)

    def _become_candidate(self, reason: str) -> None:
        old = self.state
        if self._election_started_ms is None:
            self._election_started_ms = self._now
        new = CandidateState(old.epoch + 1, self.node_id, self._election_deadline(self._now), old.retries + 1)
        self._transition(new, reason)  # the vote for itself is persisted before any request
        if new.won(self._majority()):
            self._become_leader(new)
            return
        self._send_vote_requests(new)

    def _become_leader(self, won: CandidateState) -> None:
        now = self._now
        granted = tuple(sorted(won.granted))
        new = LeaderState(won.epoch, self.node_id, self.voters, self.log.end_offset(), granted, now,
                          self.config.check_quorum_timeout_ms, self.config.begin_quorum_epoch_resend_ms,
                          self.config.max_idle_interval_ms)
        self._transition(new, "won the election")
        change = kafka_records.leader_change(self.node_id, self.voters, granted)
        self._append_as_leader(new, [(change, LEADER_CHANGE)])
        for v in self.voters:
            if v != self.node_id:
                self._send_begin_quorum_epoch(new, v)

    def _prospective_done(self, st: ProspectiveState, reason: str) -> None:
        """A pre-vote round ended without a majority: follow the leader still known, or wait."""
        if st.leader_id != NO_LEADER and st.leader_id != self.node_id:
            self._become_follower(st.epoch, st.leader_id, reason + ": back to the known leader")
        else:
            new = UnattachedState(st.epoch, st.voted_id, self._election_deadline(self._now))
            self._transition(new, reason, persist=False)

    def _become_follower(self, epoch: int, leader_id: int, reason: str, fetch: bool = True) -> None:
        old = self.state
        voted = old.voted_id if old.epoch == epoch else -1
        new = FollowerState(epoch, leader_id, voted, self._now, self.config.fetch_timeout_ms)
        self._transition(new, reason)
        if fetch:
            self._send_fetch(new)

    def _become_unattached(self, epoch: int, reason: str, voted_id: int = -1) -> None:
        deadline = self._election_deadline(self._now) if self.is_voter else None
        new = UnattachedState(epoch, voted_id, deadline)
        self._transition(new, reason)

    def _resign(self, st: LeaderState, reason: str) -> None:
        new = ResignedState(st.epoch, self.node_id, self._election_deadline(self._now), st.preferred_successors())
        self._transition(new, reason)
        self._send_end_quorum_epochs(new)

    def _maybe_handle_common_response(self, error_code: int, leader_id: int, leader_epoch: int) -> bool:
        """Every response names the responder's leader and epoch: learn from it. True if the
        state changed (the caller then stops handling the response)."""
        st = self.state
        if leader_epoch > st.epoch:
            if leader_id != NO_LEADER and leader_id != self.node_id:
                self._become_follower(leader_epoch, leader_id, "response named a newer leader")
            else:
                self._become_unattached(leader_epoch, "response carried a newer epoch")
            return True
        if (leader_epoch == st.epoch and leader_id != NO_LEADER and leader_id != self.node_id
                and st.leader_id == NO_LEADER):   # unattached, or campaigning without a leader
            self._become_follower(leader_epoch, leader_id, "response named the leader")
            return True
        return False

    # ------------------------------------------------------------------ requests and responses

    def _send(self, destination: int, body, kind: str | None = None, correlation_id: int | None = None) -> int:
        """Send a request (kind given: tracked for its answer) or a response (correlation id given)."""
        if correlation_id is None:
            correlation_id = self._next_correlation
            self._next_correlation += 1
            self._pending[correlation_id] = _Pending(kind, destination, self._now + self.config.request_timeout_ms,
                                                     self.state)
        self._out.messages.append(Message(self.node_id, destination, correlation_id, body))
        return correlation_id

    def _take_pending(self, message: Message, kind: str) -> _Pending | None:
        p = self._pending.get(message.correlation_id)
        if p is None or p.kind != kind or p.destination != message.source:
            return None
        del self._pending[message.correlation_id]
        return p

    def _expire_pending(self) -> None:
        now = self._now
        expired = [c for c, p in self._pending.items() if p.deadline <= now]
        for c in expired:
            del self._pending[c]
            self.state.request_expired(c, now)

    def _our_partition(self, topics, name_attr: str = "topic_name"):
        """The partition of this quorum inside a batched request, or None."""
        for t in topics:
            if getattr(t, name_attr) == self.topic:
                for p in t.partitions:
                    if getattr(p, "partition_index", getattr(p, "partition", None)) == self.partition:
                        return p
        return None

    def _cluster_ok(self, cluster_id: str | None) -> bool:
        # A request without a cluster id comes from a tool that does not know it; accept it.
        return cluster_id is None or cluster_id == self.cluster_id

    def _ignore(self, message: Message, body) -> None:
        return


_HANDLERS = {
    VoteRequest: RaftNode._handle_vote_request,
    VoteResponse: RaftNode._handle_vote_response,
    BeginQuorumEpochRequest: RaftNode._handle_begin_request,
    BeginQuorumEpochResponse: RaftNode._handle_begin_response,
    EndQuorumEpochRequest: RaftNode._handle_end_request,
    EndQuorumEpochResponse: RaftNode._handle_end_response,
    FetchRequest: RaftNode._handle_fetch_request,
    FetchResponse: RaftNode._handle_fetch_response,
    DescribeQuorumRequest: RaftNode._handle_describe_request,
    DescribeQuorumResponse: RaftNode._ignore,
}
