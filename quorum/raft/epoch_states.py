"""One class per epoch state a node can be in (Kafka's raft/ module shape).

Each state knows its epoch, the leader it knows (-1 none), the vote it cast in this epoch
(-1 none), the timers it runs and the `ElectionState` it stands for on disk, and answers for
itself what depends on it alone: whether it grants a vote, when its timers next fire, what an
answered, failed or lost fetch changes. A state sends nothing and changes into no other
state: the node's handlers ask it, and transitions.py moves, persists and sends; the table
of transitions is there. Leaders have their own file (leader_state.py) because they track
replicas.
"""
from __future__ import annotations

from quorum.raft.config import RaftConfig
from quorum.raft.messages import NO_LEADER
from quorum.raft.quorum_state_store import ElectionState


class EpochState:
    __slots__ = ("epoch", "leader_id", "voted_id")
    name = "?"
    retries = 0             # elections lost in a row; only a campaign counts them
    ends_election = False   # a state that knows the epoch's leader for good: the election is over

    def __init__(self, epoch: int, leader_id: int = NO_LEADER, voted_id: int = -1) -> None:
        self.epoch = epoch
        self.leader_id = leader_id
        self.voted_id = voted_id

    def election_state(self, voters: tuple[int, ...]) -> ElectionState:
        return ElectionState(self.epoch, self.leader_id, self.voted_id, voters)

    def current_state(self, is_voter: bool) -> str:
        """raft-metrics' current-state: a node that is no voter is an observer in any state."""
        return self.name if is_voter else "observer"

    def can_grant_vote(self, candidate: int, log_up_to_date: bool, pre_vote: bool, now: int) -> bool:
        """Whether this state gives `candidate` its vote (or pre-vote) in this epoch. The node has
        refused stale requests and moved to the epoch of newer ones before it asks."""
        raise NotImplementedError

    def deadline(self, now: int, is_voter: bool) -> int | None:
        """The earliest time this state's own timers need a tick (None: no timer)."""
        return None

    def follows(self, leader_id: int) -> bool:
        """Whether this is a follower of `leader_id` in its epoch."""
        return False

    def keeps_requests_of(self, old: EpochState) -> bool:
        """Whether answers to what `old` asked still count once this state replaces it."""
        return False

    def known_progress(self, replica_id: int):
        """What this state knows of a replica's progress (KIP-836): only a leader tracks any."""
        return None

    def unknown_voter_connections(self) -> int:
        return 0

    # --- fetching: only followers and observers looking for the leader fetch ---

    def fetch_answered(self, correlation_id: int) -> bool:
        """Whether `correlation_id` is the fetch this state waits for (it waits no more)."""
        return False

    def request_expired(self, correlation_id: int, now: int) -> None:
        """A request of this state got no answer within the request timeout."""

    def fetch_failed(self, now: int, config: RaftConfig) -> None:
        """A fetch was answered with an error, or for no partition of ours: when to ask again."""

    def stale_fetch_answered(self, now: int, config: RaftConfig) -> None:
        """An answer that moved nothing arrived for a fetch this state no longer waits for."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(epoch={self.epoch}, leader={self.leader_id}, voted={self.voted_id})"


class UnattachedState(EpochState):
    """No leader known in this epoch; maybe a vote cast. A voter campaigns when the
    election timer expires; an observer looks for the leader by asking voters."""
    __slots__ = ("election_deadline", "next_discovery_ms")
    name = "unattached"

    def __init__(self, epoch: int, voted_id: int, election_deadline: int | None) -> None:
        super().__init__(epoch, NO_LEADER, voted_id)
        self.election_deadline = election_deadline   # None for an observer: it never campaigns
        self.next_discovery_ms = 0

    def current_state(self, is_voter: bool) -> str:
        if is_voter and self.voted_id != -1:
            return "voted"
        return super().current_state(is_voter)

    def can_grant_vote(self, candidate: int, log_up_to_date: bool, pre_vote: bool, now: int) -> bool:
        if not pre_vote and self.voted_id != -1:
            return self.voted_id == candidate   # one vote per epoch
        return log_up_to_date

    def deadline(self, now: int, is_voter: bool) -> int | None:
        return self.election_deadline if is_voter else self.next_discovery_ms

    def request_expired(self, correlation_id: int, now: int) -> None:
        self.next_discovery_ms = now   # the voter asked did not answer: ask another at once

    def fetch_failed(self, now: int, config: RaftConfig) -> None:
        self.next_discovery_ms = now + config.election_timeout_ms // 4

    def stale_fetch_answered(self, now: int, config: RaftConfig) -> None:
        # an answer that named no leader
        self.next_discovery_ms = now + config.election_timeout_ms // 4


class CampaignState(EpochState):
    """A round of votes this node asks for: the pre-vote round (prospective) or the election
    itself (candidate). Counts the answers; the node decides what winning or losing means."""
    __slots__ = ("election_deadline", "granted", "rejected", "retries")
    pre_vote = False

    def __init__(self, epoch: int, leader_id: int, voted_id: int, election_deadline: int, self_id: int,
                 retries: int) -> None:
        super().__init__(epoch, leader_id, voted_id)
        self.election_deadline = election_deadline
        self.granted = {self_id}
        self.rejected: set[int] = set()
        self.retries = retries  # elections lost so far: the candidate's backoff grows with them

    def counts_votes(self) -> bool:
        return True

    def record_vote(self, voter: int, granted: bool) -> None:
        (self.granted if granted else self.rejected).add(voter)

    def won(self, majority: int) -> bool:
        return len(self.granted) >= majority

    def lost(self, voters: int, majority: int) -> bool:
        """So many voters refused that no majority can grant any more."""
        return len(self.rejected) > voters - majority

    def deadline(self, now: int, is_voter: bool) -> int | None:
        return self.election_deadline


class ProspectiveState(CampaignState):
    """KIP-996 pre-vote round: asks the voters whether they would vote for this node in the
    next epoch, without anyone bumping an epoch. Keeps the leader it may still know."""
    __slots__ = ()
    name = "prospective"
    pre_vote = True

    def __init__(self, epoch: int, leader_id: int, voted_id: int, election_deadline: int,
                 self_id: int, retries: int = 0) -> None:
        super().__init__(epoch, leader_id, voted_id, election_deadline, self_id, retries)

    def can_grant_vote(self, candidate: int, log_up_to_date: bool, pre_vote: bool, now: int) -> bool:
        if pre_vote:
            return log_up_to_date
        if self.voted_id != -1:
            return self.voted_id == candidate   # one vote per epoch
        return self.leader_id == NO_LEADER and log_up_to_date


class CandidateState(CampaignState):
    """Campaigning in a bumped epoch with a persisted vote for itself."""
    __slots__ = ("backoff_until",)
    name = "candidate"

    def __init__(self, epoch: int, self_id: int, election_deadline: int, retries: int) -> None:
        super().__init__(epoch, NO_LEADER, self_id, election_deadline, self_id, retries)
        self.backoff_until: int | None = None  # set once the election is lost

    def can_grant_vote(self, candidate: int, log_up_to_date: bool, pre_vote: bool, now: int) -> bool:
        if pre_vote:
            return log_up_to_date
        return candidate == self.voted_id   # it voted for itself

    def counts_votes(self) -> bool:
        return self.backoff_until is None   # a lost election counts no late answers

    def lose(self, now: int, backoff_ms: int) -> None:
        self.backoff_until = now + backoff_ms

    def deadline(self, now: int, is_voter: bool) -> int | None:
        return self.backoff_until if self.backoff_until is not None else self.election_deadline


class FollowerState(EpochState):
    """Fetching from a known leader. `fetch_deadline` is the fetch timeout; it moves on
    every successful fetch response. After an EndQuorumEpoch it becomes the successor
    backoff instead and `leader_resigned` is set."""
    __slots__ = ("fetch_deadline", "fetch_timeout_ms", "inflight_fetch", "next_fetch_ms", "leader_resigned",
                 "fetch_errors", "last_answer_ms")
    name = "follower"
    ends_election = True

    def __init__(self, epoch: int, leader_id: int, voted_id: int, now: int, fetch_timeout_ms: int) -> None:
        super().__init__(epoch, leader_id, voted_id)
        self.fetch_timeout_ms = fetch_timeout_ms
        self.fetch_deadline = now + fetch_timeout_ms
        self.inflight_fetch: int | None = None  # correlation id
        self.next_fetch_ms = 0
        self.leader_resigned = False
        self.fetch_errors = 0   # error answers in a row: the retry backoff doubles with each
        self.last_answer_ms: int | None = None   # the leader's last good answer to a fetch

    def can_grant_vote(self, candidate: int, log_up_to_date: bool, pre_vote: bool, now: int) -> bool:
        if pre_vote:
            # KIP-996: refuse while the leader answers, so that a node coming back from a
            # partition cannot depose a healthy leader
            return log_up_to_date and not self.leader_alive(now)
        if self.voted_id != -1:
            return self.voted_id == candidate   # one vote per epoch
        return False   # it follows this epoch's leader

    def leader_alive(self, now: int) -> bool:
        """Did the leader answer a fetch within the fetch timeout (and not resign since)?"""
        return (not self.leader_resigned and self.last_answer_ms is not None
                and now - self.last_answer_ms < self.fetch_timeout_ms)

    def follows(self, leader_id: int) -> bool:
        return self.leader_id == leader_id

    def keeps_requests_of(self, old: EpochState) -> bool:
        # a follower keeps what was asked in its epoch: its own fetch, an observer's discovery
        return old.epoch == self.epoch

    def fetch_timed_out(self, now: int) -> bool:
        return now >= self.fetch_deadline

    def fetch_due(self, now: int) -> bool:
        """No fetch in flight, the leader has not resigned, and the retry backoff is over."""
        return self.inflight_fetch is None and not self.leader_resigned and now >= self.next_fetch_ms

    def deadline(self, now: int, is_voter: bool) -> int | None:
        d = self.fetch_deadline
        if not is_voter and now >= d:
            d = None   # past its fetch timeout an observer only has fetches to (re)send
        if self.inflight_fetch is None and not self.leader_resigned and (d is None or self.next_fetch_ms < d):
            d = self.next_fetch_ms
        return d

    def leader_answered(self, now: int) -> None:
        """The leader answered a fetch: the fetch timeout starts again."""
        self.fetch_deadline = now + self.fetch_timeout_ms
        self.last_answer_ms = now
        self.leader_resigned = False

    def leader_resigning(self, now: int, successor_backoff_ms: int) -> None:
        """EndQuorumEpoch: the fetch timeout becomes the successor backoff."""
        self.leader_resigned = True
        self.fetch_deadline = now + successor_backoff_ms

    def successor_due(self, now: int) -> bool:
        return self.leader_resigned and self.fetch_deadline <= now

    def fetch_answered(self, correlation_id: int) -> bool:
        if self.inflight_fetch != correlation_id:
            return False
        self.inflight_fetch = None
        return True

    def request_expired(self, correlation_id: int, now: int) -> None:
        if self.inflight_fetch == correlation_id:
            self.inflight_fetch = None

    def fetch_failed(self, now: int, config: RaftConfig) -> None:
        # retry.backoff.ms doubling with every error answer in a row, up to
        # election.backoff.max.ms: a leader refusing every fetch is not asked 50 times a second
        self.fetch_errors += 1
        backoff = config.retry_backoff_ms << min(self.fetch_errors - 1, 16)
        self.next_fetch_ms = now + min(backoff, max(config.election_backoff_max_ms, config.retry_backoff_ms))


class ResignedState(EpochState):
    """A former leader of this epoch (graceful resignation, lost check quorum, or a restart
    whose stored state said leader). It must not vote for anyone else in this epoch. It still
    names itself as the leader of the epoch (as Kafka does) and sends EndQuorumEpoch to every
    other voter, again and again, until each has answered it."""
    __slots__ = ("election_deadline", "successors", "unacked", "next_end_ms")
    name = "resigned"

    def __init__(self, epoch: int, self_id: int, election_deadline: int,
                 successors: tuple[int, ...] = ()) -> None:
        super().__init__(epoch, self_id, self_id)
        self.election_deadline = election_deadline
        self.successors = successors
        self.unacked = set(successors)
        self.next_end_ms = {v: 0 for v in successors}   # earliest (re)send per voter

    def can_grant_vote(self, candidate: int, log_up_to_date: bool, pre_vote: bool, now: int) -> bool:
        if pre_vote:
            return log_up_to_date   # it leads no more: a successor may campaign
        return candidate == self.voted_id   # its vote in this epoch went to itself

    def deadline(self, now: int, is_voter: bool) -> int | None:
        return self.election_deadline

    def end_quorum_epoch_due(self, now: int, in_flight: set[int]) -> list[int]:
        """Voters to send EndQuorumEpoch now: not answered yet, none in flight, backoff over."""
        return [v for v in sorted(self.unacked) if v not in in_flight and now >= self.next_end_ms[v]]

    def next_end_quorum_epoch(self, in_flight: set[int]) -> int | None:
        """When the next EndQuorumEpoch is due to a voter with none in flight (None: no voter)."""
        return min((self.next_end_ms[v] for v in self.unacked if v not in in_flight), default=None)

    def end_quorum_epoch_answered(self, voter: int, ok: bool, now: int, retry_backoff_ms: int) -> None:
        if ok:
            self.unacked.discard(voter)
        else:
            self.next_end_ms[voter] = now + retry_backoff_ms
