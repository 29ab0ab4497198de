"""The leader's epoch state: per-replica progress (KIP-836), endorsements, check quorum and
the high-watermark rule."""
from __future__ import annotations

from dataclasses import dataclass

from quorum.raft.epoch_states import EpochState
from quorum.raft.messages import Message, DescribeQuorumReplica


class ReplicaProgress:
    """What the leader knows of one replica; -1 means unknown (KIP-836)."""
    __slots__ = ("replica_id", "end_offset", "last_fetch_timestamp", "last_fetch_leader_leo",
                 "last_caught_up_timestamp", "last_sent_high_watermark")

    def __init__(self, replica_id: int) -> None:
        self.replica_id = replica_id
        self.end_offset = -1
        self.last_fetch_timestamp = -1
        self.last_fetch_leader_leo = -1
        self.last_caught_up_timestamp = -1
        self.last_sent_high_watermark = -1

    def on_valid_fetch(self, fetch_offset: int, leader_leo: int, now: int) -> None:
        """The facts file's three steps, in that order."""
        if fetch_offset >= leader_leo:
            self.last_caught_up_timestamp = max(self.last_caught_up_timestamp, now)
        elif self.last_fetch_leader_leo > 0 and fetch_offset >= self.last_fetch_leader_leo:
            self.last_caught_up_timestamp = max(self.last_caught_up_timestamp, self.last_fetch_timestamp)
        self.last_fetch_leader_leo = leader_leo
        self.last_fetch_timestamp = max(self.last_fetch_timestamp, now)
        self.end_offset = fetch_offset

    def describe(self) -> DescribeQuorumReplica:
        return DescribeQuorumReplica(self.replica_id, self.end_offset, self.last_fetch_timestamp,
                            self.last_caught_up_timestamp)


@dataclass(slots=True)
class ParkedFetch:
    """A fetch with nothing new, held until data arrives, the high watermark moves or the
    long poll ends."""
    message: Message
    fetch_offset: int
    deadline: int


def high_watermark_candidate(voter_end_offsets: list[int]) -> int:
    """Sort the voters' end offsets from highest to lowest and take index len // 2:
    the largest offset a majority of voters has reached."""
    ordered = sorted(voter_end_offsets, reverse=True)
    return ordered[len(ordered) // 2]


class LeaderState(EpochState):
    __slots__ = ("epoch_start_offset", "voters", "self_id", "voter_progress", "observer_progress",
                 "endorsed", "granting_voters", "fetched_voters", "check_quorum_deadline",
                 "begin_resend_deadline", "last_append_ms", "idle_interval_ms", "parked")
    name = "leader"
    ends_election = True

    def __init__(self, epoch: int, self_id: int, voters: tuple[int, ...], epoch_start_offset: int,
                 granting_voters: tuple[int, ...], now: int, check_quorum_timeout_ms: int,
                 begin_resend_ms: int, idle_interval_ms: int = 0) -> None:
        super().__init__(epoch, self_id, self_id)
        self.self_id = self_id
        self.voters = voters
        self.epoch_start_offset = epoch_start_offset
        self.granting_voters = granting_voters
        self.voter_progress = {v: ReplicaProgress(v) for v in voters if v != self_id}
        self.observer_progress: dict[int, ReplicaProgress] = {}
        self.endorsed = {self_id}
        self.fetched_voters = {self_id}   # voters heard from in the current check-quorum window
        self.check_quorum_deadline = now + check_quorum_timeout_ms
        self.begin_resend_deadline = now + begin_resend_ms
        self.last_append_ms = now
        self.idle_interval_ms = idle_interval_ms   # a NoOp record after this long without appends (0: never)
        self.parked: dict[int, ParkedFetch] = {}

    def current_state(self, is_voter: bool) -> str:
        return self.name

    def can_grant_vote(self, candidate: int, log_up_to_date: bool, pre_vote: bool, now: int) -> bool:
        if pre_vote:
            return False   # it leads this epoch: nobody needs to campaign
        return candidate == self.voted_id   # its vote in this epoch went to itself

    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def unknown_voter_connections(self) -> int:
        """Voters that have not fetched in this epoch yet."""
        return sum(1 for p in self.voter_progress.values() if p.last_fetch_timestamp < 0)

    def known_progress(self, replica_id: int) -> ReplicaProgress | None:
        """The replica's state if it is a voter or an observer seen in this term; None otherwise
        (unlike `progress_of`, an unknown replica gets no entry)."""
        p = self.voter_progress.get(replica_id)
        return p if p is not None else self.observer_progress.get(replica_id)

    def progress_of(self, replica_id: int) -> ReplicaProgress:
        """The replica's state; an unknown replica is taken as a new observer."""
        p = self.known_progress(replica_id)
        if p is None:
            p = self.observer_progress[replica_id] = ReplicaProgress(replica_id)
        return p

    def unendorsed_voters(self) -> list[int]:
        return [v for v in self.voters if v not in self.endorsed]

    def note_voter_fetch(self, replica_id: int, now: int, check_quorum_timeout_ms: int) -> None:
        """A fetch at this epoch endorses the leader and counts for check quorum."""
        self.endorsed.add(replica_id)
        self.fetched_voters.add(replica_id)
        if len(self.fetched_voters) >= self.majority():
            self.fetched_voters = {self.self_id}
            self.check_quorum_deadline = now + check_quorum_timeout_ms

    def noop_due(self, now: int) -> bool:
        return self.idle_interval_ms > 0 and now >= self.last_append_ms + self.idle_interval_ms

    def check_quorum_lost(self, now: int) -> bool:
        """No fetches from a majority within the window; never with a single voter."""
        return len(self.voters) > 1 and now >= self.check_quorum_deadline

    def high_watermark_candidate(self, own_end_offset: int) -> int:
        offsets = [own_end_offset if v == self.self_id else self.voter_progress[v].end_offset
                   for v in self.voters]
        return high_watermark_candidate(offsets)

    def preferred_successors(self) -> tuple[int, ...]:
        """Other voters by replicated offset, highest first (ties by id)."""
        others = sorted(self.voter_progress.values(), key=lambda p: (-p.end_offset, p.replica_id))
        return tuple(p.replica_id for p in others)

    def expire_observers(self, now: int, expiry_ms: int) -> None:
        gone = [r for r, p in self.observer_progress.items() if now - p.last_fetch_timestamp >= expiry_ms]
        for r in gone:
            del self.observer_progress[r]

    def describe_replicas(self, now: int, own_end_offset: int) -> tuple[tuple[DescribeQuorumReplica, ...],
                                                                       tuple[DescribeQuorumReplica, ...]]:
        """Voters (the leader reports itself with `now` for both timestamps) and observers."""
        voters = tuple(DescribeQuorumReplica(v, own_end_offset, now, now) if v == self.self_id
                       else self.voter_progress[v].describe() for v in self.voters)
        observers = tuple(p.describe() for _, p in sorted(self.observer_progress.items()))
        return voters, observers

    def deadline(self, now: int, is_voter: bool) -> int | None:
        d = min(self.check_quorum_deadline, self.begin_resend_deadline) if len(self.voters) > 1 \
            else self.begin_resend_deadline
        for pf in self.parked.values():
            if pf.deadline < d:
                d = pf.deadline
        if self.idle_interval_ms > 0 and self.last_append_ms + self.idle_interval_ms < d:
            d = self.last_append_ms + self.idle_interval_ms
        return d
