"""The commands the README shows run as shown: the two set-up commands and the operator's commands
answer `--help`, the shipped job config passes `streaming check-config`, and every benchmark
docs/performance.md lists explains itself with `--help`. (The commands themselves run in tests/stack,
tests/deploy, tests/node and tests/kafka_watch.)"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
PERFORMANCE = (ROOT / "docs" / "performance.md").read_text()
BIN = Path(sys.executable).parent


def run(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env={**os.environ, "PYTHON": sys.executable})


def listed_benchmarks() -> list[str]:
    """The scripts of docs/performance.md's table (a row each: `| `name.py` | measures | against |`)."""
    return sorted(set(re.findall(r"^\| `(\w+\.py)` \|", PERFORMANCE, re.M)))


def test_the_readme_names_the_two_commands():
    assert "deploy/run-local        #" in README and "deploy/run-tests        #" in README


def test_run_local_help_lists_its_actions():
    out = run("bash", "deploy/run-local", "--help")
    assert out.returncode == 0, out.stderr
    for action in ("down", "status", "chaos", "follower", "leader", "--synthetic", "--duration"):
        assert action in out.stdout, action


def test_run_tests_passes_its_arguments_to_pytest():
    out = run("bash", "deploy/run-tests", "--co", "-q", "tests/docs/test_links.py")
    assert out.returncode == 0, out.stdout + out.stderr
    assert re.search(r"\d+ tests? collected", out.stdout), out.stdout


@pytest.mark.parametrize("command", [
    ["quorum", "--help"], ["quorum", "describe", "--help"], ["quorum", "collect", "--help"],
    ["quorum", "broker", "--help"], ["streaming", "--help"], ["streaming", "check-config", "--help"]])
def test_operator_commands_answer_help(command):
    out = run(str(BIN / command[0]), *command[1:], timeout=60)
    assert out.returncode == 0 and "usage:" in out.stdout, out.stdout + out.stderr


def test_the_shipped_job_config_passes_check_config():
    out = run(str(BIN / "streaming"), "check-config", "--config", "deploy/job.local.yaml", timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_incident_picture_script_answers_help():
    out = run(sys.executable, "deploy/incident_picture.py", "--help", timeout=60)
    assert out.returncode == 0 and "docs/incident.png" in out.stdout, out.stdout + out.stderr


def test_spark_submit_script_answers_help():
    out = run("bash", "deploy/cluster/spark-submit.sh", "--help", timeout=60)
    assert out.returncode == 0 and "--packages" in out.stdout, out.stdout + out.stderr


@pytest.mark.parametrize("script", listed_benchmarks())
def test_every_listed_benchmark_explains_itself(script):
    out = run(sys.executable, f"benchmarks/{script}", "--help", timeout=60)
    assert out.returncode == 0 and "usage:" in out.stdout, out.stdout + out.stderr
    assert len(out.stdout.splitlines()) > 5, f"{script} --help says too little"


def test_every_benchmark_script_is_in_the_performance_page():
    """A script that runs on its own is in the table, or named on the page as a helper the
    benchmarks start; and the README points at the page."""
    runnable = {path.name for path in (ROOT / "benchmarks").glob("*.py")
                if '__name__ == "__main__"' in path.read_text()}
    assert len(listed_benchmarks()) >= 10
    assert not {name for name in runnable if f"`{name}`" not in PERFORMANCE and f"benchmarks/{name}" not in PERFORMANCE}
    assert "[docs/performance.md](docs/performance.md)" in README
