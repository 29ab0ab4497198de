"""Fetch (1) as a node asks it, as part of `RaftNode` (node.py).

A follower fetches from its leader; an observer past its fetch timeout asks any voter, and
one without a leader asks a random voter, whose answer names the leader (discovery). An
answer's data is appended, or the log truncated to a DivergingEpoch (never below the high
watermark), and the high watermark follows the leader's; an error answer waits a backoff
(the state's `fetch_failed`).
"""
from __future__ import annotations

from quorum.raft.epoch_states import FollowerState, UnattachedState
from quorum.raft.errors import SafetyError
from quorum.raft.messages import (Errors, FetchPartition, FetchPartitionData, FetchRequest, FetchResponse,
                                  FetchTopic, Message)


class FetchFollower:
    """RaftNode's own fetches and what their answers change, mixed into it: `self` is the node."""

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
