"""The job's Prometheus endpoints behind TLS and basic auth, against the real servers: the Debian
Prometheus scrapes the /metrics exporter (exporter_web_config) over HTTPS with basic auth, and is
refused with a wrong password; the exporter answers 401 without credentials and refuses a client
without a certificate when it asks for one; the pusher pushes to a Pushgateway started with a web
config that requires TLS and basic auth (pushgateway_client_config), and a wrong password is a
counted push failure, logged without the password."""
from __future__ import annotations

import contextlib
import json
import logging
import ssl
import urllib.error

import pytest
import yaml

from prometheus_tools import Server, http_get, promql, wait_for
from quorum.http_client_config import HttpClientConfig, load_http_client_config
from quorum.local_kafka.loopback_ports import free_port
from streaming.health.config import HealthConfig
from streaming.sinks import SinkConfig, make_batch_writer
from tls_files import bcrypt_hash

from .health_rows import ScriptedQuorum

SCRAPE_PASSWORD, PUSH_PASSWORD, WRONG_PASSWORD = "scrape-pw-1", "push-pw-2", "wrong-pw-3"


@pytest.fixture(scope="module")
def files(test_ca, tmp_path_factory):
    """The servers' web configs and the clients' files, in one directory."""
    d = tmp_path_factory.mktemp("secured")
    exporter, gateway, client = test_ca.issue("exporter"), test_ca.issue("pushgateway"), test_ca.issue("scraper")
    (d / "scrape-password").write_text(SCRAPE_PASSWORD)
    (d / "push-password").write_text(PUSH_PASSWORD)
    (d / "wrong-password").write_text(WRONG_PASSWORD)

    def write(name: str, content: dict) -> str:
        (d / name).write_text(yaml.safe_dump(content))
        return str(d / name)

    def client_file(name: str, username: str | None = None, password_file: str | None = None, **tls) -> str:
        """A Prometheus HTTP client config trusting the test CA, with these credentials."""
        content = {"tls_config": {"ca_file": str(test_ca.cert), **tls}}
        if username:
            content["basic_auth"] = {"username": username, "password_file": password_file}
        return write(name, content)

    tls = {"cert_file": str(exporter.cert), "key_file": str(exporter.key)}
    return {
        "ca": str(test_ca.cert), "dir": d,
        "exporter_web": write("exporter-web.yml", {"tls_server_config": tls,
                                                    "basic_auth_users": {"prometheus": bcrypt_hash(SCRAPE_PASSWORD)}}),
        "exporter_mtls_web": write("exporter-mtls-web.yml", {"tls_server_config": {
            **tls, "client_ca_file": str(test_ca.cert), "client_auth_type": "RequireAndVerifyClientCert"}}),
        "gateway_web": write("gateway-web.yml", {
            "tls_server_config": {"cert_file": str(gateway.cert), "key_file": str(gateway.key)},
            "basic_auth_users": {"quorum_health": bcrypt_hash(PUSH_PASSWORD)}}),
        "push_client": client_file("push-client.yml", "quorum_health", "push-password"),
        "wrong_push_client": client_file("wrong-push-client.yml", "quorum_health", "wrong-password"),
        "scrape_client": client_file("scrape-client.yml", "prometheus", "scrape-password"),
        "ca_only_client": client_file("ca-only-client.yml"),
        "cert_client": client_file("cert-client.yml", cert_file=str(client.cert), key_file=str(client.key)),
    }


@contextlib.contextmanager
def secured_exporter(web_config: str):
    """A batch writer in exporter mode serving /metrics as `web_config` says, until the block ends."""
    writer = make_batch_writer(SinkConfig.from_dict({"prometheus": {
        "mode": "exporter", "exporter_host": "127.0.0.1", "exporter_port": free_port(),
        "exporter_web_config": web_config}}), HealthConfig())
    try:
        yield writer
    finally:
        writer.close()


def metrics_url(writer) -> str:
    return f"https://127.0.0.1:{writer.prometheus.port}/metrics"


def scrape_job(name: str, port: int, ca: str, password_file: str) -> dict:
    return {"job_name": name, "scheme": "https", "tls_config": {"ca_file": ca},
            "basic_auth": {"username": "prometheus", "password_file": password_file},
            "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}


def test_prometheus_scrapes_the_exporter_over_tls_with_basic_auth_and_is_refused_with_a_wrong_password(
        files, tmp_path):
    with secured_exporter(files["exporter_web"]) as writer:
        writer.write_rows(ScriptedQuorum("c1").rows(2000), batch_id=0)
        port = writer.prometheus.port
        config = tmp_path / "prometheus.yml"
        config.write_text(json.dumps({"global": {"scrape_interval": "1s"}, "scrape_configs": [
            scrape_job("secured", port, files["ca"], str(files["dir"] / "scrape-password")),
            scrape_job("wrong_password", port, files["ca"], str(files["dir"] / "wrong-password"))]}))
        args = lambda addr: [f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
                             f"--web.listen-address={addr}"]
        with Server("prometheus", args, tmp_path) as prometheus:
            wait_for(lambda: promql(prometheus, 'up{job="secured"} == 1'), 30, "the secured scrape to succeed")
            assert promql(prometheus, 'quorum_status{job="secured", cluster="c1", status="healthy"} == 1')
            wait_for(lambda: promql(prometheus, 'up{job="wrong_password"} == 0'), 30, "the wrong password's scrape")
            targets = json.loads(http_get(f"{prometheus.url}/api/v1/targets"))["data"]["activeTargets"]
            [refused] = [t for t in targets if t["labels"]["job"] == "wrong_password"]
            assert "401" in refused["lastError"]


def test_the_exporter_answers_401_without_credentials_and_refuses_plain_http_and_unknown_cas(files):
    with secured_exporter(files["exporter_web"]) as writer:
        url = metrics_url(writer)
        with pytest.raises(urllib.error.HTTPError) as anonymous:
            http_get(url, client=load_http_client_config(files["ca_only_client"]))
        assert anonymous.value.code == 401
        assert anonymous.value.headers["WWW-Authenticate"].startswith('Basic realm="quorum-health"')
        wrong = HttpClientConfig(username="prometheus", password=WRONG_PASSWORD,
                                 tls=load_http_client_config(files["ca_only_client"]).tls)
        with pytest.raises(urllib.error.HTTPError, match="401"):
            http_get(url, client=wrong)
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            http_get(url)  # the system's CAs do not know the test CA
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            http_get(url.replace("https:", "http:"))
        # none of it stopped the server: the right credentials, twice (the second from memory)
        client = load_http_client_config(files["scrape_client"])
        for _ in range(2):
            assert b"quorum_monitor_input_stalled" in http_get(url, client=client)


def test_an_exporter_that_requires_client_certificates_serves_only_clients_that_present_one(files):
    with secured_exporter(files["exporter_mtls_web"]) as writer:
        with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
            http_get(metrics_url(writer), client=load_http_client_config(files["ca_only_client"]))
        assert b"quorum_monitor_input_stalled" in http_get(metrics_url(writer),
                                                          client=load_http_client_config(files["cert_client"]))


@pytest.fixture(scope="module")
def secured_gateway(files, tmp_path_factory):
    work = tmp_path_factory.mktemp("secured-gateway")
    args = lambda addr: [f"--web.listen-address={addr}", "--persistence.file=",
                         f"--web.config.file={files['gateway_web']}"]
    with Server("prometheus-pushgateway", args, work, client=load_http_client_config(files["push_client"])) as gateway:
        yield gateway


def gateway_lines(gateway: Server, *matchers: str) -> list[str]:
    lines = http_get(f"{gateway.url}/metrics", client=gateway.client).decode().splitlines()
    return [ln for ln in lines if not ln.startswith("#") and all(m in ln for m in matchers)]


def test_the_pusher_pushes_to_a_gateway_that_requires_tls_and_basic_auth(files, secured_gateway):
    assert secured_gateway.url.startswith("https://")
    # a group per cluster left by an earlier version: the first round deletes it, through the client too
    old = "# TYPE quorum_leader_id gauge\nquorum_leader_id 1\n"
    secured_gateway.client.open(f"{secured_gateway.url}/metrics/job/secured/cluster/c1", 5, method="PUT",
                                data=old.encode()).close()
    writer = make_batch_writer(SinkConfig.from_dict({"prometheus": {
        "pushgateway_url": secured_gateway.url, "job": "secured",
        "pushgateway_client_config": files["push_client"]}}), HealthConfig())
    try:
        writer.write_rows(ScriptedQuorum("c1").rows(2000), batch_id=0)
        assert writer.flush(30)
        assert writer.monitor.push_failures_total == 0 and writer.prometheus.cluster_groups_deleted
        assert gateway_lines(secured_gateway, 'job="secured"', "quorum_status{", 'cluster="c1"')
        groups = json.loads(http_get(f"{secured_gateway.url}/api/v1/metrics", client=secured_gateway.client))["data"]
        assert [g["labels"] for g in groups if g["labels"].get("job") == "secured"] == [{"job": "secured"}]
    finally:
        writer.close()


def test_a_wrong_push_password_is_a_counted_failure_logged_without_the_password(files, secured_gateway, caplog):
    writer = make_batch_writer(SinkConfig.from_dict({"prometheus": {
        "pushgateway_url": secured_gateway.url, "job": "refused", "push_attempts": 2, "retry_backoff_s": 0.0,
        "pushgateway_client_config": files["wrong_push_client"]}}), HealthConfig())
    try:
        with caplog.at_level(logging.DEBUG, logger="streaming.sinks.pushgateway"):
            writer.write_rows(ScriptedQuorum("c1").rows(2000), batch_id=0)
            assert writer.flush(30)
        assert writer.monitor.push_failures_total == 1 and writer.prometheus.pending
        [warning] = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert "failed after 2 attempts: HTTP Error 401: Unauthorized" in warning.getMessage()
        logged = caplog.text
        assert WRONG_PASSWORD not in logged and PUSH_PASSWORD not in logged
        assert not gateway_lines(secured_gateway, 'job="refused"')
    finally:
        writer.close()
