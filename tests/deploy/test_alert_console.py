"""The local stack's Alertmanager receiver: each notified alert printed as a line, and kept as a
JSON line for the nemesis, from a real HTTP POST as Alertmanager's webhook sends it."""
from __future__ import annotations

import json
import urllib.request

from deploy.alert_console import AlertConsole
from quorum.local_kafka.loopback_ports import free_port

PAYLOAD = {"status": "firing", "alerts": [
    {"status": "firing", "startsAt": "2026-12-05T07:00:01.25Z",
     "labels": {"alertname": "QuorumVoterUnreachable", "severity": "warning", "cluster": "c1", "partition": "0",
                "replica": "2"},
     "annotations": {"summary": "Voter 2 of cluster c1 is unreachable, cause: down"}},
    {"status": "resolved", "startsAt": "2026-12-05T06:59:00Z",
     "labels": {"alertname": "QuorumNoMajority", "severity": "critical", "cluster": "c1", "partition": "0"},
     "annotations": {}}]}


def test_each_notified_alert_is_printed_and_kept(tmp_path):
    lines: list[str] = []
    record = tmp_path / "alert-notifications.jsonl"
    console = AlertConsole("127.0.0.1", free_port(), lines.append, record=record).start()
    try:
        for _ in range(2):
            request = urllib.request.Request(console.url, data=json.dumps(PAYLOAD).encode(), method="POST",
                                             headers={"Content-Type": "application/json"})
            urllib.request.urlopen(request, timeout=10).read()
    finally:
        console.stop()
    assert lines[:2] == [
        "FIRING   warning  QuorumVoterUnreachable cluster=c1 partition=0 replica=2 Voter 2 of cluster c1 is "
        "unreachable, cause: down",
        "RESOLVED critical QuorumNoMajority cluster=c1 partition=0"]
    kept = [json.loads(line) for line in record.read_text().splitlines()]
    assert [(k["status"], k["labels"]["alertname"], k["startsAt"]) for k in kept] == [
        ("firing", "QuorumVoterUnreachable", "2026-12-05T07:00:01.25Z"),
        ("resolved", "QuorumNoMajority", "2026-12-05T06:59:00Z")] * 2
    assert all(k["received"] > 1.7e9 for k in kept)


def test_without_a_record_nothing_is_kept(tmp_path):
    lines: list[str] = []
    console = AlertConsole("127.0.0.1", free_port(), lines.append).start()
    try:
        request = urllib.request.Request(console.url, data=json.dumps(PAYLOAD).encode(), method="POST")
        urllib.request.urlopen(request, timeout=10).read()
    finally:
        console.stop()
    assert len(lines) == 2 and list(tmp_path.iterdir()) == []
