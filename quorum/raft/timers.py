"""What each state does when its timers fire, and when the next one does, as part of
`RaftNode` (node.py). The state answers the questions of time (`deadline`, a follower's
`fetch_due`, a leader's `noop_due`); the node acts on them: campaigns, fetches, resends,
resigns."""
from __future__ import annotations

from quorum.raft import kafka_records
from quorum.raft.epoch_states import (CandidateState, FollowerState, ProspectiveState, ResignedState,
                                      UnattachedState)
from quorum.raft.leader_state import LeaderState
from quorum.raft.log import NOOP


class StateTimers:
    """RaftNode's timers, mixed into it: `self` is the node. A tick dispatches on the state's
    class (`_TICKS`)."""

    def next_deadline(self) -> int:
        """When `tick` must next be called."""
        st = self.state
        d = st.deadline(self._now, self.is_voter)
        if isinstance(st, ResignedState):   # its resends wait for the answers in flight (the requests')
            end = st.next_end_quorum_epoch(self._end_in_flight())
            if end is not None and end < d:
                d = end
        for p in self._pending.values():
            if d is None or p.deadline < d:
                d = p.deadline
        return d if d is not None else self._now + self.config.request_timeout_ms

    # --- a tick per state ----------------------------------------------------------------------

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
