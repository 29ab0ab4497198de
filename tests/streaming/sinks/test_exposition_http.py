"""The exporter answers every /metrics request as prometheus_client's own server answers it for
the same registry (status, content type, encoding, body), whatever format is asked for, with and
without a web config; Prometheus' own Accept headers are served from the kept text."""
from __future__ import annotations

import gzip
import urllib.request

import pytest
from prometheus_client import start_http_server
from prometheus_client.exposition import choose_encoder

from streaming.health.config import HealthConfig
from streaming.sinks.config import PrometheusSinkConfig
from streaming.sinks.exporter import ExporterSink
from streaming.sinks.exposition_http import rendered_as
from streaming.sinks.metrics_server import start_metrics_server
from streaming.sinks.monitor import MonitorMetrics
from streaming.sinks.snapshot import HealthSnapshot
from streaming.sinks.web_config import WebConfig

from .health_rows import ScriptedQuorum

PROMETHEUS_3 = ("application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,"
                "application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,"
                "text/plain;version=0.0.4;q=0.3,*/*;q=0.2")
PROMETHEUS_2 = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
                "text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
ACCEPTS = [None, PROMETHEUS_3, PROMETHEUS_2, "text/plain;version=1.0.0;escaping=underscores",
           "application/openmetrics-text", "application/openmetrics-text;version=1.0.0;escaping=dots",
           "text/plain;version=1.0.0;escaping=values"]
REQUESTS = [(path, accept, encoding) for accept in ACCEPTS for path in ("/metrics", "/metrics?name[]=quorum_status")
            for encoding in (None, "gzip")]


def get(port: int, path: str, accept: str | None, encoding: str | None) -> tuple[int, str, str | None, bytes]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if accept is not None:
        request.add_header("Accept", accept)
    if encoding is not None:
        request.add_header("Accept-Encoding", encoding)
    with urllib.request.urlopen(request, timeout=10) as answer:
        body = answer.read()
        if answer.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)  # the bytes compressed, not the compression, are compared
        return answer.status, answer.headers["Content-Type"], answer.headers.get("Content-Encoding"), body


@pytest.fixture
def exporter():
    snapshot = HealthSnapshot()
    for i, cluster in enumerate(["c1", 'quo"te', "c3"]):
        snapshot.apply(ScriptedQuorum(cluster, observers=(4,) if i else ()).rows(3000))
    # a fixed clock: the job's own series stay put between the two servers' answers
    monitor = MonitorMetrics(HealthConfig(), clock=lambda: 1_000.0)
    sink = ExporterSink(PrometheusSinkConfig(mode="exporter", exporter_host="127.0.0.1", exporter_port=0),
                        snapshot, monitor)
    yield sink
    sink.close()


def test_prometheus_is_served_from_the_kept_text():
    for accept in (PROMETHEUS_3, PROMETHEUS_2, None):
        assert rendered_as(choose_encoder(accept)[0]) is not None


def test_the_exporter_answers_as_the_librarys_server(exporter):
    library, thread = start_http_server(0, addr="127.0.0.1", registry=exporter.registry)
    try:
        for path, accept, encoding in REQUESTS:
            ours = get(exporter.port, path, accept, encoding)
            assert ours == get(library.server_address[1], path, accept, encoding), (path, accept, encoding)
    finally:
        library.shutdown()
        library.server_close()


def test_with_a_web_config_the_exporter_answers_as_the_librarys_handler(exporter):
    old, _ = start_metrics_server("127.0.0.1", 0, exporter.registry, WebConfig())
    new, _ = start_metrics_server("127.0.0.1", 0, exporter.registry, WebConfig(), exporter.collector)
    try:
        for path, accept, encoding in REQUESTS:
            ours = get(new.server_address[1], path, accept, encoding)
            assert ours == get(old.server_address[1], path, accept, encoding), (path, accept, encoding)
    finally:
        for server in (old, new):
            server.shutdown()
            server.server_close()
