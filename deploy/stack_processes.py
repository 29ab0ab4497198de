"""The local stack's process table and its state file: every process the launcher starts, by
name, in a session of its own with its own log under RUN_DIR/logs, the argv it was started with
(for a restart), and RUN_DIR/stack.json, which says what runs and where so that `down`,
`status`, `chaos` and the tests find it."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Callable

from job_supervisor import signal_group
from quorum.storage.atomic_file import write_atomically

STOP_TIMEOUT_S = 15
STATE_FILE = "stack.json"


def say(text: str) -> None:
    print(f"\033[1m[stack]\033[0m {text}", file=sys.stderr, flush=True)


class ProcessTable:
    def __init__(self, run_dir: Path, cwd: Path, on_spawn: Callable[[], None] = lambda: None):
        self.run_dir = run_dir
        self.cwd = cwd
        self.on_spawn = on_spawn  # the state file is written again
        self.processes: dict[str, subprocess.Popen] = {}
        self.argv: dict[str, list[str]] = {}

    def log(self, name: str) -> Path:
        return self.run_dir / "logs" / f"{name}.log"

    def spawn(self, name: str, argv: list[str], log_as: str | None = None, stdin_open: bool = False) -> subprocess.Popen:
        """Start one process in its own session, so that a stop reaches its children too; its
        output goes to its own log, or `log_as`'s (a standby writes the job's). `stdin_open`: its
        stdin a pipe this process holds, for a process that ends at the end of its input (it then
        ends with the launcher, however that ends)."""
        with open(self.log(log_as or name), "ab") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.PIPE if stdin_open else subprocess.DEVNULL,
                                    start_new_session=True, cwd=self.cwd)
        self.processes[name] = proc
        self.argv[name] = argv
        self.on_spawn()
        return proc

    def signal(self, name: str, sig: int) -> None:
        proc = self.processes.get(name)
        if proc is None or proc.poll() is not None:
            raise ValueError(f"{name} is not running")
        os.kill(proc.pid, sig)

    def running(self, name: str) -> bool:
        return self.processes[name].poll() is None

    def pids(self) -> dict[str, int]:
        return {name: p.pid for name, p in self.processes.items() if p.poll() is None}

    def first_dead(self, may_die: Callable[[str], bool]) -> str | None:
        """Why the first process that died and may not has stopped, or None."""
        for name, proc in self.processes.items():
            if proc.poll() is not None and not may_die(name):
                return f"{name} exited with code {proc.returncode} (log: {self.log(name)})"
        return None

    def stop_one(self, name: str) -> None:
        """SIGTERM to the process's session; SIGKILL after STOP_TIMEOUT_S."""
        proc = self.processes.get(name)
        if proc is None or proc.poll() is not None:
            return
        signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            signal_group(proc.pid, signal.SIGKILL)
            proc.wait()

    def stop_all(self) -> None:
        """Every process, the last started first: all asked at once, then each awaited."""
        for name, proc in reversed(list(self.processes.items())):
            if proc.poll() is None:
                say(f"stopping {name}")
                signal_group(proc.pid, signal.SIGTERM)
        for name, proc in reversed(list(self.processes.items())):
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                say(f"{name} did not stop in {STOP_TIMEOUT_S} s: killing it")
                signal_group(proc.pid, signal.SIGKILL)
                proc.wait()
        self.processes.clear()


def write_state(run_dir: Path, state: dict) -> None:
    # replaced whole: `status`, `chaos` and the tests read it while the supervisor rewrites it
    write_atomically(run_dir / STATE_FILE, json.dumps(state, indent=2).encode())


def read_state(run_dir: Path) -> dict | None:
    path = run_dir / STATE_FILE
    return json.loads(path.read_text()) if path.exists() else None
