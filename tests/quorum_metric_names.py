"""The metric names the streaming job exports (the agreed contract, documented in docs/metrics.md).
Rules and dashboard panels may only use these, so a rename on either side fails a test."""

REPLICA_METRICS = {
    "quorum_replica_lag_records", "quorum_replica_lag_seconds", "quorum_replica_last_fetch_age_seconds",
    "quorum_replica_caught_up_ratio", "quorum_replica_status", "quorum_replica_truncations_total",
    "quorum_replica_truncated_records_total", "quorum_replica_cause",
}
QUORUM_METRICS = {
    "quorum_leader_id", "quorum_leader_epoch", "quorum_high_watermark", "quorum_high_watermark_age_seconds",
    "quorum_voters", "quorum_voters_caught_up", "quorum_voters_reachable", "quorum_majority_reachable",
    "quorum_elections_total", "quorum_epoch_changes_window", "quorum_leaders_claimed",
    "quorum_zombie_leaders", "quorum_status", "quorum_leader_changes_total", "quorum_leader_changes_window",
    "quorum_candidate_epoch", "quorum_incarnations_total", "quorum_voter_set_changes_total",
    "quorum_network_partition", "quorum_voters_cut_off", "quorum_fault_tolerance",
    "quorum_collector_poll_failures", "quorum_collector_poll_error",
}
MONITOR_METRICS = {
    "quorum_monitor_input_records_total", "quorum_monitor_invalid_records_total",
    "quorum_monitor_batch_duration_seconds", "quorum_monitor_input_delay_seconds",
    "quorum_monitor_last_batch_timestamp_seconds", "quorum_monitor_input_stalled",
    "quorum_monitor_push_failures_total", "quorum_monitor_sink_failures_total",
    "quorum_monitor_health_events_pending", "quorum_monitor_health_events_dropped_total",
}
ALL_METRICS = REPLICA_METRICS | QUORUM_METRICS | MONITOR_METRICS
REPLICA_STATUSES = ("caught_up", "lagging", "stalled", "unreachable", "unknown")
QUORUM_STATUSES = ("healthy", "degraded", "no_majority", "leaderless", "stalled", "split_brain", "unobserved")
CAUSES = ("partitioned", "down", "rejected", "slow", "behind", "unknown")


def metric_names_in(promql: str) -> set[str]:
    """Every `quorum_*` identifier in a PromQL expression."""
    import re
    return set(re.findall(r"\bquorum_[a-z_]+\b", promql))
