"""The health families: a series per quorum and per replica of the health snapshot, their names
and help (the agreed contract: docs/metrics.md). Built fresh from the
views given, so a replica or quorum gone from the snapshot is gone from the output. Unknown
values (a replica that never fetched has no lag time) are NaN. Read by the library's collector
(prometheus_metrics) and by the kept text a scrape serves (exposition_cache)."""
from __future__ import annotations

import math
from typing import Any, Callable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from streaming.health.statuses import CAUSES, QUORUM_STATUSES, REPLICA_STATUSES

from .snapshot import QuorumView

NAN = math.nan
REPLICA_LABELS = ["cluster", "partition", "replica", "role"]
QUORUM_LABELS = ["cluster", "partition"]


def value_or_nan(value: Any, scale: float = 1.0) -> float:
    """A series' value: NaN for a value not known."""
    return NAN if value is None else float(value) * scale


def _partition_label(row: dict[str, Any]) -> str:
    return f"{row['topic']}-{row['partition']}"


def _cut_off_count(q: dict[str, Any]) -> int:
    return len([v for v in (q.get("cut_off_voters") or "").split(",") if v])


# (name, help, the value from a quorum's health row)
QUORUM_GAUGES: tuple[tuple[str, str, Callable[[dict[str, Any]], Any]], ...] = (
    ("quorum_leader_id", "Current leader node id (-1 none).", lambda q: q["leader_id"]),
    ("quorum_leader_epoch", "Highest leader epoch seen.", lambda q: q["leader_epoch"]),
    ("quorum_high_watermark", "Highest high watermark seen.", lambda q: q["high_watermark"]),
    ("quorum_high_watermark_age_seconds", "Time since the high watermark last advanced.",
     lambda q: value_or_nan(q["hw_age_ms"], 1e-3)),
    ("quorum_voters", "Voter count.", lambda q: q["voters"]),
    ("quorum_voters_caught_up", "Voters caught up (leader included).", lambda q: q["voters_caught_up"]),
    ("quorum_voters_reachable", "Voters fetching or leading.", lambda q: q["voters_reachable"]),
    ("quorum_majority_reachable", "1 when a majority of voters is reachable.",
     lambda q: 1 if q["majority_reachable"] else 0),
    ("quorum_epoch_changes_window", "Epoch adoptions within the storm window.", lambda q: q["epoch_changes_window"]),
    ("quorum_leader_changes_window", "New leaders within the storm window (the election storm rule).",
     lambda q: q["leader_changes_window"]),
    ("quorum_candidate_epoch", "Highest epoch voters campaign for above the current one (-1 none).",
     lambda q: q["candidate_epoch"]),
    ("quorum_network_partition", "1 when voters are alive but cut off from the leader (or it from all).",
     lambda q: 1 if q.get("network_partition") else 0),
    ("quorum_voters_cut_off", "Voters alive but not reaching the leader.", _cut_off_count),
    ("quorum_leaders_claimed", "Nodes claiming leadership in the current epoch.", lambda q: q["leaders_claimed"]),
    ("quorum_zombie_leaders", "Nodes claiming leadership of an older epoch, still talking.",
     lambda q: q["zombie_leaders"]),
    ("quorum_fault_tolerance", "Voters that may still fail before the majority is lost (negative: lost; "
                               "NaN while a voter is unknown).", lambda q: q.get("fault_tolerance")),
    ("quorum_collector_poll_failures", "The collector's failed DescribeQuorum polls in a row (NaN: no collector).",
     lambda q: q.get("poll_failures")),
)
# (name, help, the quorum row's column)
QUORUM_COUNTERS = (
    ("quorum_elections", "Epoch bumps seen (a failover with split votes counts each).", "elections_total"),
    ("quorum_leader_changes", "New leaders seen (the first one excepted).", "leader_changes_total"),
    ("quorum_incarnations", "Times the cluster was seen formatted anew under the same id.", "incarnation"),
    ("quorum_voter_set_changes", "Changes of the voter set in force.", "voter_set_changes_total"),
)
# (name, help, the replica row's column, its scale)
REPLICA_GAUGES = (
    ("quorum_replica_lag_records", "Leader log end offset minus the replica's log end offset.", "lag_records", 1.0),
    ("quorum_replica_lag_seconds", "Leader clock now minus the replica's last caught-up time (KIP-836).", "lag_ms",
     1e-3),
    ("quorum_replica_last_fetch_age_seconds", "Time since the replica's last valid fetch.", "last_fetch_age_ms", 1e-3),
    ("quorum_replica_caught_up_ratio", "Fraction of the observed horizon the replica spent caught up.",
     "caught_up_ratio", 1.0),
)
REPLICA_COUNTERS = (
    ("quorum_replica_truncations", "Truncation events seen (log end offset went backwards).", "truncations_total"),
    ("quorum_replica_truncated_records", "Records lost from uncommitted tails by truncation.",
     "truncated_records_total"),
)


def health_families(views: list[QuorumView]) -> list[Metric]:
    """Per-replica and per-quorum families for the given quorums."""
    replica_gauges = [GaugeMetricFamily(name, doc, labels=REPLICA_LABELS) for name, doc, _, _ in REPLICA_GAUGES]
    replica_counters = [CounterMetricFamily(name, doc, labels=REPLICA_LABELS) for name, doc, _ in REPLICA_COUNTERS]
    replica_status = GaugeMetricFamily("quorum_replica_status", "Replica status as a state set (1 = current).",
                                       labels=REPLICA_LABELS + ["status"])
    replica_cause = GaugeMetricFamily("quorum_replica_cause", "Why the replica is not caught up, as a state set "
                                      "(all 0 while it is caught up).", labels=REPLICA_LABELS + ["cause"])
    quorum_gauges = [GaugeMetricFamily(name, doc, labels=QUORUM_LABELS) for name, doc, _ in QUORUM_GAUGES]
    quorum_counters = [CounterMetricFamily(name, doc, labels=QUORUM_LABELS) for name, doc, _ in QUORUM_COUNTERS]
    quorum_status = GaugeMetricFamily("quorum_status", "Quorum status as a state set (1 = current).",
                                      labels=QUORUM_LABELS + ["status"])
    # Not a state set: the error names are the collector's, known only when they occur (a
    # handful: Kafka's error names and the client's failures), so only the current one is a series.
    poll_error = GaugeMetricFamily("quorum_collector_poll_error", "The collector's current error while its "
                                   "DescribeQuorum polls fail (1; no series while they answer).",
                                   labels=QUORUM_LABELS + ["error"])
    for view in views:
        qr = view.quorum
        ql = [qr["cluster_id"], _partition_label(qr)]
        for family, (_, _, value) in zip(quorum_gauges, QUORUM_GAUGES):
            family.add_metric(ql, value_or_nan(value(qr)))
        if qr.get("poll_error") is not None:
            poll_error.add_metric(ql + [qr["poll_error"]], 1.0)
        for family, (_, _, column) in zip(quorum_counters, QUORUM_COUNTERS):
            family.add_metric(ql, value_or_nan(qr[column]))
        for status in QUORUM_STATUSES:
            quorum_status.add_metric(ql + [status], 1.0 if qr["status"] == status else 0.0)
        for rid, rr in sorted(view.replicas.items()):
            rl = ql + [str(rid), rr["role"]]
            for family, (_, _, column, scale) in zip(replica_gauges, REPLICA_GAUGES):
                family.add_metric(rl, value_or_nan(rr[column], scale))
            for family, (_, _, column) in zip(replica_counters, REPLICA_COUNTERS):
                family.add_metric(rl, value_or_nan(rr[column]))
            for status in REPLICA_STATUSES:
                replica_status.add_metric(rl + [status], 1.0 if rr["status"] == status else 0.0)
            for cause in CAUSES:
                replica_cause.add_metric(rl + [cause], 1.0 if rr.get("cause") == cause else 0.0)
    return [*replica_gauges, *replica_counters, replica_status, replica_cause, *quorum_gauges, *quorum_counters,
            quorum_status, poll_error]
