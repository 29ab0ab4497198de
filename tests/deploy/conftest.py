"""A monitoring stack of real servers on loopback free ports, for the deployment tests: a
Pushgateway holding one cluster's metrics as the streaming job pushes them, an exporter endpoint
serving another cluster's (the job's other mode), Alertmanager with the example configuration
(its receivers pointed at a webhook recorder), and Prometheus configured by
`deploy/prometheus_config.py` with the alerting rules, scraping every second."""
from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from deploy.prometheus_config import DEFAULT_RULES, render_prometheus_config
from prometheus_tools import Server
from quorum.local_kafka.loopback_ports import free_port
from quorum_metric_names import CAUSES, QUORUM_STATUSES, REPLICA_STATUSES

ROOT = Path(__file__).resolve().parents[2]
PARTITION = "__cluster_metadata-0"
VOTERS = (1, 2, 3)
OBSERVER = 3000


def cluster_exposition(cluster: str, leaders_claimed: int = 1, poll_error: str | None = None) -> str:
    """Every per-replica and per-quorum metric of the contract for a 3-voter + 1-observer quorum
    whose voter 3 is unreachable, in the text format; with `poll_error`, the collector's polls
    fail (its error is a series only then), while the nodes' own views still arrive."""
    def labels(**extra) -> str:
        pairs = {"cluster": cluster, "partition": PARTITION} | extra
        return "{" + ",".join(f'{k}="{v}"' for k, v in pairs.items()) + "}"

    lines = []

    def metric(name: str, kind: str, samples: list[tuple[str, float]]) -> None:
        lines.append(f"# TYPE {name} {kind}")
        lines.extend(f"{name}{label_text} {value}" for label_text, value in samples)

    replicas = [(r, "voter") for r in VOTERS] + [(OBSERVER, "observer")]
    status_of = {1: "caught_up", 2: "caught_up", 3: "unreachable", OBSERVER: "lagging"}
    per_replica = lambda value: [(labels(replica=r, role=role), value(r)) for r, role in replicas]  # noqa: E731
    metric("quorum_replica_lag_records", "gauge", per_replica(lambda r: 0 if status_of[r] == "caught_up" else 120))
    metric("quorum_replica_lag_seconds", "gauge", per_replica(lambda r: 0 if status_of[r] == "caught_up" else 7.5))
    metric("quorum_replica_last_fetch_age_seconds", "gauge", per_replica(lambda r: 9 if r == 3 else 0.2))
    metric("quorum_replica_caught_up_ratio", "gauge", per_replica(lambda r: 1 if status_of[r] == "caught_up" else 0.6))
    metric("quorum_replica_status", "gauge", [(labels(replica=r, role=role, status=s), int(status_of[r] == s))
                                              for r, role in replicas for s in REPLICA_STATUSES])
    cause_of = {3: "partitioned", OBSERVER: "behind"}
    metric("quorum_replica_cause", "gauge", [(labels(replica=r, role=role, cause=c), int(cause_of.get(r) == c))
                                             for r, role in replicas for c in CAUSES])
    metric("quorum_replica_truncations_total", "counter", per_replica(lambda r: 1 if r == 2 else 0))
    metric("quorum_replica_truncated_records_total", "counter", per_replica(lambda r: 4 if r == 2 else 0))
    quorum_status = "split_brain" if leaders_claimed > 1 else "degraded"
    for name, kind, value in [
        ("quorum_leader_id", "gauge", 1), ("quorum_leader_epoch", "gauge", 7),
        ("quorum_high_watermark", "gauge", 5230), ("quorum_high_watermark_age_seconds", "gauge", 0.4),
        ("quorum_voters", "gauge", 3), ("quorum_voters_caught_up", "gauge", 2),
        ("quorum_voters_reachable", "gauge", 2), ("quorum_majority_reachable", "gauge", 1),
        ("quorum_elections_total", "counter", 7), ("quorum_epoch_changes_window", "gauge", 1), ("quorum_leader_changes_window", "gauge", 1),
        ("quorum_leaders_claimed", "gauge", leaders_claimed), ("quorum_zombie_leaders", "gauge", 0),
        ("quorum_leader_changes_total", "counter", 2), ("quorum_candidate_epoch", "gauge", -1),
        ("quorum_incarnations_total", "counter", 0), ("quorum_voter_set_changes_total", "counter", 0),
        ("quorum_network_partition", "gauge", 1), ("quorum_voters_cut_off", "gauge", 1),
        # two of three voters reachable: a majority of two, no voter to spare
        ("quorum_fault_tolerance", "gauge", 0),
        ("quorum_collector_poll_failures", "gauge", 4 if poll_error else 0),
    ]:
        metric(name, kind, [(labels(), value)])
    if poll_error:
        metric("quorum_collector_poll_error", "gauge", [(labels(error=poll_error), 1)])
    metric("quorum_status", "gauge", [(labels(status=s), int(s == quorum_status)) for s in QUORUM_STATUSES])
    return "\n".join(lines) + "\n"


def monitor_exposition() -> str:
    """The job's own health, as the Pushgateway sink labels it (cluster="_monitor")."""
    lines = [
        "# TYPE quorum_monitor_input_records_total counter", "quorum_monitor_input_records_total 81234",
        "# TYPE quorum_monitor_invalid_records_total counter",
        'quorum_monitor_invalid_records_total{reason="bad_json"} 3',
        "# TYPE quorum_monitor_batch_duration_seconds gauge", "quorum_monitor_batch_duration_seconds 0.8",
        "# TYPE quorum_monitor_input_delay_seconds gauge", "quorum_monitor_input_delay_seconds 1.2",
        "# TYPE quorum_monitor_last_batch_timestamp_seconds gauge",
        f"quorum_monitor_last_batch_timestamp_seconds {time.time():.3f}",
        "# TYPE quorum_monitor_input_stalled gauge", "quorum_monitor_input_stalled 0",
        "# TYPE quorum_monitor_push_failures_total counter", "quorum_monitor_push_failures_total 0",
        "# TYPE quorum_monitor_sink_failures_total counter", 'quorum_monitor_sink_failures_total{sink="kafka"} 0',
        "# TYPE quorum_monitor_health_events_pending gauge", "quorum_monitor_health_events_pending 0",
        "# TYPE quorum_monitor_health_events_dropped_total counter", "quorum_monitor_health_events_dropped_total 0",
    ]
    labelled = lambda line: (  # noqa: E731
        line if line.startswith("#") else line.replace("{", '{cluster="_monitor",', 1) if "{" in line
        else line.replace(" ", '{cluster="_monitor"} ', 1))
    return "\n".join(map(labelled, lines)) + "\n"


def push_job_group(pushgateway: Server, body: str) -> None:
    """PUT the job's one group, as the streaming job does (PUT replaces the whole group)."""
    request = urllib.request.Request(f"{pushgateway.url}/metrics/job/quorum_health", data=body.encode(),
                                     method="PUT")
    urllib.request.urlopen(request, timeout=5).read()


class _Recorder(BaseHTTPRequestHandler):
    """Serves the exporter's /metrics (GET) and records Alertmanager's webhook calls (POST)."""
    exposition = ""
    received: list[tuple[str, dict]] = []

    def do_GET(self):
        body = self.exposition.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.received.append((self.path, payload))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


class HttpStub:
    def __init__(self, exposition: str):
        handler = type("Handler", (_Recorder,), {"exposition": exposition, "received": []})
        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        self.received = handler.received
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def alertmanager_config_with_receivers_at(webhook: str, workdir: Path) -> Path:
    config = yaml.safe_load((ROOT / "alerts" / "alertmanager.example.yml").read_text())
    for receiver in config["receivers"]:
        for hook in receiver["webhook_configs"]:
            hook["url"] = f"http://{webhook}/{receiver['name']}"
    path = workdir / "alertmanager.yml"
    path.write_text(yaml.safe_dump(config))
    return path


class MonitoringStack:
    def __init__(self, pushgateway, exporter, webhooks, alertmanager, prometheus):
        self.pushgateway, self.exporter, self.webhooks = pushgateway, exporter, webhooks
        self.alertmanager, self.prometheus = alertmanager, prometheus

    def query(self, promql: str) -> dict:
        url = f"{self.prometheus.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as e:  # 400/422 carry the parse or evaluation error
            return json.loads(e.read())


@pytest.fixture(scope="session")
def monitoring_stack(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("monitoring")
    exporter = HttpStub(cluster_exposition("c2"))
    webhooks = HttpStub("")
    am_config = alertmanager_config_with_receivers_at(webhooks.address, workdir)
    try:
        with Server("prometheus-pushgateway", lambda a: [f"--web.listen-address={a}", "--persistence.file="],
                    workdir) as pushgateway, \
             Server("prometheus-alertmanager", lambda a: [
                 f"--config.file={am_config}", f"--storage.path={workdir / 'am'}", f"--web.listen-address={a}",
                 "--cluster.listen-address="], workdir) as alertmanager:
            push_job_group(pushgateway, cluster_exposition("c1", leaders_claimed=2, poll_error="timeout")
                           + monitor_exposition())
            config = workdir / "prometheus.yml"
            config.write_text(render_prometheus_config(pushgateway.address, exporter.address, alertmanager.address,
                                                       DEFAULT_RULES, scrape_interval=1))
            with Server("prometheus", lambda a: [
                f"--config.file={config}", f"--storage.tsdb.path={workdir / 'tsdb'}", f"--web.listen-address={a}",
            ], workdir) as prometheus:
                yield MonitoringStack(pushgateway, exporter, webhooks, alertmanager, prometheus)
    finally:
        exporter.close()
        webhooks.close()
