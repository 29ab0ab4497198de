"""The local stack's supervisor of the always-on streaming job: when the job dies (a crash, an
OOM kill, `kill -9`), it is replaced from its checkpoint, and the replacement is counted in
`quorum_monitor_job_restarts_total` on the Pushgateway.

A replacement is kept ready: a standby (`streaming run --standby`) whose JVM and Spark session
have started and whose query is planned, waiting for SIGUSR1. Taking over then costs the query's
start and its first batch alone; a cold start adds the Python imports, the JVM and Spark's start
and the query's planning, more than half of a restart on a loaded 2-core machine. A first death
is replaced at once; deaths in a row wait 1 s, doubling to 30 s, so a job that cannot run does
not spin. The supervisor is made once the job has pushed its first batch, and starts a standby
then; after a replacement, once the new job has run STANDBY_AFTER_S: before, the standby's JVM
would take the CPU from the new job's first batch. Either way the checkpoint has started, so
the standby only reads it until it takes over."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Callable, Protocol

JOB_NAME = "streaming-job"
STANDBY_NAME = "streaming-job-standby"
SUPERVISOR_GROUP = "quorum_monitor_supervisor"
RESTART_BACKOFF_S = (1.0, 30.0)  # deaths in a row after the first: first delay, cap (doubled each time)
RESTART_RESET_AFTER_S = 120.0    # a job that ran this long counts as healthy again: its death is a first one
STANDBY_AFTER_S = 30.0           # the job's first batch after a start is done by then (20 s at most, loaded)


class Processes(Protocol):
    processes: dict[str, subprocess.Popen]
    argv: dict[str, list[str]]

    def spawn(self, name: str, argv: list[str], log_as: str | None = None) -> subprocess.Popen: ...

    def log(self, name: str): ...


def exit_reason(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


def signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


class JobSupervisor:
    """Replaces the job when it dies: by its standby when one is ready, else by a cold start.

    Whatever the dead job left behind (its JVM, Python workers) is killed first: two JVMs on one
    checkpoint would both write it."""

    def __init__(self, stack: Processes, pushgateway: str | None, say: Callable[[str], None],
                 standby_after_s: float = STANDBY_AFTER_S):
        self.stack = stack
        self.pushgateway = pushgateway
        self.say = say
        self.standby_after_s = standby_after_s
        self.restarts = 0
        self.deaths_in_row = 0
        self.started_at = time.monotonic()
        self.standby_at = self.started_at  # made once the job has pushed: its first batch is done
        self.restart_at: float | None = None

    def delay_s(self) -> float:
        """How long the replacement of the latest death waits: none for a first death."""
        if self.deaths_in_row <= 1:
            return 0.0
        return min(RESTART_BACKOFF_S[0] * 2 ** (self.deaths_in_row - 2), RESTART_BACKOFF_S[1])

    def check(self, now: float) -> None:
        proc = self.stack.processes.get(JOB_NAME)
        if proc is None:
            return
        if self.restart_at is None:
            if proc.poll() is None:
                self._keep_standby(now)
                return
            ran = now - self.started_at
            self.deaths_in_row = 1 if ran >= RESTART_RESET_AFTER_S else self.deaths_in_row + 1
            signal_group(proc.pid, signal.SIGKILL)  # its JVM and workers, before another takes the checkpoint
            self.restart_at = now + self.delay_s()
            by = "its standby" if self._standby() else "a cold start"
            self.say(f"{JOB_NAME} {exit_reason(proc.returncode)} after {ran:.0f} s (log {self.stack.log(JOB_NAME)}); "
                     f"replacing it from its checkpoint by {by}"
                     + (f" in {self.delay_s():.0f} s ({self.deaths_in_row} deaths in a row)" if self.delay_s() else ""))
        if now >= self.restart_at:
            self.restart_at = None
            self.restarts += 1
            self.started_at = now
            self.standby_at = now + self.standby_after_s
            standby = self._standby()
            if standby is not None:
                os.kill(standby.pid, signal.SIGUSR1)
                self.stack.processes[JOB_NAME] = self.stack.processes.pop(STANDBY_NAME)
                how = "its standby took over"
            else:
                self.stack.spawn(JOB_NAME, self.stack.argv[JOB_NAME])
                how = "started cold"
            self.say(f"{JOB_NAME} replaced: {how} (restart {self.restarts})")
            self.push()

    def _standby(self) -> subprocess.Popen | None:
        standby = self.stack.processes.get(STANDBY_NAME)
        return standby if standby is not None and standby.poll() is None else None

    def _keep_standby(self, now: float) -> None:
        """A standby ready from `standby_at` on; one that died is started again."""
        standby = self.stack.processes.get(STANDBY_NAME)
        if standby is not None and standby.poll() is not None:
            self.say(f"{STANDBY_NAME} {exit_reason(standby.returncode)} (log {self.stack.log(JOB_NAME)}); "
                     f"starting another")
            signal_group(standby.pid, signal.SIGKILL)
            del self.stack.processes[STANDBY_NAME]
            standby = None
        if standby is None and now >= self.standby_at:
            self.stack.spawn(STANDBY_NAME, self.stack.argv[JOB_NAME] + ["--standby"], log_as=JOB_NAME)

    def push(self) -> None:
        """The restart count, in a Pushgateway group of its own (the job's pushes do not touch it)."""
        if not self.pushgateway:
            return
        body = ("# TYPE quorum_monitor_job_restarts_total counter\n"
                f"quorum_monitor_job_restarts_total {self.restarts}\n").encode()
        import urllib.request
        request = urllib.request.Request(f"http://{self.pushgateway}/metrics/job/{SUPERVISOR_GROUP}", data=body,
                                         method="PUT")
        try:
            urllib.request.urlopen(request, timeout=5).close()
        except OSError as e:
            self.say(f"could not push the restart count: {e}")
