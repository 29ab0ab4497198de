"""A leader's own appends and the high watermark they and its followers' fetches move: a
record is committed once a majority of voters holds it, and held fetches learn of it."""
from __future__ import annotations

from dataclasses import dataclass, field

from collections import deque

from quorum.raft.fetch_answers import FetchAnswers
from quorum.raft.leader_state import LeaderState
from quorum.raft.log import LogRecord, ReplicatedLog
from quorum.raft.metrics import MetricsTracker
from quorum.raft.node_state import NodeState
from quorum.raft.step import Step


@dataclass(eq=False)
class LeaderAppends:
    log: ReplicatedLog
    node: NodeState
    step: Step
    metrics: MetricsTracker
    answers: FetchAnswers
    commit_waits: deque[tuple[int, int]] = field(default_factory=deque, init=False)  # (end offset, append time)

    def append(self, st: LeaderState, items: list[tuple[bytes, str]]) -> None:
        now = self.step.now
        out = self.step.out
        base = self.log.end_offset()
        records = [LogRecord(base + i, st.epoch, value, now, kind) for i, (value, kind) in enumerate(items)]
        self.log.append(records)
        out.appended.extend(records)
        out.flush_log = True
        st.last_append_ms = now
        self.commit_waits.append((base + len(records), now))
        self.metrics.append_records.record(len(records), now)
        self.maybe_advance_high_watermark(st)   # a single voter commits at once
        self.answers.complete_held(st)

    def maybe_advance_high_watermark(self, st: LeaderState) -> None:
        candidate = st.high_watermark_candidate(self.log.end_offset())
        if candidate > st.epoch_start_offset and candidate > self.node.high_watermark:
            self.node.high_watermark = candidate
            now = self.step.now
            waits = self.commit_waits
            while waits and waits[0][0] <= candidate:
                self.metrics.commit_latency.record(now - waits.popleft()[1], now)
            self.answers.complete_held(st)
