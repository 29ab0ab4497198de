"""Build the Grafana dashboard `quorum-health.json` from the panel list below (the JSON is
generated; edit this file and rerun `python deploy/grafana/build_dashboard.py` with the project's
environment, e.g. `.venv/bin/python deploy/grafana/build_dashboard.py`).

Built with Grafana's own builder library, the Grafana Foundation SDK (`grafana-foundation-sdk`, its
build for Grafana 11.6's dashboard schema): each panel is the SDK's builder for its visualisation,
each query its Prometheus query builder, and the SDK lays the panels out left to right, 24 columns
to a line, each line below the tallest panel of the one before. It starts a new line only once a line
is full, never for a panel that does not fit: keep each line's widths adding up to 24 (a test checks
that no panel overflows or overlaps another).

Variables: the Prometheus data source, the cluster and the quorum partition (both multi-select,
`All` by default). Rows: the quorum (status, leader and epoch, high watermark, voters, elections,
fault tolerance, the collector's failed polls and errors),
its replicas (caught-up windows as a state timeline, lag in records and seconds, caught-up
fraction) and the monitor's own health.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TypeVar

from grafana_foundation_sdk.builders import bargauge, prometheus, stat, statetimeline, table, timeseries
from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as builders
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as model
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

OUTPUT = Path(__file__).with_name("quorum-health.json")
DATASOURCE = model.DataSourceRef(type_val="prometheus", uid="${datasource}")
QUORUM = 'cluster=~"$cluster", partition=~"$partition"'

REPLICA_STATES = [("caught_up", "caught up", "green"), ("lagging", "lagging", "yellow"),
                  ("stalled", "stalled", "orange"), ("unreachable", "unreachable", "red"),
                  ("unknown", "unknown", "gray")]
QUORUM_STATES = [("healthy", "healthy", "green"), ("degraded", "degraded", "yellow"),
                 ("stalled", "stalled", "orange"), ("leaderless", "leaderless", "red"),
                 ("no_majority", "no majority", "red"), ("split_brain", "split brain", "purple"),
                 # gray as a replica's `unknown`: no evidence, not a verdict (QuorumUnobserved pages for it)
                 ("unobserved", "unobserved", "gray")]
CAUSE_STATES = [("behind", "behind", "yellow"), ("slow", "slow", "orange"), ("rejected", "rejected", "purple"),
                ("partitioned", "partitioned", "red"), ("down", "down", "dark-red"), ("unknown", "unknown", "gray")]

T = TypeVar("T")
AnyPanel = TypeVar("AnyPanel", timeseries.Panel, stat.Panel, statetimeline.Panel, bargauge.Panel, table.Panel)


def state_code(metric: str, states: list[tuple[str, str, str]], label: str = "status") -> str:
    """A state-set metric (one series per status, 1 for the current one) as one series per
    entity whose value is the index of its current status, for value mappings to name and colour."""
    arms = [f'({metric}{{{QUORUM}, {label}="{status}"}} == 1) * {code}' for code, (status, _, _) in enumerate(states)]
    return f"max without ({label}) (\n  " + "\n  or ".join(arms) + "\n)"


def value_names(names: dict[str, tuple[str, str]]) -> list[model.ValueMapping]:
    """Value mappings: each value shown as its text in its colour."""
    return [model.ValueMap(options={value: model.ValueMappingResult(text=text, color=color, index=index)
                                    for index, (value, (text, color)) in enumerate(names.items())})]


def state_mappings(states: list[tuple[str, str, str]]) -> list[model.ValueMapping]:
    return value_names({str(code): (text, color) for code, (_, text, color) in enumerate(states)})


def thresholds(*steps: tuple[float | None, str]) -> builders.ThresholdsConfig:
    """Absolute thresholds, the first step's value None (from minus infinity)."""
    return (builders.ThresholdsConfig().mode(model.ThresholdsMode.ABSOLUTE)
            .steps([model.Threshold(value=value, color=color) for value, color in steps]))


def t(expr: str, legend: str) -> prometheus.Dataquery:
    """One Prometheus range query of a panel (its refId is set when the panel is made)."""
    return prometheus.Dataquery().datasource(DATASOURCE).expr(expr).legend_format(legend).range()


def panel(kind: AnyPanel, title: str, targets: list[prometheus.Dataquery], width: int = 8, height: int = 8,
          unit: str | None = None, description: str = "", mappings: list[model.ValueMapping] | None = None,
          steps: builders.ThresholdsConfig | None = None) -> AnyPanel:
    """The settings every panel shares, on the SDK's builder of its visualisation (which carries its own
    options); the dashboard builder places it."""
    kind.title(title).datasource(DATASOURCE).span(width).height(height)
    if description:
        kind.description(description)
    for ref, target in zip("ABCDEFGH", targets):
        kind.with_target(target.ref_id(ref))
    if unit:
        kind.unit(unit)
    if mappings:
        kind.mappings(mappings).color_scheme(builders.FieldColor().mode(model.FieldColorModeId.THRESHOLDS))
    if steps:
        kind.thresholds(steps)
    return kind


class WithFields(cogbuilder.Builder[T]):
    """An SDK builder whose object writes, besides the SDK model's JSON, fields that model lacks: a
    Prometheus variable's `definition` and a Prometheus annotation's title, text and step, which
    Grafana's dashboard schema (the SDK's source) leaves to the data source plugin."""

    def __init__(self, builder: cogbuilder.Builder[T], **fields: object):
        self.builder, self.fields = builder, fields

    def build(self) -> T:
        built = self.builder.build()
        own_json = built.to_json
        built.to_json = lambda: {**own_json(), **self.fields}
        return built


def last_value() -> common_builders.ReduceDataOptions:
    return common_builders.ReduceDataOptions().calcs(["lastNotNull"]).fields("").values(False)


def build() -> model.Dashboard:
    q = QUORUM
    per_quorum = "{{cluster}} {{partition}}"
    per_replica = "{{cluster}} replica {{replica}} ({{role}})"

    def timeline() -> statetimeline.Panel:
        legend = (common_builders.VizLegendOptions().show_legend(True).display_mode(common.LegendDisplayMode.LIST)
                  .placement(common.LegendPlacement.BOTTOM))
        # the SDK's tooltip default sorts ascending; Grafana's own is unsorted
        tooltip = common_builders.VizTooltipOptions().mode(common.TooltipDisplayMode.SINGLE).sort(common.SortOrder.NONE)
        return (statetimeline.Panel().show_value(common.VisibilityMode.NEVER).merge_values(True).row_height(0.8)
                .legend(legend).tooltip(tooltip))

    def stepped() -> timeseries.Panel:
        return timeseries.Panel().line_interpolation(common.LineInterpolation.STEP_AFTER).fill_opacity(0)

    def big_value(color_mode: common.BigValueColorMode, graph_mode: common.BigValueGraphMode) -> stat.Panel:
        return stat.Panel().color_mode(color_mode).graph_mode(graph_mode).reduce_options(last_value())

    def variable(name: str, label: str, query: str) -> WithFields[model.VariableModel]:
        return WithFields(
            builders.QueryVariable(name).label(label).datasource(DATASOURCE)
            .query({"query": query, "refId": f"{name}-values"})
            .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(model.VariableSort.ALPHABETICAL_ASC)
            .multi(True).include_all(True).all_value(".*")
            .current(model.VariableOption(selected=True, text=["All"], value=["$__all"])),
            definition=query)

    board = (
        builders.Dashboard("Quorum health").uid("quorum-health").tags(["kraft", "quorum"])
        .description("KRaft quorum health from the streaming monitor (docs/runbook.md explains each alert).")
        .editable().version(1).refresh("10s").timezone(common.TimeZoneUtc).time("now-30m", "now")
        .with_variable(builders.DatasourceVariable("datasource").label("Data source").type("prometheus")
                       .hide(model.VariableHide.DONT_HIDE))
        .with_variable(variable("cluster", "Cluster", "label_values(quorum_leader_id, cluster)"))
        .with_variable(variable("partition", "Quorum partition",
                                'label_values(quorum_leader_id{cluster=~"$cluster"}, partition)'))
        .annotation(WithFields(
            builders.AnnotationQuery().name("Firing alerts").datasource(DATASOURCE).enable(True).icon_color("red")
            .expr('ALERTS{alertstate="firing", cluster=~"$cluster"}'),
            titleFormat="{{alertname}}", textFormat="{{cluster}} {{partition}} {{replica}}", step="10s"))
    )

    board.with_row(builders.Row("Quorum"))
    board.with_panel(panel(timeline(), "Quorum status", [t(state_code("quorum_status", QUORUM_STATES), per_quorum)],
                           width=16, height=6, mappings=state_mappings(QUORUM_STATES),
                           description="The job's verdict per quorum: healthy, degraded (a voter lags or is "
                                       "unreachable), stalled (high watermark stopped), leaderless, no majority, "
                                       "split brain; unobserved: the collector reaches no node and no node's own "
                                       "view arrives, so the monitor knows nothing of the quorum."))
    board.with_panel(panel(
        big_value(common.BigValueColorMode.BACKGROUND, common.BigValueGraphMode.NONE)
        .text_mode(common.BigValueTextMode.VALUE_AND_NAME),
        "Reachable majority", [t(f"quorum_majority_reachable{{{q}}}", per_quorum)], width=8, height=6,
        mappings=value_names({"1": ("yes", "green"), "0": ("NO", "red")})))
    board.with_panel(panel(stepped(), "Leader", [t(f"quorum_leader_id{{{q}}}", per_quorum)],
                           description="Node id of the current leader (-1: none). A step is a leader change."))
    board.with_panel(panel(stepped(), "Leader epoch", [t(f"quorum_leader_epoch{{{q}}}", per_quorum)]))
    board.with_panel(panel(timeseries.Panel(), "Elections and leader changes", [
        t(f"increase(quorum_elections_total{{{q}}}[$__rate_interval])", "epoch bumps {{cluster}} {{partition}}"),
        t(f"increase(quorum_leader_changes_total{{{q}}}[$__rate_interval])", "new leaders {{cluster}} {{partition}}"),
        t(f"quorum_leader_changes_window{{{q}}}", "leader changes in the storm window {{cluster}} {{partition}}"),
        t(f"quorum_epoch_changes_window{{{q}}}", "epochs in the storm window {{cluster}} {{partition}}"),
    ], steps=thresholds((None, "green"), (3, "red")),
        description="Epoch bumps (a failover with split votes bumps several) and new leaders; 3 leader "
                    "changes within the job's storm window fire QuorumElectionStorm."))
    board.with_panel(panel(timeseries.Panel(), "High watermark rate", [
        t(f"rate(quorum_high_watermark{{{q}}}[$__rate_interval])", per_quorum)], unit="ops",
        description="Records committed per second (the high watermark never decreases). "
                    "An idle healthy leader still commits 2 NoOps per second."))
    board.with_panel(panel(timeseries.Panel(), "High watermark age", [
        t(f"quorum_high_watermark_age_seconds{{{q}}}", per_quorum)], unit="s",
        steps=thresholds((None, "green"), (2, "red")),
        description="Time since the high watermark last advanced; above 2 s the quorum commits nothing."))
    board.with_panel(panel(stepped(), "Voters", [
        t(f"quorum_voters{{{q}}}", "voters {{cluster}} {{partition}}"),
        t(f"quorum_voters_reachable{{{q}}}", "reachable {{cluster}} {{partition}}"),
        t(f"quorum_voters_caught_up{{{q}}}", "caught up {{cluster}} {{partition}}"),
    ]))
    board.with_panel(panel(stepped(), "Leadership claims", [
        t(f"quorum_leaders_claimed{{{q}}}", "leaders in the current epoch {{cluster}} {{partition}}"),
        t(f"quorum_zombie_leaders{{{q}}}", "leaders of an older epoch {{cluster}} {{partition}}"),
        t(f"quorum_candidate_epoch{{{q}}}", "campaigning for epoch {{cluster}} {{partition}}"),
    ], steps=thresholds((None, "green"), (2, "red")),
        description="More than one leader in an epoch is a split brain; any leader of an older epoch still "
                    "talking is a zombie; a campaign above the current epoch is an election under way (-1: none)."))
    board.with_panel(panel(stepped(), "Network partition", [
        t(f"quorum_network_partition{{{q}}}", "partitioned {{cluster}} {{partition}}"),
        t(f"quorum_voters_cut_off{{{q}}}", "voters cut off {{cluster}} {{partition}}"),
    ], steps=thresholds((None, "green"), (1, "red")),
        description="Voters alive but cut off from the leader (or the leader from every voter); the health "
                    "events and the status reason name who is on which side."))
    board.with_panel(panel(stepped(), "Voter set and incarnations", [
        t(f"increase(quorum_voter_set_changes_total{{{q}}}[$__rate_interval])",
          "voter set changes {{cluster}} {{partition}}"),
        t(f"increase(quorum_incarnations_total{{{q}}}[$__rate_interval])", "formatted anew {{cluster}} {{partition}}"),
    ], description="Changes of the voter set in force (KIP-853), and the cluster seen formatted anew under "
                   "the same id (a majority of voters went back in epoch)."))
    board.with_panel(panel(
        big_value(common.BigValueColorMode.BACKGROUND, common.BigValueGraphMode.AREA)
        .text_mode(common.BigValueTextMode.VALUE_AND_NAME),
        "Fault tolerance", [t(f"quorum_fault_tolerance{{{q}}}", per_quorum)], unit="short",
        steps=thresholds((None, "red"), (0, "orange"), (1, "green")),
        mappings=[model.SpecialValueMap(options=model.DashboardSpecialValueMapOptions(
            match=model.SpecialValueMatch.NA_N, result=model.ValueMappingResult(text="unknown", color="gray")))],
        description="Voters that may still fail before the majority is lost: reachable voters minus a majority. "
                    "0: the next voter lost stops commits (QuorumOneFailureFromNoMajority); negative: the majority "
                    "is lost; unknown while a voter's status is (no leader to judge against, or unobserved)."))
    board.with_panel(panel(stepped(), "Collector failed polls", [
        t(f"quorum_collector_poll_failures{{{q}}}", per_quorum)], unit="short",
        steps=thresholds((None, "green"), (1, "red")),
        description="DescribeQuorum polls of `quorum collect` that failed in a row (0 while they answer; no "
                    "data without a collector)."))
    board.with_panel(panel(table.Panel().show_header(True), "Collector errors", [
        t(f"quorum_collector_poll_error{{{q}}} == 1", "").format(PromQueryFormat.TABLE).instant()],
        description="The collector's current error per quorum while its polls fail (timeout, connection_refused, "
                    "NOT_LEADER_OR_FOLLOWER, ...); empty while they answer."))

    board.with_row(builders.Row("Replicas"))
    board.with_panel(panel(timeline(), "Caught-up windows",
                           [t(state_code("quorum_replica_status", REPLICA_STATES), per_replica)],
                           width=24, height=9, mappings=state_mappings(REPLICA_STATES),
                           description="Each replica's status over time: the intervals it was caught up (KIP-836) "
                                       "and those it lagged."))
    board.with_panel(panel(timeline(), "Why: the cause of each replica not caught up",
                           [t(state_code("quorum_replica_cause", CAUSE_STATES, "cause"), per_replica)],
                           width=24, height=7, mappings=state_mappings(CAUSE_STATES),
                           description="partitioned (alive, its fetches do not reach the leader), down (nothing "
                                       "from it), rejected (the leader refuses its fetches), slow (fetches seconds "
                                       "apart), behind (never at the leader's end), unknown (the evidence does not "
                                       "decide). See docs/runbook.md."))
    board.with_panel(panel(timeseries.Panel(), "Lag (records)", [t(f"quorum_replica_lag_records{{{q}}}", per_replica)],
                           unit="short", description="Leader's log end offset minus the replica's."))
    board.with_panel(panel(timeseries.Panel(), "Lag (seconds)", [t(f"quorum_replica_lag_seconds{{{q}}}", per_replica)],
                           unit="s", description="Leader's now minus the replica's last caught-up time (KIP-836)."))
    board.with_panel(panel(timeseries.Panel(), "Last fetch age",
                           [t(f"quorum_replica_last_fetch_age_seconds{{{q}}}", per_replica)],
                           unit="s", steps=thresholds((None, "green"), (2, "red")),
                           description="Time since the replica's last valid fetch; above the fetch timeout (2 s) it "
                                       "is unreachable."))
    board.with_panel(panel(
        bargauge.Panel().orientation(common.VizOrientation.HORIZONTAL)
        .display_mode(common.BarGaugeDisplayMode.GRADIENT).reduce_options(last_value()),
        "Caught-up fraction of the horizon", [t(f"quorum_replica_caught_up_ratio{{{q}}}", per_replica)],
        width=12, unit="percentunit", steps=thresholds((None, "red"), (0.9, "yellow"), (0.99, "green"))))
    board.with_panel(panel(timeseries.Panel(), "Truncations", [
        t(f"increase(quorum_replica_truncated_records_total{{{q}}}[$__rate_interval])", "records lost " + per_replica),
        t(f"increase(quorum_replica_truncations_total{{{q}}}[$__rate_interval])", "truncations " + per_replica),
    ], width=12,
        description="Uncommitted records a replica lost when its log end offset went backwards after a leader "
                    "change."))

    board.with_row(builders.Row("Monitor"))
    board.with_panel(panel(big_value(common.BigValueColorMode.BACKGROUND, common.BigValueGraphMode.AREA),
                           "Last batch age", [t("time() - max(quorum_monitor_last_batch_timestamp_seconds)",
                                                "last batch")],
                           width=6, height=6, unit="s", steps=thresholds((None, "green"), (30, "red"))))
    board.with_panel(panel(big_value(common.BigValueColorMode.BACKGROUND, common.BigValueGraphMode.NONE),
                           "Input stalled", [t("max(quorum_monitor_input_stalled)", "input stalled")],
                           width=6, height=6,
                           mappings=value_names({"0": ("flowing", "green"), "1": ("STALLED", "red")})))
    board.with_panel(panel(timeseries.Panel(), "Input delay and batch duration", [
        t("quorum_monitor_input_delay_seconds", "input delay"),
        t("quorum_monitor_batch_duration_seconds", "batch duration"),
    ], width=12, height=6, unit="s", steps=thresholds((None, "green"), (10, "red"))))
    board.with_panel(panel(timeseries.Panel(), "Input records", [
        t("sum(rate(quorum_monitor_input_records_total[$__rate_interval]))", "records/s"),
        t("sum by (reason) (rate(quorum_monitor_invalid_records_total[$__rate_interval]))", "invalid: {{reason}}"),
    ], unit="ops"))
    board.with_panel(panel(timeseries.Panel(), "Output failures", [
        t("sum(increase(quorum_monitor_push_failures_total[$__rate_interval]))", "failed pushes"),
        t("sum by (sink) (increase(quorum_monitor_sink_failures_total[$__rate_interval]))", "failed: {{sink}}"),
        t("max(quorum_monitor_health_events_pending)", "health events waiting"),
        t("sum(increase(quorum_monitor_health_events_dropped_total[$__rate_interval]))", "health events dropped"),
    ], unit="short",
        description="Pushgateway pushes that failed, batches whose output to a sink failed, and the health "
                    "topic's undelivered events (waiting in the spooled buffer, or dropped when it was full)."))
    # the monitor's own alerts carry no cluster label (or cluster="_monitor"): always shown
    board.with_panel(panel(table.Panel().show_header(True), "Firing alerts", [
        t('ALERTS{alertstate="firing", cluster=~"$cluster|_monitor|"}', "").format(PromQueryFormat.TABLE).instant()]))

    dashboard = board.build()
    for number, placed in enumerate(dashboard.panels, 1):  # rows and panels, top to bottom
        placed.id_val = number
    return dashboard


def render() -> str:
    return json.dumps(build(), cls=JSONEncoder, indent=2) + "\n"


if __name__ == "__main__":
    OUTPUT.write_text(render())
    print(f"wrote {OUTPUT}", file=sys.stderr)
