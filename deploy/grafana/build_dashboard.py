"""Build the Grafana dashboard `quorum-health.json` from the panel list below (the JSON is
generated; edit this file and rerun `python deploy/grafana/build_dashboard.py`).

Variables: the Prometheus data source, the cluster and the quorum partition (both multi-select,
`All` by default). Rows: the quorum (status, leader and epoch, high watermark, voters, elections),
its replicas (caught-up windows as a state timeline, lag in records and seconds, caught-up
fraction) and the monitor's own health.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

OUTPUT = Path(__file__).with_name("quorum-health.json")
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
QUORUM = 'cluster=~"$cluster", partition=~"$partition"'

REPLICA_STATES = [("caught_up", "caught up", "green"), ("lagging", "lagging", "yellow"),
                  ("stalled", "stalled", "orange"), ("unreachable", "unreachable", "red"),
                  ("unknown", "unknown", "gray")]
QUORUM_STATES = [("healthy", "healthy", "green"), ("degraded", "degraded", "yellow"),
                 ("stalled", "stalled", "orange"), ("leaderless", "leaderless", "red"),
                 ("no_majority", "no majority", "red"), ("split_brain", "split brain", "purple")]
CAUSE_STATES = [("behind", "behind", "yellow"), ("slow", "slow", "orange"), ("rejected", "rejected", "purple"),
                ("partitioned", "partitioned", "red"), ("down", "down", "dark-red"), ("unknown", "unknown", "gray")]


def state_code(metric: str, states: list[tuple[str, str, str]], label: str = "status") -> str:
    """A state-set metric (one series per status, 1 for the current one) as one series per
    entity whose value is the index of its current status, for value mappings to name and colour."""
    arms = [f'({metric}{{{QUORUM}, {label}="{status}"}} == 1) * {code}' for code, (status, _, _) in enumerate(states)]
    return f"max without ({label}) (\n  " + "\n  or ".join(arms) + "\n)"


def state_mappings(states: list[tuple[str, str, str]]) -> list[dict]:
    return [{"type": "value", "options": {str(code): {"text": text, "color": color, "index": code}
                                          for code, (_, text, color) in enumerate(states)}}]


class Layout:
    """Places panels left to right in rows of 24 columns."""

    def __init__(self):
        self.panels: list[dict] = []
        self.x = self.y = 0
        self.row_height = 0

    def row(self, title: str) -> None:
        self._newline()
        self.panels.append({"type": "row", "title": title, "collapsed": False, "panels": [],
                            "gridPos": {"x": 0, "y": self.y, "w": 24, "h": 1}, "id": len(self.panels) + 1})
        self.y += 1

    def panel(self, kind: str, title: str, targets: list[dict], width: int = 8, height: int = 8,
              unit: str | None = None, description: str = "", mappings: list | None = None,
              thresholds: list[tuple[float | None, str]] | None = None, options: dict | None = None,
              custom: dict | None = None) -> None:
        if self.x + width > 24:
            self._newline()
        defaults: dict = {"custom": custom or {}}
        if unit:
            defaults["unit"] = unit
        if mappings:
            defaults["mappings"] = mappings
            defaults["color"] = {"mode": "thresholds"}
        if thresholds:
            defaults["thresholds"] = {"mode": "absolute", "steps": [{"value": v, "color": c} for v, c in thresholds]}
        for ref, t in zip("ABCDEFGH", targets):
            t["refId"] = ref
        self.panels.append({
            "id": len(self.panels) + 1, "type": kind, "title": title, "description": description,
            "datasource": DATASOURCE, "gridPos": {"x": self.x, "y": self.y, "w": width, "h": height},
            "targets": targets, "fieldConfig": {"defaults": defaults, "overrides": []}, "options": options or {},
        })
        self.x += width
        self.row_height = max(self.row_height, height)

    def _newline(self) -> None:
        self.y += self.row_height
        self.x = self.row_height = 0


def t(expr: str, legend: str) -> dict:
    """One Prometheus query of a panel (its refId is set when the panel is placed)."""
    return {"datasource": DATASOURCE, "expr": expr, "legendFormat": legend, "refId": "", "range": True}


def build() -> dict:
    q = QUORUM
    per_quorum = "{{cluster}} {{partition}}"
    per_replica = "{{cluster}} replica {{replica}} ({{role}})"
    layout = Layout()
    timeline = {"showValue": "never", "mergeValues": True, "rowHeight": 0.8,
                "legend": {"showLegend": True, "displayMode": "list", "placement": "bottom"}}
    stepped = {"lineInterpolation": "stepAfter", "fillOpacity": 0}

    layout.row("Quorum")
    layout.panel("state-timeline", "Quorum status", [t(state_code("quorum_status", QUORUM_STATES), per_quorum)],
                 width=16, height=6, mappings=state_mappings(QUORUM_STATES), options=timeline,
                 description="The job's verdict per quorum: healthy, degraded (a voter lags or is "
                             "unreachable), stalled (high watermark stopped), leaderless, no majority, split brain.")
    layout.panel("stat", "Reachable majority",
                 [t(f"quorum_majority_reachable{{{q}}}", per_quorum)], width=8, height=6,
                 mappings=[{"type": "value", "options": {"1": {"text": "yes", "color": "green", "index": 0},
                                                          "0": {"text": "NO", "color": "red", "index": 1}}}],
                 options={"colorMode": "background", "graphMode": "none", "textMode": "value_and_name",
                          "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}})
    layout.panel("timeseries", "Leader", [t(f"quorum_leader_id{{{q}}}", per_quorum)], custom=stepped,
                 description="Node id of the current leader (-1: none). A step is a leader change.")
    layout.panel("timeseries", "Leader epoch", [t(f"quorum_leader_epoch{{{q}}}", per_quorum)], custom=stepped)
    layout.panel("timeseries", "Elections and leader changes", [
        t(f"increase(quorum_elections_total{{{q}}}[$__rate_interval])", "epoch bumps {{cluster}} {{partition}}"),
        t(f"increase(quorum_leader_changes_total{{{q}}}[$__rate_interval])", "new leaders {{cluster}} {{partition}}"),
        t(f"quorum_leader_changes_window{{{q}}}", "leader changes in the storm window {{cluster}} {{partition}}"),
        t(f"quorum_epoch_changes_window{{{q}}}", "epochs in the storm window {{cluster}} {{partition}}"),
    ], thresholds=[(None, "green"), (3, "red")],
                 description="Epoch bumps (a failover with split votes bumps several) and new leaders; 3 leader "
                             "changes within the job's storm window fire QuorumElectionStorm.")
    layout.panel("timeseries", "High watermark rate", [
        t(f"rate(quorum_high_watermark{{{q}}}[$__rate_interval])", per_quorum)], unit="ops",
                 description="Records committed per second (the high watermark never decreases). "
                             "An idle healthy leader still commits 2 NoOps per second.")
    layout.panel("timeseries", "High watermark age", [
        t(f"quorum_high_watermark_age_seconds{{{q}}}", per_quorum)], unit="s",
                 thresholds=[(None, "green"), (2, "red")],
                 description="Time since the high watermark last advanced; above 2 s the quorum commits nothing.")
    layout.panel("timeseries", "Voters", [
        t(f"quorum_voters{{{q}}}", "voters {{cluster}} {{partition}}"),
        t(f"quorum_voters_reachable{{{q}}}", "reachable {{cluster}} {{partition}}"),
        t(f"quorum_voters_caught_up{{{q}}}", "caught up {{cluster}} {{partition}}"),
    ], custom=stepped)
    layout.panel("timeseries", "Leadership claims", [
        t(f"quorum_leaders_claimed{{{q}}}", "leaders in the current epoch {{cluster}} {{partition}}"),
        t(f"quorum_zombie_leaders{{{q}}}", "leaders of an older epoch {{cluster}} {{partition}}"),
        t(f"quorum_candidate_epoch{{{q}}}", "campaigning for epoch {{cluster}} {{partition}}"),
    ], width=8, custom=stepped, thresholds=[(None, "green"), (2, "red")],
                 description="More than one leader in an epoch is a split brain; any leader of an older epoch still "
                             "talking is a zombie; a campaign above the current epoch is an election under way (-1: none).")
    layout.panel("timeseries", "Network partition", [
        t(f"quorum_network_partition{{{q}}}", "partitioned {{cluster}} {{partition}}"),
        t(f"quorum_voters_cut_off{{{q}}}", "voters cut off {{cluster}} {{partition}}"),
    ], width=8, custom=stepped, thresholds=[(None, "green"), (1, "red")],
                 description="Voters alive but cut off from the leader (or the leader from every voter); the health "
                             "events and the status reason name who is on which side.")
    layout.panel("timeseries", "Voter set and incarnations", [
        t(f"increase(quorum_voter_set_changes_total{{{q}}}[$__rate_interval])", "voter set changes {{cluster}} {{partition}}"),
        t(f"increase(quorum_incarnations_total{{{q}}}[$__rate_interval])", "formatted anew {{cluster}} {{partition}}"),
    ], width=8, custom=stepped,
                 description="Changes of the voter set in force (KIP-853), and the cluster seen formatted anew under "
                             "the same id (a majority of voters went back in epoch).")

    layout.row("Replicas")
    layout.panel("state-timeline", "Caught-up windows", [t(state_code("quorum_replica_status", REPLICA_STATES), per_replica)],
                 width=24, height=9, mappings=state_mappings(REPLICA_STATES), options=timeline,
                 description="Each replica's status over time: the intervals it was caught up (KIP-836) and those it lagged.")
    layout.panel("state-timeline", "Why: the cause of each replica not caught up",
                 [t(state_code("quorum_replica_cause", CAUSE_STATES, "cause"), per_replica)],
                 width=24, height=7, mappings=state_mappings(CAUSE_STATES), options=timeline,
                 description="partitioned (alive, its fetches do not reach the leader), down (nothing from it), "
                             "rejected (the leader refuses its fetches), slow (fetches seconds apart), behind (never "
                             "at the leader's end), unknown (the evidence does not decide). See docs/runbook.md.")
    layout.panel("timeseries", "Lag (records)", [t(f"quorum_replica_lag_records{{{q}}}", per_replica)], unit="short",
                 description="Leader's log end offset minus the replica's.")
    layout.panel("timeseries", "Lag (seconds)", [t(f"quorum_replica_lag_seconds{{{q}}}", per_replica)], unit="s",
                 description="Leader's now minus the replica's last caught-up time (KIP-836).")
    layout.panel("timeseries", "Last fetch age", [t(f"quorum_replica_last_fetch_age_seconds{{{q}}}", per_replica)],
                 unit="s", thresholds=[(None, "green"), (2, "red")],
                 description="Time since the replica's last valid fetch; above the fetch timeout (2 s) it is unreachable.")
    layout.panel("bargauge", "Caught-up fraction of the horizon", [t(f"quorum_replica_caught_up_ratio{{{q}}}", per_replica)],
                 width=12, unit="percentunit", thresholds=[(None, "red"), (0.9, "yellow"), (0.99, "green")],
                 options={"orientation": "horizontal", "displayMode": "gradient",
                          "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}})
    layout.panel("timeseries", "Truncations", [
        t(f"increase(quorum_replica_truncated_records_total{{{q}}}[$__rate_interval])", "records lost " + per_replica),
        t(f"increase(quorum_replica_truncations_total{{{q}}}[$__rate_interval])", "truncations " + per_replica),
    ], width=12,
                 description="Uncommitted records a replica lost when its log end offset went backwards after a leader change.")

    layout.row("Monitor")
    layout.panel("stat", "Last batch age", [t("time() - max(quorum_monitor_last_batch_timestamp_seconds)", "last batch")],
                 width=6, height=6, unit="s", thresholds=[(None, "green"), (30, "red")],
                 options={"colorMode": "background", "graphMode": "area",
                          "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}})
    layout.panel("stat", "Input stalled", [t("max(quorum_monitor_input_stalled)", "input stalled")], width=6, height=6,
                 mappings=[{"type": "value", "options": {"0": {"text": "flowing", "color": "green", "index": 0},
                                                          "1": {"text": "STALLED", "color": "red", "index": 1}}}],
                 options={"colorMode": "background", "graphMode": "none",
                          "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}})
    layout.panel("timeseries", "Input delay and batch duration", [
        t("quorum_monitor_input_delay_seconds", "input delay"),
        t("quorum_monitor_batch_duration_seconds", "batch duration"),
    ], width=12, height=6, unit="s", thresholds=[(None, "green"), (10, "red")])
    layout.panel("timeseries", "Input records", [
        t("sum(rate(quorum_monitor_input_records_total[$__rate_interval]))", "records/s"),
        t("sum by (reason) (rate(quorum_monitor_invalid_records_total[$__rate_interval]))", "invalid: {{reason}}"),
    ], unit="ops")
    layout.panel("timeseries", "Output failures", [
        t("sum(increase(quorum_monitor_push_failures_total[$__rate_interval]))", "failed pushes"),
        t("sum by (sink) (increase(quorum_monitor_sink_failures_total[$__rate_interval]))", "failed: {{sink}}"),
        t("max(quorum_monitor_health_events_pending)", "health events waiting"),
        t("sum(increase(quorum_monitor_health_events_dropped_total[$__rate_interval]))", "health events dropped"),
    ], unit="short",
                 description="Pushgateway pushes that failed, batches whose output to a sink failed, and the health "
                             "topic's undelivered events (waiting in the spooled buffer, or dropped when it was full).")
    layout.panel("table", "Firing alerts", [
        # the monitor's own alerts carry no cluster label (or cluster="_monitor"): always shown
        t('ALERTS{alertstate="firing", cluster=~"$cluster|_monitor|"}', "")], height=8,
                 options={"showHeader": True})
    layout.panels[-1]["targets"][0].update({"format": "table", "instant": True, "range": False})

    def variable(name: str, label: str, query: str) -> dict:
        return {"name": name, "label": label, "type": "query", "datasource": DATASOURCE,
                "query": {"query": query, "refId": f"{name}-values"}, "definition": query,
                "refresh": 2, "multi": True, "includeAll": True, "allValue": ".*", "sort": 1,
                "current": {"selected": True, "text": ["All"], "value": ["$__all"]}}

    return {
        "title": "Quorum health", "uid": "quorum-health", "tags": ["kraft", "quorum"],
        "description": "KRaft quorum health from the streaming monitor (docs/runbook.md explains each alert).",
        "editable": True, "schemaVersion": 39, "version": 1, "refresh": "10s", "timezone": "utc",
        "time": {"from": "now-30m", "to": "now"},
        "templating": {"list": [
            {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
             "current": {}, "hide": 0},
            variable("cluster", "Cluster", "label_values(quorum_leader_id, cluster)"),
            variable("partition", "Quorum partition", 'label_values(quorum_leader_id{cluster=~"$cluster"}, partition)'),
        ]},
        "annotations": {"list": [{
            "name": "Firing alerts", "datasource": DATASOURCE, "enable": True, "iconColor": "red",
            "expr": 'ALERTS{alertstate="firing", cluster=~"$cluster"}', "titleFormat": "{{alertname}}",
            "textFormat": "{{cluster}} {{partition}} {{replica}}", "step": "10s",
        }]},
        "panels": layout.panels,
    }


def render() -> str:
    return json.dumps(build(), indent=2) + "\n"


if __name__ == "__main__":
    OUTPUT.write_text(render())
    print(f"wrote {OUTPUT}", file=sys.stderr)
