"""The deployment pieces working together on real servers: Prometheus configured by
`deploy/prometheus_config.py` keeps the pushed labels (honor_labels) and scrapes the exporter,
loads the rules, fires an alert and Alertmanager pages for it; every dashboard panel's query
parses and returns data."""
from __future__ import annotations

import json

from deploy.dashboard_queries import panel_queries
from deploy.prometheus_config import DEFAULT_RULES
from prometheus_tools import alerting_rule_count, http_get, wait_for


def series(stack, promql: str) -> list[dict]:
    answer = stack.query(promql)
    assert answer["status"] == "success", f"{promql}: {answer}"
    return answer["data"]["result"]


def test_pushed_metrics_keep_the_jobs_own_labels(monitoring_stack):
    found = wait_for(lambda: series(monitoring_stack, 'quorum_leader_id{cluster="c1"}'), 20,
                     "c1's pushed leader id in Prometheus")
    labels = found[0]["metric"]
    assert labels["job"] == "quorum_health" and labels["partition"] == "__cluster_metadata-0"
    assert "exported_job" not in labels and "exported_cluster" not in labels


def test_exporter_endpoint_is_scraped_under_the_jobs_name(monitoring_stack):
    found = wait_for(lambda: series(monitoring_stack, 'quorum_leader_id{cluster="c2"}'), 20,
                     "c2's exported leader id in Prometheus")
    assert found[0]["metric"]["job"] == "quorum_health"
    assert found[0]["metric"]["instance"] == monitoring_stack.exporter.address


def test_prometheus_loads_every_alerting_rule(monitoring_stack):
    groups = json.loads(http_get(f"{monitoring_stack.prometheus.url}/api/v1/rules"))["data"]["groups"]
    names = {rule["name"] for group in groups for rule in group["rules"]}
    assert {"QuorumSplitBrain", "QuorumVoterUnreachable", "QuorumMonitorSilent"} <= names
    assert sum(len(group["rules"]) for group in groups) == alerting_rule_count(DEFAULT_RULES)


def test_a_pushed_split_brain_fires_and_pages_through_alertmanager(monitoring_stack):
    wait_for(lambda: series(monitoring_stack, 'ALERTS{alertname="QuorumSplitBrain", alertstate="firing", cluster="c1"}'),
             20, "QuorumSplitBrain firing for c1 in Prometheus")

    def paged() -> list[str]:
        return [alert["labels"]["cluster"] for path, payload in monitoring_stack.webhooks.received
                if path == "/quorum-oncall-pager" for alert in payload["alerts"]
                if alert["labels"]["alertname"] == "QuorumSplitBrain" and alert["status"] == "firing"]

    assert wait_for(paged, 20, "the pager receiver to get QuorumSplitBrain") == ["c1"]
    # the exporter's cluster has one leader: nothing fires for it
    assert series(monitoring_stack, 'ALERTS{alertname="QuorumSplitBrain", cluster="c2"}') == []


def test_every_dashboard_query_parses_and_returns_data(monitoring_stack):
    queries = panel_queries()
    assert len(queries) > 20

    def failing() -> dict[str, object]:
        problems = {}
        for q in queries:
            answer = monitoring_stack.query(q.expr)
            if answer["status"] != "success":
                problems[f"{q.panel}/{q.ref_id}"] = answer.get("error")
            elif not answer["data"]["result"]:
                problems[f"{q.panel}/{q.ref_id}"] = "no data"
        return problems

    # rate() and increase() need two scrapes, ALERTS the first rule evaluation: poll until then
    problems = failing()
    if problems:
        wait_for(lambda: not failing(), 20, "every panel query to return data")
    for q in queries:
        assert monitoring_stack.query(q.expr)["status"] == "success", q
