"""The records one poll of a watched cluster gives (the event contract's `quorum_snapshot` and
`quorum_poll_error`): exactly one per poll, so a leaderless or unreachable quorum is seen as one,
never as silence."""
from __future__ import annotations

import dataclasses
from typing import Any

from quorum import events
from quorum.kafka_watch.poll_outcome import PollOutcome
from quorum.kafka_watch.quorum_info import QuorumInfo, quorum_info


def snapshot(result: dict[str, Any], cluster_id: str, source: str, now_ms: int,
             topic: str = "__cluster_metadata", partition: int = 0, *, poll_interval_ms: int = -1,
             latency_ms: int = -1, answered_by: int = -1) -> events.QuorumSnapshot:
    """The QuorumSnapshot record of one DescribeQuorum answer (admin result or raw to_dict())."""
    return snapshot_of(quorum_info(result, topic, partition), cluster_id, source, now_ms, topic, partition,
                       poll_interval_ms=poll_interval_ms, latency_ms=latency_ms, answered_by=answered_by)


def snapshot_of(info: QuorumInfo, cluster_id: str, source: str, now_ms: int, topic: str = "__cluster_metadata",
                partition: int = 0, *, poll_interval_ms: int = -1, latency_ms: int = -1,
                answered_by: int = -1) -> events.QuorumSnapshot:
    def rs(r) -> events.SnapshotReplica:
        return events.SnapshotReplica(r.replica_id, r.log_end_offset, r.last_fetch_timestamp,
                                   r.last_caught_up_timestamp, r.directory_id)
    return events.QuorumSnapshot(cluster_id=cluster_id, topic=topic, partition=partition, time_ms=now_ms,
                                 leader_id=info.leader_id, leader_epoch=max(info.leader_epoch, 0),
                                 high_watermark=info.high_watermark, voters=tuple(rs(v) for v in info.voters),
                                 observers=tuple(rs(o) for o in info.observers), source=source,
                                 poll_interval_ms=poll_interval_ms, latency_ms=max(latency_ms, -1),
                                 answered_by=max(answered_by, -1))


def record_of(outcome: PollOutcome, cluster_id: str, source: str, now_ms: int, interval_ms: int,
              topic: str = "__cluster_metadata", partition: int = 0, refused_nodes: list[int] | None = None
              ) -> events.Record:
    """The one record of one poll; `refused_nodes`: nodes whose metrics endpoint refused the
    connection during it."""
    refused = tuple(sorted(refused_nodes or ()))
    if outcome.info is not None:
        snap = snapshot_of(outcome.info, cluster_id, source, now_ms, topic, partition, poll_interval_ms=interval_ms,
                           latency_ms=outcome.latency_ms, answered_by=outcome.answered_by)
        return dataclasses.replace(snap, refused_nodes=refused)
    return events.QuorumPollError(cluster_id=cluster_id, topic=topic, partition=partition, time_ms=now_ms,
                                  source=source, poll_interval_ms=interval_ms, latency_ms=max(outcome.latency_ms, 0),
                                  error_code=max(outcome.error_code, -1), error=outcome.error or "client_error",
                                  answered_by=max(outcome.answered_by, -1), leader_id=max(outcome.leader_id, -1),
                                  leader_epoch=max(outcome.leader_epoch, -1), refused_nodes=refused)


