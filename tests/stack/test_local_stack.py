"""The whole local stack, end to end, as `deploy/run-local` starts it: real quorum nodes, the
streaming job, Pushgateway, Prometheus with the alerting rules, Alertmanager.

One stack serves the whole module (it takes a minute to start): first nothing is done for two
minutes and no alert may fire; then a follower is frozen with SIGSTOP and must be reported
unreachable, with its alert firing within the alert's `for:` plus 10 s, and clear after SIGCONT;
then the leader is killed and a new leader must show in the metrics within 10 s.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.prometheus_tools import wait_for

ROOT = Path(__file__).resolve().parents[2]
RULES = yaml.safe_load((ROOT / "alerts" / "quorum-health.rules.yml").read_text())
START_TIMEOUT_S = 360


def rule(name: str) -> dict:
    return next(r for g in RULES["groups"] for r in g["rules"] if r.get("alert") == name)


def seconds(duration: str) -> float:
    total = 0.0
    for number, unit in re.findall(r"(\d+)(ms|s|m|h)", duration):
        total += int(number) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]
    return total


def await_value(what, fn, timeout_s, interval_s=1.0):
    return wait_for(fn, timeout_s, what, interval_s)


def stack_cli(run_dir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "deploy" / "local_stack.py"), "--run-dir", str(run_dir), *args],
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("stack")
    log = open(run_dir / "launcher.log", "wb")
    proc = subprocess.Popen([sys.executable, str(ROOT / "deploy" / "local_stack.py"), "--run-dir", str(run_dir)],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def ready():
            if proc.poll() is not None:
                raise AssertionError(f"launcher exited: {(run_dir / 'launcher.log').read_text()[-3000:]}")
            state = run_dir / "stack.json"
            return (run_dir / "control.sock").exists() and json.loads(state.read_text())
        state = await_value("the stack to start", ready, START_TIMEOUT_S)
        yield run_dir, state
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(90)
        log.close()
        leftovers = subprocess.run(["pgrep", "-f", str(run_dir)], capture_output=True, text=True).stdout.split()
        assert not leftovers, f"processes left behind: {leftovers}"


def promql(state, query):
    url = f"{state['urls']['prometheus']}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())["data"]["result"]


def firing(state, alertname=None):
    selector = 'alertstate="firing"' + (f',alertname="{alertname}"' if alertname else "")
    return promql(state, f"ALERTS{{{selector}}}")


def test_quiet_stack_fires_no_alert_for_two_minutes(stack):
    _run_dir, state = stack
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert not firing(state), firing(state)
        time.sleep(5)
    assert promql(state, 'quorum_status{status="healthy"} == 1'), "the quorum should be healthy"


def leader_of(state):
    result = promql(state, "quorum_leader_id")
    return int(float(result[0]["value"][1])) if result else None


def test_frozen_follower_is_unreachable_and_alerts_then_clears(stack):
    run_dir, state = stack
    leader = await_value("a leader in the metrics", lambda: leader_of(state), 60)
    follower = next(int(n) for n, spec in state["nodes"].items() if spec["voter"] and int(n) != leader)
    out = stack_cli(run_dir, "chaos", "freeze", str(follower))
    assert out.returncode == 0, out.stderr
    frozen_at = time.monotonic()
    alert = rule("QuorumVoterUnreachable")
    # the bound: firing within the alert's for: plus 10 s of the SIGSTOP
    await_value("QuorumVoterUnreachable firing",
                lambda: [a for a in firing(state, "QuorumVoterUnreachable") if a["metric"].get("replica") == str(follower)],
                seconds(alert["for"]) + 10 - (time.monotonic() - frozen_at), 0.5)
    print(f"QuorumVoterUnreachable firing {time.monotonic() - frozen_at:.1f} s after SIGSTOP "
          f"(for: {alert['for']})")
    assert promql(state, f'quorum_replica_status{{replica="{follower}",status="unreachable"}} == 1')
    out = stack_cli(run_dir, "chaos", "heal")
    assert out.returncode == 0, out.stderr
    await_value("the follower caught up again",
                lambda: promql(state, f'quorum_replica_status{{replica="{follower}",status="caught_up"}} == 1'), 30)
    await_value("QuorumVoterUnreachable cleared",
                lambda: not firing(state, "QuorumVoterUnreachable"),
                seconds(alert.get("keep_firing_for", "0s")) + 30)


def test_killed_leader_is_replaced_within_ten_seconds(stack):
    run_dir, state = stack
    old = await_value("a leader in the metrics", lambda: leader_of(state), 60)
    out = stack_cli(run_dir, "chaos", "kill", str(old))
    assert out.returncode == 0, out.stderr
    killed_at = time.monotonic()
    def new_leader():
        leader = leader_of(state)
        return leader if leader is not None and leader >= 0 and leader != old else None
    new = await_value("a new leader in the metrics", new_leader, 10, 0.5)
    assert new != old and time.monotonic() - killed_at <= 10
    print(f"leader {old} killed: leader {new} in the metrics after {time.monotonic() - killed_at:.1f} s")
    assert stack_cli(run_dir, "chaos", "heal").returncode == 0


def test_every_dashboard_panel_returns_data_from_the_running_stack(stack):
    """Runs last, so the chaos above has produced alerts, elections and a leader change too."""
    from confluent_kafka import Producer

    from deploy.dashboard_queries import panel_queries
    _run_dir, state = stack
    # a few records that break the contract, so the invalid-records panel has something to count
    producer = Producer({"bootstrap.servers": state["urls"]["kafka"]})
    for bad in (b"not json", b'{"type": "fetch", "version": 1}', b'{"type": "gossip", "version": 1}'):
        producer.produce("quorum-events", bad)
    assert producer.flush(10) == 0
    await_value("the invalid records counted",
                lambda: promql(state, "rate(quorum_monitor_invalid_records_total[1m])"), 60)
    end = time.time()
    empty = []
    for q in panel_queries(values={"cluster": "local-quorum"}):
        # over the stack's lifetime, instant panels too: "firing alerts" is rightly empty once healed
        params = {"query": q.expr, "start": str(end - 600), "end": str(end), "step": "5"}
        url = f"{state['urls']['prometheus']}/api/v1/query_range?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=20) as r:
            answer = json.loads(r.read())
        assert answer["status"] == "success", (q.panel, q.expr, answer)
        if not answer["data"]["result"]:
            empty.append(f"{q.panel} [{q.ref_id}]: {q.expr}")
    assert not empty, "panels without data:\n" + "\n".join(empty)
