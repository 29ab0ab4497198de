"""What each state does when its timers fire, and when the next one does. The state answers
the questions of time (`deadline`, a follower's `fetch_due`, a leader's `noop_due`); the
timers act on them: campaign, fetch, resend, resign."""
from __future__ import annotations

from dataclasses import dataclass

from quorum.raft import kafka_records
from quorum.raft.config import RaftConfig
from quorum.raft.epoch_states import (CandidateState, FollowerState, ProspectiveState, ResignedState,
                                      UnattachedState)
from quorum.raft.fetch_answers import FetchAnswers
from quorum.raft.fetch_follower import FollowerFetches
from quorum.raft.identity import NodeIdentity
from quorum.raft.leader_appends import LeaderAppends
from quorum.raft.leader_state import LeaderState
from quorum.raft.log import NOOP
from quorum.raft.node_state import NodeState
from quorum.raft.outbox import Outbox
from quorum.raft.quorum_epoch import EpochAnnouncements
from quorum.raft.step import Step
from quorum.raft.transitions import Transitions


@dataclass(eq=False)
class StateTimers:
    """A tick dispatches on the state's class."""
    identity: NodeIdentity
    config: RaftConfig
    node: NodeState
    step: Step
    outbox: Outbox
    transitions: Transitions
    fetches: FollowerFetches
    announcements: EpochAnnouncements
    appends: LeaderAppends
    answers: FetchAnswers

    def __post_init__(self) -> None:
        self._ticks = {UnattachedState: self._tick_unattached, ProspectiveState: self._tick_prospective,
                       CandidateState: self._tick_candidate, FollowerState: self.tick_follower,
                       LeaderState: self._tick_leader, ResignedState: self._tick_resigned}

    def next_deadline(self) -> int:
        """When `tick` must next be called."""
        st = self.node.state
        now = self.step.now
        d = st.deadline(now, self.identity.is_voter)
        if isinstance(st, ResignedState):   # its resends wait for the answers in flight (the requests')
            end = st.next_end_quorum_epoch(self.announcements.end_in_flight())
            if end is not None and end < d:
                d = end
        d = self.outbox.earliest_deadline(d)
        return d if d is not None else now + self.config.request_timeout_ms

    def tick(self) -> None:
        self.outbox.expire()
        st = self.node.state
        self._ticks[type(st)](st)

    # --- a tick per state ----------------------------------------------------------------------

    def _tick_unattached(self, st: UnattachedState) -> None:
        now = self.step.now
        if not self.identity.is_voter:
            if now >= st.next_discovery_ms:
                self.fetches.send_discovery(st)
            return
        if st.election_deadline is not None and now >= st.election_deadline:
            self.transitions.start_pre_vote("election timeout")

    def _tick_prospective(self, st: ProspectiveState) -> None:
        # Kafka: a pre-vote round that times out goes back to the leader it knew (and fetches)
        # or to unattached; campaigning again forever starved a voter that could still fetch.
        if self.step.now >= st.election_deadline:
            self.transitions.prospective_done(st, "pre-vote timed out")

    def _tick_candidate(self, st: CandidateState) -> None:
        now = self.step.now
        if st.backoff_until is not None:
            if now >= st.backoff_until:
                self.transitions.start_pre_vote("election lost, backoff over")
        elif now >= st.election_deadline:
            self.transitions.start_pre_vote("election timed out")

    def tick_follower(self, st: FollowerState) -> None:
        now = self.step.now
        if st.fetch_timed_out(now):
            if not self.identity.is_voter:
                if st.fetch_due(now):
                    self.fetches.send_to_any_voter(st)
            elif st.leader_resigned:
                self.transitions.become_candidate("successor of a resigned leader")
            else:
                self.transitions.start_pre_vote("fetch timeout")
        elif st.fetch_due(now):
            self.fetches.send(st)

    def _tick_leader(self, st: LeaderState) -> None:
        now = self.step.now
        if st.check_quorum_lost(now):
            self.transitions.resign(st, "check quorum: no fetches from a majority")
            return
        if now >= st.begin_resend_deadline:
            for v in st.unendorsed_voters():
                self.announcements.send_begin(st, v)
            st.begin_resend_deadline = now + self.config.begin_quorum_epoch_resend_ms
        if st.noop_due(now):
            self.appends.append(st, [(kafka_records.NOOP_RECORD, NOOP)])
        self.answers.complete_held(st, only_expired=True)
        st.expire_observers(now, self.config.observer_expiry_ms)

    def _tick_resigned(self, st: ResignedState) -> None:
        if self.step.now >= st.election_deadline:
            # Kafka 4.x: leave for the next epoch, so that no answer of ours can name this node
            # as the leader any more; the election timer of that state starts a campaign.
            self.transitions.become_unattached(st.epoch + 1, "resigned, election timeout")
            return
        self.announcements.send_ends(st)
