"""The alerting rules pass `promtool check rules` and their unit tests (`promtool test rules`),
cover every alert of the metrics contract on the contract's metric names, and carry a severity,
a summary, a description and a runbook section that exists."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from prometheus_tools import assert_tool_succeeds
from quorum_metric_names import ALL_METRICS, metric_names_in

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "alerts" / "quorum-health.rules.yml"
UNIT_TESTS = sorted((ROOT / "alerts" / "tests").glob("*.test.yml"))
RUNBOOK = ROOT / "docs" / "runbook.md"

CONTRACT_ALERTS = {
    "QuorumVoterStalled", "QuorumVoterUnreachable", "QuorumObserverLagging", "QuorumNoMajority",
    "QuorumLeaderless", "QuorumHighWatermarkStalled", "QuorumElectionStorm", "QuorumSplitBrain",
    "QuorumZombieLeader", "QuorumMonitorSilent", "QuorumMonitorFallingBehind", "QuorumUnobserved",
    "QuorumOneFailureFromNoMajority",
}
# the quorum cannot commit, safety is violated, or the monitor is blind (see the rules' header)
CRITICAL = {"QuorumSplitBrain", "QuorumZombieLeader", "QuorumNoMajority", "QuorumLeaderless",
            "QuorumHighWatermarkStalled", "QuorumMonitorSilent", "QuorumUnobserved"}


def alerting_rules() -> list[dict]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def test_rules_file_passes_promtool_check():
    output = assert_tool_succeeds("promtool", "check", "rules", str(RULES))
    assert f"SUCCESS: {len(alerting_rules())} rules found" in output


@pytest.mark.parametrize("unit_test", UNIT_TESTS, ids=lambda p: p.name)
def test_promtool_unit_tests_pass(unit_test: Path):
    assert "SUCCESS" in assert_tool_succeeds("promtool", "test", "rules", unit_test.name, cwd=unit_test.parent)


def test_every_contract_alert_has_a_rule_and_nothing_else():
    assert {rule["alert"] for rule in alerting_rules()} == CONTRACT_ALERTS


def test_every_alert_is_unit_tested_both_firing_and_silent():
    firing, silent = set(), set()
    for unit_test in UNIT_TESTS:
        for case in yaml.safe_load(unit_test.read_text())["tests"]:
            for check in case.get("alert_rule_test", []):
                (firing if check.get("exp_alerts") else silent).add(check["alertname"])
    assert CONTRACT_ALERTS - firing == set(), "alerts never expected to fire"
    assert CONTRACT_ALERTS - silent == set(), "alerts never expected to stay silent"


def test_rules_use_only_the_contract_metric_names():
    for rule in alerting_rules():
        unknown = metric_names_in(rule["expr"]) - ALL_METRICS
        assert not unknown, f"{rule['alert']} uses {unknown}, not in docs/metrics.md's contract"


def test_severity_follows_impact():
    for rule in alerting_rules():
        expected = "critical" if rule["alert"] in CRITICAL else "warning"
        assert rule["labels"]["severity"] == expected, rule["alert"]


def test_every_alert_has_a_summary_description_and_a_runbook_section_that_exists():
    anchors = {re.sub(r"[^a-z0-9-]", "", heading.strip().lower().replace(" ", "-"))
               for heading in re.findall(r"^#+ (.+)$", RUNBOOK.read_text(), flags=re.M)}
    for rule in alerting_rules():
        annotations = rule["annotations"]
        assert {"summary", "description", "runbook", "runbook_url"} <= annotations.keys(), rule["alert"]
        assert "{{ $labels." in annotations["summary"] + annotations["description"] or rule["alert"].startswith("QuorumMonitor")
        path, anchor = annotations["runbook_url"].split("#")
        assert path == "docs/runbook.md" and anchor in anchors, f"{rule['alert']}: no section #{anchor} in {RUNBOOK}"


def test_silence_derived_alerts_are_muted_while_the_monitor_input_is_stalled():
    # no events means nothing about the quorum when the job's whole input stopped
    silence_derived = {"QuorumVoterUnreachable", "QuorumNoMajority", "QuorumLeaderless", "QuorumHighWatermarkStalled",
                       "QuorumUnobserved", "QuorumOneFailureFromNoMajority"}
    for rule in alerting_rules():
        if rule["alert"] in silence_derived:
            assert "unless on () (max(quorum_monitor_input_stalled) == 1)" in rule["expr"], rule["alert"]


def test_verdict_alerts_are_muted_on_an_unobserved_quorum():
    # the collector reaching no node says nothing about the quorum: QuorumUnobserved pages instead
    verdicts = {"QuorumVoterUnreachable", "QuorumNoMajority", "QuorumLeaderless", "QuorumHighWatermarkStalled"}
    for rule in alerting_rules():
        if rule["alert"] in verdicts:
            assert 'unless on (cluster, partition) (quorum_status{status="unobserved"} == 1)' in rule["expr"], \
                rule["alert"]
