"""One class per epoch state a node can be in (Kafka's raft/ module shape).

Each state knows its epoch, the leader it knows (-1 none), the vote it cast in this
epoch (-1 none), the timers it runs, and the `ElectionState` it stands for on disk.
The transitions between them live in `RaftNode` (node.py); the table there is the
reference. Leaders have their own file (leader_state.py) because they track replicas.
"""
from __future__ import annotations

from quorum.raft.messages import NO_LEADER
from quorum.raft.quorum_state_store import ElectionState


class EpochState:
    __slots__ = ("epoch", "leader_id", "voted_id")
    name = "?"

    def __init__(self, epoch: int, leader_id: int = NO_LEADER, voted_id: int = -1) -> None:
        self.epoch = epoch
        self.leader_id = leader_id
        self.voted_id = voted_id

    def election_state(self, voters: tuple[int, ...]) -> ElectionState:
        return ElectionState(self.epoch, self.leader_id, self.voted_id, voters)

    def deadline(self) -> int | None:
        """The earliest time this state's own timers need a tick (None: no timer)."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(epoch={self.epoch}, leader={self.leader_id}, voted={self.voted_id})"


class UnattachedState(EpochState):
    """No leader known in this epoch; maybe a vote cast. A voter campaigns when the
    election timer expires; an observer looks for the leader by asking voters."""
    __slots__ = ("election_deadline", "next_discovery_ms")
    name = "unattached"

    def __init__(self, epoch: int, voted_id: int, election_deadline: int | None) -> None:
        super().__init__(epoch, NO_LEADER, voted_id)
        self.election_deadline = election_deadline
        self.next_discovery_ms = 0

    def deadline(self) -> int | None:
        return self.election_deadline


class ProspectiveState(EpochState):
    """KIP-996 pre-vote round: asks the voters whether they would vote for this node in the
    next epoch, without anyone bumping an epoch. Keeps the leader it may still know."""
    __slots__ = ("election_deadline", "granted", "rejected", "retries")
    name = "prospective"

    def __init__(self, epoch: int, leader_id: int, voted_id: int, election_deadline: int,
                 self_id: int, retries: int = 0) -> None:
        super().__init__(epoch, leader_id, voted_id)
        self.election_deadline = election_deadline
        self.granted = {self_id}
        self.rejected: set[int] = set()
        self.retries = retries  # elections lost so far: the candidate's backoff grows with them

    def deadline(self) -> int | None:
        return self.election_deadline


class CandidateState(EpochState):
    """Campaigning in a bumped epoch with a persisted vote for itself."""
    __slots__ = ("election_deadline", "granted", "rejected", "backoff_until", "retries")
    name = "candidate"

    def __init__(self, epoch: int, self_id: int, election_deadline: int, retries: int) -> None:
        super().__init__(epoch, NO_LEADER, self_id)
        self.election_deadline = election_deadline
        self.granted = {self_id}
        self.rejected: set[int] = set()
        self.backoff_until: int | None = None  # set once the election is lost
        self.retries = retries

    def deadline(self) -> int | None:
        return self.backoff_until if self.backoff_until is not None else self.election_deadline


class FollowerState(EpochState):
    """Fetching from a known leader. `fetch_deadline` is the fetch timeout; it moves on
    every successful fetch response. After an EndQuorumEpoch it becomes the successor
    backoff instead and `leader_resigned` is set."""
    __slots__ = ("fetch_deadline", "inflight_fetch", "next_fetch_ms", "leader_resigned", "fetch_errors")
    name = "follower"

    def __init__(self, epoch: int, leader_id: int, voted_id: int, fetch_deadline: int) -> None:
        super().__init__(epoch, leader_id, voted_id)
        self.fetch_deadline = fetch_deadline
        self.inflight_fetch: int | None = None  # correlation id
        self.next_fetch_ms = 0
        self.leader_resigned = False
        self.fetch_errors = 0   # error answers in a row: the retry backoff doubles with each

    def deadline(self) -> int | None:
        return self.fetch_deadline


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

    def deadline(self) -> int | None:
        return self.election_deadline
