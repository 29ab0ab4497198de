"""The collector's --node-metrics reader against a real Prometheus JMX exporter agent (the
1.0.1 of deploy/jvm/pom.xml) that serves HTTPS with basic auth through its own `httpServer.ssl`
(a JKS keystore made with keytool) and `httpServer.authentication.basic` (a salted SHA-256)
settings, with the project's rules (deploy/kafka-jmx-exporter.yml), attached to a small JVM that
holds a raft-metrics MBean (RaftMetricsStandIn.java) instead of a whole Kafka node.

With the Prometheus HTTP client config file (CA, server name, credentials) the reader gives the
node's record; without the file, without credentials, with a wrong password or without the
name on the agent's certificate, the node's error names the 401 or the certificate, never the
password, and the node is not taken for one whose endpoint refuses connections."""
from __future__ import annotations

import asyncio
import hashlib
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from quorum import jvm
from quorum.http_client_config import NO_CLIENT_CONFIG, HttpClientConfig, load_http_client_config
from quorum.kafka_watch.metrics_connection import scrape
from quorum.kafka_watch.node_scrapes import NodeScrapes
from quorum.local_kafka.kafka_node import JMX_EXPORTER_RULES
from quorum.local_kafka.loopback_ports import free_port

STAND_IN = Path(__file__).with_name("RaftMetricsStandIn.java")
AGENT_USER, AGENT_PASSWORD, WRONG_PASSWORD, KEYSTORE_PASSWORD = "monitor", "agent-pw-4", "wrong-pw-6", "store-pw-5"
AGENT_NAME = "jmx-agent.test"  # the only name on the agent's certificate: 127.0.0.1 is read with server_name
RAFT = {"current-state": "follower", "current-epoch": 5, "current-leader": 1, "log-end-offset": 42,
        "high-watermark": 40}
START_TIMEOUT_S = 60


@dataclass
class Agent:
    url: str
    clients: dict[str, Path]  # client config files by case


def agent_config(keystore: Path, salt: str = "quorum-test-salt") -> dict:
    """The project's rules with the agent's HTTPS and basic auth settings (1.0.1's keys)."""
    config = yaml.safe_load(JMX_EXPORTER_RULES.read_text())
    config["httpServer"] = {
        "ssl": {"keyStore": {"filename": str(keystore), "password": KEYSTORE_PASSWORD},
                "certificate": {"alias": "jmx-agent"}},
        "authentication": {"basic": {"username": AGENT_USER, "algorithm": "SHA-256", "salt": salt,
                                     "passwordHash": hashlib.sha256(f"{salt}:{AGENT_PASSWORD}".encode()).hexdigest()}}}
    return config


def client_files(directory: Path, ca: Path) -> dict[str, Path]:
    (directory / "password").write_text(AGENT_PASSWORD + "\n")
    (directory / "wrong-password").write_text(WRONG_PASSWORD)
    tls = {"ca_file": str(ca), "server_name": AGENT_NAME}
    auth = {"username": AGENT_USER, "password_file": "password"}
    cases = {"right": {"tls_config": tls, "basic_auth": auth},
             "no_credentials": {"tls_config": tls},
             "wrong_password": {"tls_config": tls, "basic_auth": {**auth, "password_file": "wrong-password"}},
             "no_server_name": {"tls_config": {"ca_file": str(ca)}, "basic_auth": auth}}
    for case, content in cases.items():
        (directory / f"{case}.yml").write_text(yaml.safe_dump(content))
    return {case: directory / f"{case}.yml" for case in cases}


@pytest.fixture(scope="module")
def agent(test_ca, tmp_path_factory):
    work = tmp_path_factory.mktemp("jmx-agent")
    leaf = test_ca.issue("jmx-agent", dns=(AGENT_NAME,), ips=())
    config = work / "agent.yml"
    config.write_text(yaml.safe_dump(agent_config(test_ca.java_keystore(leaf, "jmx-agent", KEYSTORE_PASSWORD))))
    port = free_port()
    clients = client_files(work, test_ca.cert)
    right = load_http_client_config(clients["right"])
    url = f"https://127.0.0.1:{port}/metrics"
    with (work / "jvm.log").open("wb") as log:
        process = subprocess.Popen(
            [jvm.java(), "-Xmx64m", "-XX:TieredStopAtLevel=1",
             f"-javaagent:{jvm.jars(jvm.JMX_EXPORTER)[0]}=127.0.0.1:{port}:{config}", str(STAND_IN),
             *(f"{name}={value}" for name, value in RAFT.items())], stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while "kafka_server_raft_metrics_current_epoch" not in answer(url, right):
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the JMX agent never served raft-metrics at {url} (exit code {process.poll()}):\n"
                                f"{(work / 'jvm.log').read_text(errors='replace')[-3000:]}", pytrace=False)
                time.sleep(0.1)
            yield Agent(url, clients)
        finally:
            process.kill()
            process.wait()


def answer(url: str, client: HttpClientConfig) -> str:
    try:
        return scrape(url, 2.0, client)
    except OSError:  # not listening yet
        return ""


def read_once(url: str, client: HttpClientConfig):
    async def once():
        reader = NodeScrapes({3: url}, 5000, client)
        try:
            return await reader.finish(reader.begin(), "c1", (1, 2, 3), last=True)
        finally:
            reader.close()
    return asyncio.run(once())


def test_the_reader_reads_a_node_served_over_https_with_basic_auth(agent):
    records, errors, refusing = read_once(agent.url, load_http_client_config(agent.clients["right"]))
    assert errors == {} and refusing == []
    [record] = records
    assert (record.node_id, record.state, record.epoch, record.leader_id, record.log_end_offset,
            record.high_watermark, record.voter_set) == (3, "follower", 5, 1, 42, 40, (1, 2, 3))


@pytest.mark.parametrize("case, expected", [
    (None, "CERTIFICATE_VERIFY_FAILED"),                 # the system's CAs do not know the agent's
    ("no_credentials", "HTTPError: HTTP Error 401: Unauthorized"),
    ("wrong_password", "HTTPError: HTTP Error 401: Unauthorized"),
    ("no_server_name", "IP address mismatch"),           # the certificate names jmx-agent.test only
])
def test_a_node_read_without_the_right_file_fails_naming_the_401_or_the_certificate(agent, case, expected):
    client = NO_CLIENT_CONFIG if case is None else load_http_client_config(agent.clients[case])
    records, errors, refusing = read_once(agent.url, client)
    assert records == [] and refusing == [] and set(errors) == {3}
    print(f"{case}: {errors[3]}")
    assert expected in errors[3]
    assert AGENT_PASSWORD not in errors[3] and WRONG_PASSWORD not in errors[3]
