"""The Alertmanager example passes `amtool check-config`, routes by severity, and a real
Alertmanager running it inhibits the alerts a bigger failure explains."""
from __future__ import annotations

import json
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from prometheus_tools import Server, assert_tool_succeeds, http_get, run_tool, wait_for

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "alerts" / "alertmanager.example.yml"


def test_example_passes_amtool_check_config():
    assert "SUCCESS" in assert_tool_succeeds("amtool", "check-config", str(EXAMPLE))


@pytest.mark.parametrize("labels, receiver", [
    (["severity=critical", "alertname=QuorumSplitBrain"], "quorum-oncall-pager"),
    (["severity=critical", "alertname=QuorumMonitorSilent"], "quorum-oncall-pager"),
    (["severity=warning", "alertname=QuorumVoterUnreachable"], "quorum-team-chat"),
    (["alertname=SomethingWithoutSeverity"], "quorum-team-chat"),
])
def test_routes_by_severity(labels, receiver):
    result = run_tool("amtool", "config", "routes", "test", f"--config.file={EXAMPLE}",
                      f"--verify.receivers={receiver}", *labels)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture(scope="module")
def alertmanager(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("alertmanager")
    with Server("prometheus-alertmanager", lambda address: [
        f"--config.file={EXAMPLE}", f"--storage.path={workdir}", f"--web.listen-address={address}",
        "--cluster.listen-address=",  # no gossip port: one instance, loopback only
    ], workdir) as server:
        yield server


def post_alerts(alertmanager: Server, alerts: list[dict]) -> None:
    now = datetime.now(timezone.utc)
    body = [{"labels": labels, "startsAt": now.isoformat(), "endsAt": (now + timedelta(minutes=5)).isoformat()}
            for labels in alerts]
    request = urllib.request.Request(f"{alertmanager.url}/api/v2/alerts", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    urllib.request.urlopen(request, timeout=5).read()


def alert_states(alertmanager: Server, cluster: str) -> dict[str, str]:
    alerts = json.loads(http_get(f"{alertmanager.url}/api/v2/alerts?filter=cluster%3D%22{cluster}%22"))
    return {a["labels"]["alertname"]: a["status"]["state"] for a in alerts}


def test_a_quorum_that_cannot_commit_suppresses_its_stalled_high_watermark_and_elections(alertmanager):
    quorum = {"cluster": "c1", "partition": "__cluster_metadata-0"}
    post_alerts(alertmanager, [
        {"alertname": "QuorumLeaderless", "severity": "critical", **quorum},
        {"alertname": "QuorumHighWatermarkStalled", "severity": "critical", **quorum},
        {"alertname": "QuorumElectionStorm", "severity": "warning", **quorum},
        {"alertname": "QuorumVoterUnreachable", "severity": "warning", "replica": "2", **quorum},
        # another quorum's stall is not explained by c1's missing leader
        {"alertname": "QuorumHighWatermarkStalled", "severity": "critical", "cluster": "c2",
         "partition": "__cluster_metadata-0"},
        {"alertname": "QuorumNoMajority", "severity": "critical", "cluster": "c4", "partition": "__cluster_metadata-0"},
        {"alertname": "QuorumHighWatermarkStalled", "severity": "critical", "cluster": "c4",
         "partition": "__cluster_metadata-0"},
    ])
    expected = {"QuorumLeaderless": "active", "QuorumHighWatermarkStalled": "suppressed",
                "QuorumElectionStorm": "suppressed", "QuorumVoterUnreachable": "active"}
    wait_for(lambda: alert_states(alertmanager, "c1") == expected, 10, f"c1's alerts to be {expected}")
    assert alert_states(alertmanager, "c2") == {"QuorumHighWatermarkStalled": "active"}
    assert alert_states(alertmanager, "c4") == {"QuorumNoMajority": "active", "QuorumHighWatermarkStalled": "suppressed"}


def test_silent_monitor_suppresses_warnings_but_not_pages(alertmanager):
    quorum = {"cluster": "c3", "partition": "__cluster_metadata-0"}
    post_alerts(alertmanager, [
        {"alertname": "QuorumMonitorSilent", "severity": "critical", "cause": "input_stalled"},
        {"alertname": "QuorumVoterStalled", "severity": "warning", "replica": "2", **quorum},
        {"alertname": "QuorumSplitBrain", "severity": "critical", **quorum},
    ])
    expected = {"QuorumVoterStalled": "suppressed", "QuorumSplitBrain": "active"}
    wait_for(lambda: alert_states(alertmanager, "c3") == expected, 10, f"c3's alerts to be {expected}")
