"""The Grafana dashboard: generated from deploy/grafana/build_dashboard.py, built on the contract's
metric names (all of them), every quorum panel filtered by the cluster and partition selectors,
panels laid out without overlap. Its queries run against a real Prometheus in
test_monitoring_stack.py."""
from __future__ import annotations

import json
import re

from deploy.dashboard_queries import DASHBOARD, expand_variables, panel_queries
from deploy.grafana import build_dashboard
from quorum_metric_names import ALL_METRICS, MONITOR_METRICS, metric_names_in

import pytest


def board() -> dict:
    return json.loads(DASHBOARD.read_text())


def raw_exprs() -> list[str]:
    return [target["expr"] for panel in board()["panels"] for target in panel.get("targets", [])]


def test_dashboard_json_is_what_the_builder_generates():
    assert DASHBOARD.read_text() == build_dashboard.render(), "run python deploy/grafana/build_dashboard.py"


def test_panels_show_every_contract_metric_and_nothing_else():
    used = set().union(*(metric_names_in(q.expr) for q in panel_queries()))
    assert used == ALL_METRICS


def test_every_quorum_and_replica_selector_follows_the_cluster_and_partition_variables():
    for expr in raw_exprs():
        for match in re.finditer(r"\b(quorum_[a-z_]+)\b(.?)", expr):
            name, after = match.groups()
            if name in MONITOR_METRICS:
                continue  # the monitor's own health has no cluster (cluster="_monitor" when pushed)
            assert after == "{" and expr[match.end():].startswith('cluster=~"$cluster", partition=~"$partition"'), expr


def test_cluster_selector_is_a_multi_value_variable_with_all():
    variables = {v["name"]: v for v in board()["templating"]["list"]}
    assert variables["datasource"]["query"] == "prometheus"
    for name in ("cluster", "partition"):
        assert variables[name]["multi"] and variables[name]["includeAll"] and variables[name]["allValue"] == ".*"
    assert variables["cluster"]["definition"] == "label_values(quorum_leader_id, cluster)"


def test_required_views_are_present():
    titles = {panel["title"]: panel["type"] for panel in board()["panels"]}
    assert titles["Caught-up windows"] == "state-timeline"
    for title in ("Quorum status", "Leader", "Leader epoch", "High watermark rate", "Lag (records)",
                  "Lag (seconds)", "Caught-up fraction of the horizon", "Elections and leader changes", "Network partition",
                  "Why: the cause of each replica not caught up", "Last batch age"):
        assert title in titles


def test_panels_have_unique_ids_and_do_not_overlap():
    panels = board()["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    cells = set()
    for p in panels:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24, p["title"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & mine, f"{p['title']} overlaps another panel"
        cells |= mine


def test_variable_expansion_substitutes_both_forms_and_rejects_unknown_names():
    assert expand_variables('x{c=~"$cluster"}[${__rate_interval}]', {"cluster": "c1"}) == 'x{c=~"c1"}[1m]'
    with pytest.raises(KeyError, match="nope"):
        expand_variables("x{c=~\"$nope\"}")
