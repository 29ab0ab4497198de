"""The Prometheus binaries (Debian packages) for tests: fail with the install command when one is
missing (CI installs them, so a missing binary is a broken environment, not a reason to skip),
run the command-line tools, and run the servers on loopback free ports until the test ends; and
the shipped alerting rules, read as Prometheus reads them."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
from pathlib import Path

import pytest
import yaml

from quorum.http_client_config import NO_CLIENT_CONFIG, HttpClientConfig
from quorum.local_kafka.loopback_ports import free_port

RULES = yaml.safe_load((Path(__file__).resolve().parents[1] / "alerts" / "quorum-health.rules.yml").read_text())

PACKAGE_OF = {
    "promtool": "prometheus",
    "prometheus": "prometheus",
    "prometheus-pushgateway": "prometheus-pushgateway",
    "prometheus-alertmanager": "prometheus-alertmanager",
    "amtool": "prometheus-alertmanager",
}
INSTALL = "sudo apt-get install -y prometheus prometheus-pushgateway prometheus-alertmanager"


def binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"`{name}` is not on PATH; it comes from the Debian package {PACKAGE_OF[name]}: "
                    f"install with `{INSTALL}`", pytrace=False)
    return path


def run_tool(name: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([binary(name), *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def assert_tool_succeeds(name: str, *args: str, cwd: Path | None = None) -> str:
    result = run_tool(name, *args, cwd=cwd)
    if result.returncode != 0:
        pytest.fail(f"`{name} {' '.join(args)}` exited {result.returncode}:\n{result.stdout}\n{result.stderr}",
                    pytrace=False)
    return result.stdout + result.stderr


def alerting_rule_count(rules_file: Path) -> int:
    import yaml
    return sum(len(group["rules"]) for group in yaml.safe_load(rules_file.read_text())["groups"])


def http_get(url: str, timeout: float = 2.0, client: HttpClientConfig = NO_CLIENT_CONFIG) -> bytes:
    with client.open(url, timeout) as response:
        return response.read()


def promql(prometheus: "Server", query: str) -> list[dict]:
    """The result of an instant query: a list of {"metric": labels, "value": [time, value]}."""
    url = f"{prometheus.url}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    return json.loads(http_get(url))["data"]["result"]


class Server:
    """One server process on 127.0.0.1:`port`, ready once `GET /-/ready` answers 200. A server
    behind TLS or basic auth (its --web.config.file) is asked with `client` (its CA, credentials)."""

    def __init__(self, name: str, args_for_port, workdir: Path, ready_timeout_s: float = 30.0,
                 client: HttpClientConfig = NO_CLIENT_CONFIG):
        self.name = name
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.client = client
        self.url = f"{'https' if client.tls is not None else 'http'}://{self.address}"
        self.log_path = workdir / f"{name}.log"
        self._args = [binary(name), *args_for_port(self.address)]
        self._ready_timeout_s = ready_timeout_s
        self._process: subprocess.Popen | None = None

    def __enter__(self) -> "Server":
        self._log = self.log_path.open("wb")
        self._process = subprocess.Popen(self._args, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self._ready_timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                self.__exit__(None, None, None)
                pytest.fail(f"{self.name} exited {self._process.returncode}:\n{self.log_tail()}", pytrace=False)
            try:
                http_get(f"{self.url}/-/ready", timeout=1.0, client=self.client)
                return self
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.1)
        self.__exit__(None, None, None)
        pytest.fail(f"{self.name} not ready after {self._ready_timeout_s} s:\n{self.log_tail()}", pytrace=False)

    def __exit__(self, *exc) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._log.close()

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


def wait_for(condition, timeout_s: float, what, interval_s: float = 0.2):
    """Poll `condition()` until it returns something truthy; fail naming `what` at the deadline
    (a callable `what` is asked then, to say what was seen)."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = condition()
        if last:
            return last
        time.sleep(interval_s)
    if callable(what):
        what = what()
    pytest.fail(f"timed out after {timeout_s} s waiting for {what} (last: {last!r})", pytrace=False)


def rule(name: str) -> dict:
    """The shipped alerting rule `name`."""
    return next(r for g in RULES["groups"] for r in g["rules"] if r.get("alert") == name)


def seconds(duration: str) -> float:
    """A Prometheus duration (`for: 1m30s`) in seconds."""
    total = 0.0
    for number, unit in re.findall(r"(\d+)(ms|s|m|h)", duration):
        total += int(number) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]
    return total
