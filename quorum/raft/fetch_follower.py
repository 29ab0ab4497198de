"""Fetch (1) as a node asks it.

A follower fetches from its leader; an observer past its fetch timeout asks any voter, and
one without a leader asks a random voter, whose answer names the leader (discovery). An
answer's data is appended, or the log truncated to a DivergingEpoch (never below the high
watermark), and the high watermark follows the leader's; an error answer waits a backoff
(the state's `fetch_failed`).

`FollowerFetches` sends the requests (the transitions and the timers call it);
`FetchResponseHandler` reads their answers.
"""
from __future__ import annotations

from dataclasses import dataclass

import random

from quorum.raft.config import RaftConfig
from quorum.raft.epoch_states import FollowerState, UnattachedState
from quorum.raft.errors import SafetyError
from quorum.raft.identity import NodeIdentity
from quorum.raft.log import ReplicatedLog
from quorum.raft.messages import (Errors, FetchPartition, FetchPartitionData, FetchRequest, FetchResponse,
                                  FetchTopic, Message)
from quorum.raft.metrics import MetricsTracker
from quorum.raft.node_state import NodeState
from quorum.raft.outbox import Outbox
from quorum.raft.step import Step

FETCH_KINDS = ("fetch", "discovery")


@dataclass(eq=False)
class FollowerFetches:
    """A follower's fetches from its leader (or any voter), and an observer's discovery."""
    identity: NodeIdentity
    config: RaftConfig
    rng: random.Random
    log: ReplicatedLog
    step: Step
    outbox: Outbox

    def send(self, st: FollowerState, target: int | None = None) -> None:
        me = self.identity
        part = FetchPartition(me.partition, st.epoch, self.log.end_offset(), self.log.last_epoch())
        body = FetchRequest(me.cluster_id, me.node_id, self.config.fetch_max_wait_ms,
                            (FetchTopic(me.topic, (part,)),))
        st.inflight_fetch = self.outbox.ask(st.leader_id if target is None else target, body, "fetch")

    def send_to_any_voter(self, st: FollowerState) -> None:
        # Kafka: an observer keeps the leader it knows and asks any voter instead; an answer
        # naming a newer leader moves it on.
        voters = self.identity.voters
        self.send(st, voters[self.rng.randrange(len(voters))])

    def send_discovery(self, st: UnattachedState) -> None:
        """An observer without a leader asks a random voter, whose answer names the leader."""
        me = self.identity
        others = me.other_voters()
        if not others:
            return
        target = others[self.rng.randrange(len(others))]
        part = FetchPartition(me.partition, st.epoch, self.log.end_offset(), self.log.last_epoch())
        body = FetchRequest(me.cluster_id, me.node_id, 0, (FetchTopic(me.topic, (part,)),))
        self.outbox.ask(target, body, "discovery")
        st.next_discovery_ms = self.step.now + self.config.request_timeout_ms


@dataclass(eq=False)
class FetchResponseHandler:
    """What the answer to one of this node's fetches changes."""
    identity: NodeIdentity
    config: RaftConfig
    log: ReplicatedLog
    node: NodeState
    step: Step
    outbox: Outbox
    metrics: MetricsTracker
    fetches: FollowerFetches
    transitions: object        # transitions.Transitions (it imports this module, so not imported here)

    def handle_response(self, message: Message, resp: FetchResponse) -> None:
        p = self.outbox.take(message, FETCH_KINDS)
        if p is None:
            return
        st = self.node.state
        now = self.step.now
        is_current = st.fetch_answered(message.correlation_id)
        part = self.identity.our_partition(resp.responses, "topic")
        if resp.error_code != Errors.NONE or part is None:
            st.fetch_failed(now, self.config)
            return
        leader = part.current_leader
        if self.transitions.learn_from_response(leader.leader_id, leader.leader_epoch):
            return
        if not is_current or p.state is not st:
            st.stale_fetch_answered(now, self.config)
            return
        if part.error_code != Errors.NONE:
            st.fetch_failed(now, self.config)
            return
        self._take_data(st, part)

    def _take_data(self, st: FollowerState, part: FetchPartitionData) -> None:
        now = self.step.now
        out = self.step.out
        st.leader_answered(now)
        log = self.log
        if part.snapshot_id is not None:
            # A Kafka leader whose log now starts above ours offers its snapshot instead.
            # FetchSnapshot is not implemented: say so, and ask again only at the backoff's pace.
            s = part.snapshot_id
            out.cannot_follow = (
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
            if target < self.node.high_watermark:
                raise SafetyError(f"node {self.identity.node_id}: leader {st.leader_id} asked to truncate to "
                                  f"{target}, below the high watermark {self.node.high_watermark}")
            log.truncate_to(target)
            out.truncated_to = target
        else:
            records = part.records
            if records and records[0].offset == log.end_offset():
                log.append(records)
                out.appended.extend(records)
                out.flush_log = True
                self.metrics.fetch_records.record(len(records), now)
            hw = min(part.high_watermark, log.end_offset())
            if hw > self.node.high_watermark:
                self.node.high_watermark = hw
        self.fetches.send(st)
