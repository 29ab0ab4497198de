"""One local stack (`deploy/run-local`) for every module of tests/stack: it takes a minute to
start, so the modules share it, in file order: `test_local_stack` (a quiet stack first, then
chaos and the dashboard), `test_stack_job_restart` (the supervised job killed mid-batch),
`test_stack_nodes_causes` (each fault on real nodes and the cause it must get). The stack runs
`--secure`: its Kafka has TLS, SCRAM users and ACLs, each part its own principal. Every test
leaves the quorum healed."""
from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from deploy.stack_control import StackClient, start_stack, stop_stack
from tests.prometheus_tools import wait_for

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 360
CLUSTER = "local-quorum"


def await_value(what, fn, timeout_s, interval_s=1.0):
    return wait_for(fn, timeout_s, what, interval_s)


def stack_cli(run_dir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "deploy" / "local_stack.py"), "--run-dir", str(run_dir), *args],
                          capture_output=True, text=True, timeout=120)


def chaos(run_dir: Path, *args: str) -> None:
    out = stack_cli(run_dir, "chaos", *args)
    assert out.returncode == 0, out.stdout + out.stderr


def state_of(run_dir: Path) -> dict:
    return StackClient(run_dir).state


# package scope: the stack stops after the last test here, before the other suites run
@pytest.fixture(scope="package")
def stack(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("stack")
    launcher = None
    try:
        # secured (SASL_SSL, SCRAM, ACLs): every part under its own principal, the chaos tests on top
        launcher = start_stack(run_dir, "--kafka-quorum", "--secure", timeout_s=START_TIMEOUT_S)
        yield run_dir, StackClient(run_dir).state
    finally:
        if launcher is not None:
            stop_stack(launcher, 90)
        leftovers = subprocess.run(["pgrep", "-f", str(run_dir)], capture_output=True, text=True).stdout.split()
        assert not leftovers, f"processes left behind: {leftovers}"


def promql(state, query):
    url = f"{state['urls']['prometheus']}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())["data"]["result"]


def promql_range(state, query, start: float, end: float, step: str = "1"):
    params = {"query": query, "start": str(start), "end": str(end), "step": step}
    url = f"{state['urls']['prometheus']}/api/v1/query_range?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=20) as r:
        return json.loads(r.read())["data"]["result"]


def firing(state, alertname=None):
    selector = 'alertstate="firing"' + (f',alertname="{alertname}"' if alertname else "")
    return promql(state, f"ALERTS{{{selector}}}")


def alert_summaries(state, alertname: str, replica: int) -> list[str]:
    """The summaries of `alertname`'s firing alerts for one replica, as Prometheus renders them."""
    with urllib.request.urlopen(f"{state['urls']['prometheus']}/api/v1/alerts", timeout=10) as r:
        alerts = json.loads(r.read())["data"]["alerts"]
    return [a["annotations"].get("summary", "") for a in alerts
            if a["state"] == "firing" and a["labels"].get("alertname") == alertname
            and a["labels"].get("replica") == str(replica)]


def leader_of(state):
    result = promql(state, f'quorum_leader_id{{cluster="{CLUSTER}"}}')
    return int(float(result[0]["value"][1])) if result else None


def await_healthy(state, timeout_s: float = 90, settle_s: float = 5) -> None:
    """The quorum healthy, every replica caught up, and no alert of the stack firing, for
    `settle_s` in a row. Observers count too: right after a leader change an observer is
    lagging for a moment, and a job killed then leaves that verdict in the Pushgateway while it
    restarts, long enough for QuorumObserverLagging's `for:`. And in a row: a verdict reaches
    Prometheus a second or two after the quorum changes."""
    calm_since: list[float] = []

    def calm():
        healthy = promql(state, f'quorum_status{{cluster="{CLUSTER}",status="healthy"}} == 1')
        behind = promql(state, f'quorum_replica_status{{cluster="{CLUSTER}",status!="caught_up"}} == 1')
        alerts = [a for a in firing(state) if a["metric"].get("cluster") in (CLUSTER, None, "_monitor")]
        if not healthy or behind or alerts:
            calm_since.clear()
            return False
        calm_since[:] = calm_since or [time.monotonic()]
        return time.monotonic() - calm_since[0] >= settle_s
    await_value(f"a healthy quorum with no alert firing for {settle_s:g} s", calm, timeout_s)


def admin_client(state) -> dict:
    """librdkafka settings of the secured stack's admin (its credentials directory's admin.properties)."""
    from quorum.kafka_client import kafka_client_properties as kcp
    if not state.get("credentials"):
        return {}
    props = kcp.load_file(Path(state["credentials"]) / "admin.properties")
    return kcp.librdkafka_config(props, "the stack tests' admin")


def health_events(state, since_ms: int = 0) -> list[dict]:
    """Every event on the health topic (read from its start), with its Kafka timestamp."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    consumer = Consumer({"bootstrap.servers": state["urls"]["kafka"], "group.id": "stack-test",
                         "enable.auto.commit": False, "enable.partition.eof": True, **admin_client(state)})
    consumer.assign([TopicPartition("quorum-health", 0, 0)])
    events, deadline = [], time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            m = consumer.poll(1.0)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    break
                raise AssertionError(m.error())
            if m.timestamp()[1] >= since_ms:
                events.append(json.loads(m.value()))
    finally:
        consumer.close()
    return events
