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

from quorum.raft.config import DEFAULT_TOPIC, RaftConfig
from quorum.raft.epoch_states import (CampaignState, CandidateState, EpochState, FollowerState,
                                      ProspectiveState, ResignedState, UnattachedState)
from quorum.raft.leader_state import LeaderState, ParkedFetch
from quorum.raft import kafka_records
from quorum.raft.log import DATA, LEADER_CHANGE, NOOP, LogRecord, ReplicatedLog
from quorum.raft.messages import (NO_LEADER, BeginQuorumEpochPartitionRequest, BeginQuorumEpochRequest,
                                  BeginQuorumEpochResponse, BeginQuorumEpochTopicRequest,
                                  DescribeQuorumPartitionResponse, DescribeQuorumRequest,
                                  DescribeQuorumResponse, DescribeQuorumTopicResponse,
                                  EndQuorumEpochPartitionRequest, EndQuorumEpochRequest,
                                  EndQuorumEpochResponse, EndQuorumEpochTopicRequest, EpochEndOffset,
                                  EpochPartitionResponse, EpochTopicResponse, Errors, FetchPartition,
                                  FetchPartitionData, FetchRequest, FetchResponse, FetchTopic,
                                  FetchableTopicResponse, LeaderIdAndEpoch, Message, VotePartitionRequest,
                                  VotePartitionResponse, VoteRequest, VoteResponse, VoteTopicRequest,
                                  VoteTopicResponse)
from quorum.raft.metrics import MetricsTracker, RaftMetrics
from quorum.raft.observations import FetchObservation, StateTransition
from quorum.raft.output import Output
from quorum.raft.quorum_state_store import ElectionState, QuorumStateStore


class NotLeaderError(Exception):
    """`append` on a node that is not the leader; says who is, when known."""

    def __init__(self, leader_id: int, epoch: int) -> None:
        self.leader_id = leader_id
        self.epoch = epoch
        super().__init__(f"not the leader (leader {leader_id}, epoch {epoch})")


class SafetyError(RuntimeError):
    """The core was asked to do something that would break Raft's guarantees (for example
    truncate below the high watermark). Raised rather than done: stop the node."""


class _Pending:
    __slots__ = ("kind", "destination", "deadline", "state")

    def __init__(self, kind: str, destination: int, deadline: int, state: EpochState) -> None:
        self.kind = kind
        self.destination = destination
        self.deadline = deadline
        self.state = state  # the state that sent it: answers to an older state are stale


class RaftNode:

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

    def next_deadline(self) -> int:
        """When `tick` must next be called."""
        st = self.state
        d = st.deadline(self._now, self.is_voter)
        if isinstance(st, ResignedState):   # resends wait for no answer in flight: the requests know
            end = st.next_end_quorum_epoch(self._end_in_flight())
            if end is not None and end < d:
                d = end
        for p in self._pending.values():
            if d is None or p.deadline < d:
                d = p.deadline
        return d if d is not None else self._now + self.config.request_timeout_ms

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

    def describe_quorum(self, now: int) -> DescribeQuorumPartitionResponse:
        """The DescribeQuorum answer for this partition, as this node would give it."""
        st = self.state
        if not self.is_leader:
            return DescribeQuorumPartitionResponse(
                self.partition, Errors.NOT_LEADER_OR_FOLLOWER, self._known_leader(), st.epoch,
                self.high_watermark, (), (), "this node is not the leader")
        st.expire_observers(now, self.config.observer_expiry_ms)
        voters, observers = st.describe_replicas(now, self.log.end_offset())
        # Kafka's leader knows no high watermark (-1) until it has committed in its own epoch.
        hw = self.high_watermark if self.high_watermark > st.epoch_start_offset else -1
        return DescribeQuorumPartitionResponse(self.partition, Errors.NONE, self.node_id, st.epoch,
                                               hw, voters, observers)

    def metrics(self, now: int) -> RaftMetrics:
        st = self.state
        m = self._metrics
        la = self._last_applied
        return RaftMetrics(
            current_state=self.state_name, current_leader=self._known_leader(),
            current_vote=st.voted_id, current_epoch=st.epoch, high_watermark=self.high_watermark,
            log_end_offset=self.log.end_offset(), log_end_epoch=self.log.last_epoch(),
            commit_latency_avg=m.commit_latency.avg(now), commit_latency_max=m.commit_latency.max(now),
            election_latency_avg=m.election_latency.avg(now),
            election_latency_max=m.election_latency.max(now),
            fetch_records_rate=m.fetch_records.rate_per_s(now),
            append_records_rate=m.append_records.rate_per_s(now),
            poll_idle_ratio_avg=-1.0, number_unknown_voter_connections=st.unknown_voter_connections(),
            last_applied_record_offset=la.offset if la else -1,
            last_applied_record_timestamp=la.append_time_ms if la else -1,
            last_committed_record_offset=self.high_watermark - 1,
            last_applied_record_lag_ms=now - la.append_time_ms if la else -1)

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
            return FollowerState(stored.epoch, stored.leader_id, stored.voted_id, now, self.config.fetch_timeout_ms)
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

    # ------------------------------------------------------------------ elections

    def _log_up_to_date(self, last_epoch: int, end_offset: int) -> bool:
        return (last_epoch, end_offset) >= (self.log.last_epoch(), self.log.end_offset())

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

    def _send_vote_requests(self, st: CampaignState) -> None:
        part = VotePartitionRequest(self.partition, st.epoch, self.node_id, self.log.last_epoch(),
                                    self.log.end_offset(), st.pre_vote)
        for v in self.voters:
            if v != self.node_id:
                body = VoteRequest(self.cluster_id, (VoteTopicRequest(self.topic, (part,)),), voter_id=v)
                self._send(v, body, kind="pre_vote" if st.pre_vote else "vote")

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

    def _send_begin_quorum_epoch(self, st: LeaderState, voter: int) -> None:
        part = BeginQuorumEpochPartitionRequest(self.partition, self.node_id, st.epoch)
        self._send(voter, BeginQuorumEpochRequest(self.cluster_id, (BeginQuorumEpochTopicRequest(
            self.topic, (part,)),)), kind="begin")

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

    def _end_in_flight(self) -> set[int]:
        return {p.destination for p in self._pending.values() if p.kind == "end"}

    def _send_end_quorum_epochs(self, st: ResignedState) -> None:
        """EndQuorumEpoch to every voter that has not answered it yet and has no request in
        flight; an error answer waits retry.backoff.ms, a lost one the request timeout."""
        part = EndQuorumEpochPartitionRequest(self.partition, self.node_id, st.epoch, st.successors)
        for v in st.end_quorum_epoch_due(self._now, self._end_in_flight()):
            self._send(v, EndQuorumEpochRequest(self.cluster_id, (EndQuorumEpochTopicRequest(
                self.topic, (part,)),)), kind="end")

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

    # ------------------------------------------------------------------ Vote

    def _handle_vote_request(self, message: Message, req: VoteRequest) -> None:
        part = self._our_partition(req.topics)
        if not self._cluster_ok(req.cluster_id):
            self._answer_vote(message, Errors.INCONSISTENT_CLUSTER_ID, False, top_level=True)
            return
        if part is None:
            self._answer_vote(message, Errors.UNKNOWN_TOPIC_OR_PARTITION, False, top_level=True)
            return
        if not self._vote_request_valid(part):
            self._answer_vote(message, Errors.INVALID_REQUEST, False)
        elif part.candidate_epoch < self.state.epoch:  # 1. a larger epoch is known
            self._answer_vote(message, Errors.FENCED_LEADER_EPOCH, False)
        else:
            granted = self._grant_pre_vote(part) if part.pre_vote else self._grant_vote(part)
            self._answer_vote(message, Errors.NONE, granted)

    @staticmethod
    def _vote_request_valid(part: VotePartitionRequest) -> bool:
        """Kafka's INVALID_REQUEST cases: negative ids, offsets or epochs, and a last epoch the
        candidate cannot have (a candidate bumped its epoch past its log's; a pre-vote did not)."""
        if part.candidate_id < 0 or part.candidate_epoch < 0 or part.last_offset < 0 or part.last_offset_epoch < 0:
            return False
        if part.pre_vote:
            return part.last_offset_epoch <= part.candidate_epoch
        return part.last_offset_epoch < part.candidate_epoch

    def _grant_vote(self, part: VotePartitionRequest) -> bool:
        """KIP-595's numbered Vote rules; a granted vote is persisted before the answer."""
        st = self.state
        epoch, cand = part.candidate_epoch, part.candidate_id
        if not self.is_voter or cand not in self.voters:
            if epoch > st.epoch:                       # 3.1 accept the bump, refuse the vote
                self._become_unattached(epoch, "vote request with a newer epoch")
            return False
        up_to_date = self._log_up_to_date(part.last_offset_epoch, part.last_offset)
        if epoch > st.epoch:                           # 3. newer epoch: step down, vote if up to date
            self._become_unattached(epoch, "vote request with a newer epoch",
                                    voted_id=cand if up_to_date else -1)
            return up_to_date
        if not st.can_grant_vote(cand, up_to_date, False, self._now):   # 2. one vote per epoch, and more
            return False
        if st.voted_id == -1:
            self._become_unattached(epoch, "granted a vote", voted_id=cand)
        return True

    def _grant_pre_vote(self, part: VotePartitionRequest) -> bool:
        """KIP-996: no vote is recorded, and the state decides (a follower refuses while its
        leader is alive)."""
        if part.candidate_epoch > self.state.epoch:
            # Kafka: a newer epoch is adopted even from a pre-vote. Without this a voter stuck
            # in a higher epoch (its own lost candidacy) could never rejoin a quorum whose
            # leader sits in a lower epoch and keeps refusing its stale log.
            self._become_unattached(part.candidate_epoch, "pre-vote request with a newer epoch")
        if not self.is_voter or part.candidate_id not in self.voters:
            return False
        up_to_date = self._log_up_to_date(part.last_offset_epoch, part.last_offset)
        return self.state.can_grant_vote(part.candidate_id, up_to_date, True, self._now)

    def _answer_vote(self, message: Message, error: int, granted: bool,
                     top_level: bool = False) -> None:
        st = self.state
        parts = ()
        if not top_level:
            parts = (VoteTopicResponse(self.topic, (VotePartitionResponse(
                self.partition, error, self._known_leader(), st.epoch, granted),)),)
        self._send(message.source, VoteResponse(error if top_level else Errors.NONE, parts),
                   correlation_id=message.correlation_id)

    def _handle_vote_response(self, message: Message, resp: VoteResponse) -> None:
        p = self._pending.get(message.correlation_id)
        if p is None or p.kind not in ("vote", "pre_vote") or p.destination != message.source:
            return
        del self._pending[message.correlation_id]
        part = self._our_partition(resp.topics)
        if resp.error_code != Errors.NONE or part is None:
            return
        if self._maybe_handle_common_response(part.error_code, part.leader_id, part.leader_epoch):
            return
        st = p.state   # only a campaign asks for votes
        if st is not self.state or not st.counts_votes():
            return
        st.record_vote(message.source, part.vote_granted)
        if st.won(self._majority()):
            if st.pre_vote:
                self._become_candidate("pre-vote won")
            else:
                self._become_leader(st)
        elif st.lost(len(self.voters), self._majority()):
            self._election_lost(st)

    def _prospective_done(self, st: ProspectiveState, reason: str) -> None:
        """A pre-vote round ended without a majority: follow the leader still known, or wait."""
        if st.leader_id != NO_LEADER and st.leader_id != self.node_id:
            self._become_follower(st.epoch, st.leader_id, reason + ": back to the known leader")
        else:
            new = UnattachedState(st.epoch, st.voted_id, self._election_deadline(self._now))
            self._transition(new, reason, persist=False)

    def _election_lost(self, st: CampaignState) -> None:
        if st.pre_vote:
            self._prospective_done(st, "pre-vote rejected")
        else:
            # lost: back off (a 2-voter candidate gets here on the first rejection)
            st.lose(self._now, self._election_backoff(st.retries))

    def _election_backoff(self, retries: int) -> int:
        """Kafka's binary exponential backoff after a lost election: a random multiple of
        retry.backoff.ms below 2^retries of them, capped at election.backoff.max.ms."""
        n = self.rng.randrange(2 << min(max(retries, 1) - 1, 20))
        return min(self.config.retry_backoff_ms * n, self.config.election_backoff_max_ms)

    # ------------------------------------------------------------------ BeginQuorumEpoch

    def _handle_begin_request(self, message: Message, req: BeginQuorumEpochRequest) -> None:
        part = self._partition_or_refuse(message, req, BeginQuorumEpochResponse)
        if part is None:
            return
        st = self.state
        error = Errors.NONE
        if part.leader_epoch < st.epoch:
            error = Errors.FENCED_LEADER_EPOCH
        elif part.leader_id == self.node_id or part.leader_id not in self.voters:
            error = Errors.INVALID_REQUEST
        elif part.leader_epoch == st.epoch and st.leader_id not in (NO_LEADER, part.leader_id):
            error = Errors.INVALID_REQUEST   # another leader is already known for this epoch
        elif not (st.follows(part.leader_id) and st.epoch == part.leader_epoch):
            self._become_follower(part.leader_epoch, part.leader_id, "BeginQuorumEpoch")
        self._answer_epoch(message, BeginQuorumEpochResponse, Errors.NONE, error)

    def _partition_or_refuse(self, message: Message, req, response_cls):
        """Our partition of a Begin/EndQuorumEpoch request, or None after refusing it."""
        part = self._our_partition(req.topics)
        if not self._cluster_ok(req.cluster_id):
            self._answer_epoch(message, response_cls, Errors.INCONSISTENT_CLUSTER_ID)
        elif part is None:
            self._answer_epoch(message, response_cls, Errors.UNKNOWN_TOPIC_OR_PARTITION)
        else:
            return part
        return None

    def _answer_epoch(self, message: Message, cls, top_error: int, part_error: int | None = None) -> None:
        st = self.state
        topics = ()
        if part_error is not None:
            topics = (EpochTopicResponse(self.topic, (EpochPartitionResponse(
                self.partition, part_error, self._known_leader(), st.epoch),)),)
        self._send(message.source, cls(top_error, topics), correlation_id=message.correlation_id)

    def _handle_begin_response(self, message: Message, resp: BeginQuorumEpochResponse) -> None:
        p = self._take_pending(message, "begin")
        part = self._our_partition(resp.topics) if p is not None else None
        if part is None or resp.error_code != Errors.NONE:
            return
        if self._maybe_handle_common_response(part.error_code, part.leader_id, part.leader_epoch):
            return
        leader = p.state   # only a leader asks for endorsements
        if leader is self.state and part.error_code == Errors.NONE:
            leader.endorsed.add(message.source)

    # ------------------------------------------------------------------ EndQuorumEpoch

    def _handle_end_request(self, message: Message, req: EndQuorumEpochRequest) -> None:
        part = self._partition_or_refuse(message, req, EndQuorumEpochResponse)
        if part is None:
            return
        st = self.state
        if part.leader_epoch < st.epoch:
            self._answer_epoch(message, EndQuorumEpochResponse, Errors.NONE, Errors.FENCED_LEADER_EPOCH)
            return
        if part.leader_id < 0 or part.leader_id == self.node_id:
            self._answer_epoch(message, EndQuorumEpochResponse, Errors.NONE, Errors.INVALID_REQUEST)
            return
        leader = part.leader_id
        if part.leader_epoch > st.epoch or st.leader_id == NO_LEADER:   # a newer epoch, or one without a leader
            # As Kafka does, learn the (resigning) leader of that epoch: the answer names it and
            # the successor backoff below applies as to any of its followers.
            self._become_follower(part.leader_epoch, leader, "EndQuorumEpoch", fetch=False)
            st = self.state
        if self.is_voter and st.follows(leader):
            st.leader_resigning(self._now, self._successor_backoff(part.preferred_successors))
        self._answer_epoch(message, EndQuorumEpochResponse, Errors.NONE, Errors.NONE)
        if isinstance(st, FollowerState) and st.successor_due(self._now):
            self._tick_follower(st)   # the first successor campaigns at once

    def _successor_backoff(self, successors: Sequence[int]) -> int:
        """Kafka's strict exponential backoff: position p of n preferred successors waits
        min(B, (B >> (n-1)) << (p-1)); the first starts at once, a voter not named waits B."""
        b = self.config.election_backoff_max_ms
        if self.node_id not in successors:
            return 0 if not successors else b
        p, n = successors.index(self.node_id), len(successors)
        return 0 if p == 0 else min(b, (b >> (n - 1)) << (p - 1))

    def _handle_end_response(self, message: Message, resp: EndQuorumEpochResponse) -> None:
        p = self._take_pending(message, "end")
        if p is None:
            return
        part = self._our_partition(resp.topics)
        if part is not None and resp.error_code == Errors.NONE:
            if self._maybe_handle_common_response(part.error_code, part.leader_id, part.leader_epoch):
                return
        resigned = p.state   # only a resigned leader asks
        if resigned is self.state:
            ok = part is not None and resp.error_code == Errors.NONE and part.error_code == Errors.NONE
            resigned.end_quorum_epoch_answered(message.source, ok, self._now, self.config.retry_backoff_ms)

    # ------------------------------------------------------------------ Fetch

    def _send_fetch(self, st: FollowerState, target: int | None = None) -> None:
        part = FetchPartition(self.partition, st.epoch, self.log.end_offset(), self.log.last_epoch())
        body = FetchRequest(self.cluster_id, self.node_id, self.config.fetch_max_wait_ms,
                            (FetchTopic(self.topic, (part,)),))
        st.inflight_fetch = self._send(st.leader_id if target is None else target, body, kind="fetch")

    def _send_discovery_fetch(self, st: UnattachedState) -> None:
        """An observer without a leader asks a random voter, whose answer names the leader."""
        others = [v for v in self.voters if v != self.node_id]
        if not others:
            return
        target = others[self.rng.randrange(len(others))]
        part = FetchPartition(self.partition, st.epoch, self.log.end_offset(), self.log.last_epoch())
        body = FetchRequest(self.cluster_id, self.node_id, 0, (FetchTopic(self.topic, (part,)),))
        self._send(target, body, kind="discovery")
        st.next_discovery_ms = self._now + self.config.request_timeout_ms

    def _observe_fetch(self, req: FetchRequest, part: FetchPartition, error: int, leader_leo: int,
                       diverging: bool = False) -> None:
        """Report a replica's fetch as answered (a consumer's, replica id -1, is no replica's)."""
        if req.replica_id < 0:
            return
        st = self.state
        progress = st.known_progress(req.replica_id)   # the leader's KIP-836 view, as it stands now
        end, fetched, caught_up = ((progress.end_offset, progress.last_fetch_timestamp,
                                    progress.last_caught_up_timestamp) if progress is not None else (-1, -1, -1))
        self._out.observations.append(FetchObservation(
            self._now, st.epoch, self.is_leader, req.replica_id, part.fetch_offset, part.last_fetched_epoch,
            leader_leo, self.high_watermark, error, diverging, end, fetched, caught_up))

    def _fetch_response(self, message: Message, error: int, hw: int = -1, diverging: EpochEndOffset | None = None,
                        records: tuple = (), top_error: int = Errors.NONE) -> None:
        st = self.state
        parts = ()
        if top_error == Errors.NONE:
            parts = (FetchableTopicResponse(self.topic, (FetchPartitionData(
                self.partition, error, hw, LeaderIdAndEpoch(self._known_leader(), st.epoch), diverging,
                records),)),)
        self._send(message.source, FetchResponse(top_error, parts), correlation_id=message.correlation_id)

    def _handle_fetch_request(self, message: Message, req: FetchRequest) -> None:
        st = self.state
        leo = self.log.end_offset()
        part = self._our_partition(req.topics, "topic")
        # Kafka's order of checks: cluster id, then epoch, then leadership.
        if not self._cluster_ok(req.cluster_id):
            if part is not None:
                self._observe_fetch(req, part, Errors.INCONSISTENT_CLUSTER_ID, leo)
            self._fetch_response(message, Errors.NONE, top_error=Errors.INCONSISTENT_CLUSTER_ID)
            return
        if part is None:
            self._fetch_response(message, Errors.NONE, top_error=Errors.UNKNOWN_TOPIC_OR_PARTITION)
            return
        if (req.max_wait_ms < 0 or part.fetch_offset < 0 or part.last_fetched_epoch < 0
                or part.last_fetched_epoch > part.current_leader_epoch):
            error = Errors.INVALID_REQUEST
        elif part.current_leader_epoch < st.epoch:
            error = Errors.FENCED_LEADER_EPOCH
        elif part.current_leader_epoch > st.epoch:
            error = Errors.UNKNOWN_LEADER_EPOCH
        elif not self.is_leader:
            error = Errors.NOT_LEADER_OR_FOLLOWER
        else:
            self._leader_handle_fetch(st, message, req, part, leo)
            return
        self._observe_fetch(req, part, error, leo)
        self._fetch_response(message, error, self.high_watermark)

    def _leader_handle_fetch(self, st: LeaderState, message: Message, req: FetchRequest,
                             part: FetchPartition, leo: int) -> None:
        now = self._now
        replica = req.replica_id
        is_voter = replica in st.voter_progress
        offset, fetched_epoch = part.fetch_offset, part.last_fetched_epoch
        if offset != 0:
            # Kafka answers every fetch the log cannot continue, an offset past the log end
            # included, with the largest epoch at or below the fetched one and its end offset:
            # the follower truncates to it and goes on (an error answer left it stuck).
            e, end = self.log.end_offset_for_epoch(fetched_epoch)
            if e != fetched_epoch or offset > end:
                self._observe_fetch(req, part, Errors.NONE, leo, diverging=True)
                self._fetch_response(message, Errors.NONE, self.high_watermark, EpochEndOffset(e, end))
                return
        if is_voter:   # only a valid fetch endorses the leader and counts for check quorum
            st.note_voter_fetch(replica, now, self.config.check_quorum_timeout_ms)
        if replica >= 0 and replica != self.node_id:
            progress = st.progress_of(replica)
            progress.on_valid_fetch(offset, leo, now)
            if is_voter:
                self._maybe_advance_high_watermark(st)
        else:
            progress = None
        self._observe_fetch(req, part, Errors.NONE, leo)
        old = st.parked.pop(replica, None)
        if old is not None:   # a newer fetch supersedes a parked one: answer the old one empty
            self._fetch_response(old.message, Errors.NONE, self.high_watermark)
        if (offset >= leo and req.max_wait_ms > 0 and progress is not None
                and progress.last_sent_high_watermark >= self.high_watermark):
            st.parked[replica] = ParkedFetch(message, offset, now + min(req.max_wait_ms,
                                                                        self.config.fetch_max_wait_ms))
            return
        self._complete_fetch(st, message, offset, progress)

    def _complete_fetch(self, st: LeaderState, message: Message, offset: int, progress) -> None:
        records = tuple(self.log.read(offset, self.config.fetch_max_records))
        if progress is not None:
            progress.last_sent_high_watermark = self.high_watermark
        self._fetch_response(message, Errors.NONE, self.high_watermark, None, records)

    def _complete_parked(self, st: LeaderState, only_expired: bool = False) -> None:
        if not st.parked:
            return
        now = self._now
        for replica, pf in list(st.parked.items()):
            if only_expired and pf.deadline > now:
                continue
            del st.parked[replica]
            progress = st.known_progress(replica)
            self._complete_fetch(st, pf.message, pf.fetch_offset, progress)

    def _maybe_advance_high_watermark(self, st: LeaderState) -> None:
        candidate = st.high_watermark_candidate(self.log.end_offset())
        if candidate > st.epoch_start_offset and candidate > self.high_watermark:
            self.high_watermark = candidate
            now = self._now
            waits = self._commit_waits
            while waits and waits[0][0] <= candidate:
                self._metrics.commit_latency.record(now - waits.popleft()[1], now)
            self._complete_parked(st)

    def _append_as_leader(self, st: LeaderState, items: list[tuple[bytes, str]]) -> None:
        now = self._now
        base = self.log.end_offset()
        records = [LogRecord(base + i, st.epoch, value, now, kind) for i, (value, kind) in enumerate(items)]
        self.log.append(records)
        self._out.appended.extend(records)
        self._out.flush_log = True
        st.last_append_ms = now
        self._commit_waits.append((base + len(records), now))
        self._metrics.append_records.record(len(records), now)
        self._maybe_advance_high_watermark(st)   # a single voter commits at once
        self._complete_parked(st)

    def _handle_fetch_response(self, message: Message, resp: FetchResponse) -> None:
        p = self._pending.get(message.correlation_id)
        if p is None or p.kind not in ("fetch", "discovery") or p.destination != message.source:
            return
        del self._pending[message.correlation_id]
        st = self.state
        is_current = st.fetch_answered(message.correlation_id)
        part = self._our_partition(resp.responses, "topic")
        if resp.error_code != Errors.NONE or part is None:
            st.fetch_failed(self._now, self.config)
            return
        leader = part.current_leader
        if self._maybe_handle_common_response(part.error_code, leader.leader_id, leader.leader_epoch):
            return
        if not is_current or p.state is not st:
            st.stale_fetch_answered(self._now, self.config)
            return
        if part.error_code != Errors.NONE:
            st.fetch_failed(self._now, self.config)
            return
        self._follower_handle_fetch_data(st, part)

    def _follower_handle_fetch_data(self, st: FollowerState, part: FetchPartitionData) -> None:
        now = self._now
        st.leader_answered(now)
        log = self.log
        if part.snapshot_id is not None:
            # A Kafka leader whose log now starts above ours offers its snapshot instead.
            # FetchSnapshot is not implemented: say so, and ask again only at the backoff's pace.
            s = part.snapshot_id
            self._out.cannot_follow = (
                f"leader {st.leader_id} no longer has the records from offset {log.end_offset()} on (its log "
                f"starts at {part.log_start_offset}) and offers its snapshot {s.end_offset}-{s.epoch} instead; "
                f"this node does not fetch snapshots (FetchSnapshot), so it cannot follow this leader")
            st.fetch_failed(now, self.config)
            return
        st.fetch_errors = 0
        if part.diverging_epoch is not None:
            d = part.diverging_epoch
            e, end = log.end_offset_for_epoch(d.epoch)
            target = min(end, d.end_offset)
            if target < self.high_watermark:
                raise SafetyError(f"node {self.node_id}: leader {st.leader_id} asked to truncate to {target}, "
                                  f"below the high watermark {self.high_watermark}")
            log.truncate_to(target)
            self._out.truncated_to = target
        else:
            records = part.records
            if records and records[0].offset == log.end_offset():
                log.append(records)
                self._out.appended.extend(records)
                self._out.flush_log = True
                self._metrics.fetch_records.record(len(records), now)
            hw = min(part.high_watermark, log.end_offset())
            if hw > self.high_watermark:
                self.high_watermark = hw
        self._send_fetch(st)

    # ------------------------------------------------------------------ DescribeQuorum

    def _handle_describe_request(self, message: Message, req: DescribeQuorumRequest) -> None:
        part = self._our_partition(req.topics)
        if part is None:
            body = DescribeQuorumResponse(Errors.UNKNOWN_TOPIC_OR_PARTITION, (), "unknown topic or partition")
        else:
            body = DescribeQuorumResponse(Errors.NONE, (DescribeQuorumTopicResponse(
                self.topic, (self.describe_quorum(self._now),)),))
        self._send(message.source, body, correlation_id=message.correlation_id)

    def _ignore(self, message: Message, body) -> None:
        return

    # ------------------------------------------------------------------ timers per state

    def _tick_unattached(self, st: UnattachedState) -> None:
        now = self._now
        if not self.is_voter:
            if now >= st.next_discovery_ms:
                self._send_discovery_fetch(st)
            return
        if st.election_deadline is not None and now >= st.election_deadline:
            self._start_pre_vote("election timeout")

    def _tick_prospective(self, st: ProspectiveState) -> None:
        # Kafka: a pre-vote round that times out goes back to the leader it knew (and fetches)
        # or to unattached; campaigning again forever starved a voter that could still fetch.
        if self._now >= st.election_deadline:
            self._prospective_done(st, "pre-vote timed out")

    def _tick_candidate(self, st: CandidateState) -> None:
        now = self._now
        if st.backoff_until is not None:
            if now >= st.backoff_until:
                self._start_pre_vote("election lost, backoff over")
        elif now >= st.election_deadline:
            self._start_pre_vote("election timed out")

    def _tick_follower(self, st: FollowerState) -> None:
        now = self._now
        if st.fetch_timed_out(now):
            if not self.is_voter:
                # Kafka: an observer keeps the leader it knows and asks any voter instead;
                # an answer naming a newer leader moves it on.
                if st.fetch_due(now):
                    self._send_fetch(st, self.voters[self.rng.randrange(len(self.voters))])
            elif st.leader_resigned:
                self._become_candidate("successor of a resigned leader")
            else:
                self._start_pre_vote("fetch timeout")
        elif st.fetch_due(now):
            self._send_fetch(st)

    def _tick_leader(self, st: LeaderState) -> None:
        now = self._now
        if st.check_quorum_lost(now):
            self._resign(st, "check quorum: no fetches from a majority")
            return
        if now >= st.begin_resend_deadline:
            for v in st.unendorsed_voters():
                self._send_begin_quorum_epoch(st, v)
            st.begin_resend_deadline = now + self.config.begin_quorum_epoch_resend_ms
        if st.noop_due(now):
            self._append_as_leader(st, [(kafka_records.NOOP_RECORD, NOOP)])
        self._complete_parked(st, only_expired=True)
        st.expire_observers(now, self.config.observer_expiry_ms)

    def _tick_resigned(self, st: ResignedState) -> None:
        if self._now >= st.election_deadline:
            # Kafka 4.x: leave for the next epoch, so that no answer of ours can name this node
            # as the leader any more; the election timer of that state starts a campaign.
            self._become_unattached(st.epoch + 1, "resigned, election timeout")
            return
        self._send_end_quorum_epochs(st)

    _TICKS = {UnattachedState: _tick_unattached, ProspectiveState: _tick_prospective,
              CandidateState: _tick_candidate, FollowerState: _tick_follower, LeaderState: _tick_leader,
              ResignedState: _tick_resigned}


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
