"""The local stack's job supervisor on real processes: a stand-in job (a Python process that,
started with --standby, waits for SIGUSR1 as `streaming run --standby` does and says when it got
it) killed with SIGKILL. A standby is started at once (the supervisor comes after the job's first
push), a first death is replaced at once by it, and the next standby waits for the new job to
have run a while; a death right after waits the backoff and, with no standby ready, starts the
job cold; a standby that dies is started again. Spark's own takeover is timed on the stack (docs/reliability.md)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from deploy.job_supervisor import JOB_NAME, RESTART_BACKOFF_S, STANDBY_NAME, JobSupervisor
from prometheus_tools import wait_for

STAND_IN = """
import signal, sys, time
from pathlib import Path
out = Path(sys.argv[1])
if "--standby" in sys.argv:
    signal.signal(signal.SIGUSR1, lambda *_: out.joinpath("took-over").write_text("yes"))
out.joinpath("started").open("a").write("standby\\n" if "--standby" in sys.argv else "job\\n")
while True:
    time.sleep(0.05)
"""


class Processes:
    """What the supervisor needs of the stack: its processes, each in a session of its own."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.processes: dict[str, subprocess.Popen] = {}
        self.argv: dict[str, list[str]] = {}
        self.said: list[str] = []

    def spawn(self, name: str, argv: list[str], log_as: str | None = None) -> subprocess.Popen:
        proc = subprocess.Popen(argv, start_new_session=True)
        self.processes[name] = proc
        self.argv[name] = argv
        return proc

    def log(self, name: str) -> Path:
        return self.directory / f"{name}.log"

    def stop(self) -> None:
        for proc in self.processes.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@pytest.fixture
def stack(tmp_path):
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    stack = Processes(tmp_path)
    stack.spawn(JOB_NAME, [sys.executable, str(script), str(tmp_path)])
    wait_for(lambda: started(tmp_path) == ["job"], 10, "the job started")
    yield stack
    stack.stop()


def started(directory: Path) -> list[str]:
    path = directory / "started"
    return path.read_text().split() if path.exists() else []


def supervise_until(supervisor: JobSupervisor, what: str, done, timeout_s: float = 20):
    """The launcher's loop (a check every 0.2 s) until `done()` holds."""
    def step():
        supervisor.check(time.monotonic())
        return done()
    return wait_for(step, timeout_s, what, 0.05)


def kill_job(stack: Processes) -> None:
    os.killpg(stack.processes[JOB_NAME].pid, signal.SIGKILL)
    stack.processes[JOB_NAME].wait()


def test_a_first_death_is_replaced_at_once_by_the_standby(stack, tmp_path):
    supervisor = JobSupervisor(stack, None, stack.said.append, standby_after_s=30)
    supervise_until(supervisor, "a standby started", lambda: started(tmp_path) == ["job", "standby"])
    standby = stack.processes[STANDBY_NAME]
    kill_job(stack)
    killed = time.monotonic()
    supervisor.check(killed)  # the first check that sees the death promotes the standby
    assert stack.processes[JOB_NAME] is standby and STANDBY_NAME not in stack.processes
    assert supervisor.restarts == 1 and supervisor.restart_at is None
    wait_for(lambda: (tmp_path / "took-over").exists(), 10, "the standby told to take over")
    assert "replacing it from its checkpoint by its standby" in stack.said[0], stack.said
    assert "its standby took over (restart 1)" in stack.said[1], stack.said
    # the next standby once the new job has run standby_after_s (the supervisor's clock is the one it is given)
    supervisor.check(killed + 29)
    assert STANDBY_NAME not in stack.processes
    supervisor.check(killed + 30)
    assert stack.processes[STANDBY_NAME].poll() is None


def test_a_death_in_a_row_waits_the_backoff_and_starts_cold_without_a_standby(stack, tmp_path):
    supervisor = JobSupervisor(stack, None, stack.said.append, standby_after_s=3600)
    kill_job(stack)
    supervisor.check(time.monotonic())
    assert supervisor.restarts == 1 and started(tmp_path) == ["job"]
    supervise_until(supervisor, "the cold start", lambda: started(tmp_path) == ["job", "job"])
    # the second death, right after: the backoff's first delay before the next cold start
    kill_job(stack)
    died = time.monotonic()
    supervisor.check(died)
    assert supervisor.restarts == 1 and supervisor.restart_at == pytest.approx(died + RESTART_BACKOFF_S[0])
    supervise_until(supervisor, "the second cold start", lambda: supervisor.restarts == 2)
    assert time.monotonic() - died >= RESTART_BACKOFF_S[0]
    assert "a cold start in 1 s (2 deaths in a row)" in stack.said[-2], stack.said


def test_a_standby_that_dies_is_started_again(stack, tmp_path):
    supervisor = JobSupervisor(stack, None, stack.said.append, standby_after_s=0)
    supervise_until(supervisor, "a standby started", lambda: started(tmp_path) == ["job", "standby"])
    first = stack.processes[STANDBY_NAME]
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    supervise_until(supervisor, "another standby", lambda: started(tmp_path) == ["job", "standby", "standby"])
    assert stack.processes[STANDBY_NAME] is not first and stack.processes[STANDBY_NAME].poll() is None
    assert supervisor.restarts == 0
