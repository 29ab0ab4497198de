"""Fetch (1) as a node answers it, as part of `RaftNode` (node.py).

Every node answers a fetch, in Kafka's order of checks (cluster id, then epoch, then
leadership); only the leader serves one. It answers a log it cannot continue with a
DivergingEpoch, records the replica's progress (KIP-836) from a valid fetch, moves the high
watermark when a majority of voters holds more, and holds a fetch with nothing new until
data arrives, the high watermark moves or the long poll ends. The leader's own appends live
here too: they move the same high watermark and complete the same held fetches.
"""
from __future__ import annotations

from quorum.raft.leader_state import LeaderState, ParkedFetch
from quorum.raft.log import LogRecord
from quorum.raft.messages import (EpochEndOffset, Errors, FetchableTopicResponse, FetchPartition,
                                  FetchPartitionData, FetchRequest, FetchResponse, LeaderIdAndEpoch, Message)
from quorum.raft.observations import FetchObservation


class FetchLeader:
    """RaftNode's answers to Fetch requests and the leader's appends, mixed into it: `self` is
    the node."""

    # --- answering -----------------------------------------------------------------------------

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

    def _fetch_response(self, message: Message, error: int, hw: int = -1, diverging: EpochEndOffset | None = None,
                        records: tuple = (), top_error: int = Errors.NONE) -> None:
        st = self.state
        parts = ()
        if top_error == Errors.NONE:
            parts = (FetchableTopicResponse(self.topic, (FetchPartitionData(
                self.partition, error, hw, LeaderIdAndEpoch(self._known_leader(), st.epoch), diverging,
                records),)),)
        self._send(message.source, FetchResponse(top_error, parts), correlation_id=message.correlation_id)

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

    # --- held fetches and the high watermark ---------------------------------------------------

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
