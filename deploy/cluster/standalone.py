"""A Spark standalone cluster on this machine from the installed pyspark's own launcher: a master
and N workers, each its own JVM (`spark-class org.apache.spark.deploy.master.Master` /
`...worker.Worker spark://...`), on loopback and free ports. The tests and the cluster benchmark
submit the job to it with `deploy/cluster/spark-submit.sh --master <cluster.url>`.

    with StandaloneCluster(workdir, workers=2) as cluster:
        cluster.url                      # spark://127.0.0.1:PORT
        cluster.executors()              # {worker index: [executor JVM pids]}
        cluster.kill_worker(0)           # SIGKILL the worker's JVM and its executors

`stop_driver(driver)` ends a job submitted in client mode as an operator's Ctrl-C would.

Leaving the block stops every process the cluster started (workers, their executors and the
executors' Python workers, the master) and waits for them to be gone.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from quorum.local_kafka.loopback_ports import free_port

EXECUTOR_MAIN = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


def spark_home() -> Path:
    """The pyspark package directory: it ships bin/spark-class and the jars."""
    import pyspark
    return Path(pyspark.__file__).resolve().parent


def children(pid: int) -> list[int]:
    """Child processes of `pid`, whichever of its threads started them (a JVM forks from many)."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            pass
    return found


def descendants(pid: int) -> list[int]:
    found, stack = [], children(pid)
    while stack:
        p = stack.pop()
        found.append(p)
        stack.extend(children(p))
    return found


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def identity(pid: int) -> tuple[int, str] | None:
    """(pid, start time): a pid alone may be reused by an unrelated process once this one is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == "Z" else (pid, fields[19])


def alive(process: tuple[int, str]) -> bool:
    return identity(process[0]) == process


def kill_all(processes, sig: int = signal.SIGKILL) -> None:
    for process in processes:
        if alive(process):
            try:
                os.kill(process[0], sig)
            except ProcessLookupError:
                pass


class StandaloneCluster:
    def __init__(self, workdir: Path, workers: int = 2, cores_per_worker: int = 2,
                 memory_per_worker: str = "1g", daemon_memory: str = "256m", ready_timeout_s: float = 120.0):
        self.workdir = Path(workdir)
        self.worker_count, self.cores, self.memory = workers, cores_per_worker, memory_per_worker
        self.ready_timeout_s = ready_timeout_s
        self.port, self.webui_port = free_port(), free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        conf_dir = self.workdir / "conf"  # empty: no spark-defaults or spark-env from elsewhere
        conf_dir.mkdir(parents=True, exist_ok=True)
        self.env = {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_CONF_DIR": str(conf_dir),
                    "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_DAEMON_MEMORY": daemon_memory,
                    "SPARK_LOG_DIR": str(self.workdir / "logs"), "SPARK_NO_DAEMONIZE": "1",
                    # a killed worker is declared lost after 10 s rather than a minute (the
                    # workers' heartbeat period follows from the same setting)
                    "SPARK_DAEMON_JAVA_OPTS": "-Dspark.worker.timeout=10",
                    # no REST submission server: it would take the fixed port 6066
                    "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"}
        self.master: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen | None] = []
        self._known: set[tuple[int, str]] = set()

    # --- processes ---------------------------------------------------------------------------------

    def _launch(self, name: str, main_class: str, *args: str) -> subprocess.Popen:
        log = (self.workdir / f"{name}.log").open("wb")
        process = subprocess.Popen([str(spark_home() / "bin" / "spark-class"), main_class, *args],
                                   stdout=log, stderr=subprocess.STDOUT, env=self.env, cwd=self.workdir)
        log.close()
        return process

    def __enter__(self) -> "StandaloneCluster":
        try:
            self.master = self._launch("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                       "--port", str(self.port), "--webui-port", str(self.webui_port))
            for i in range(self.worker_count):
                work_dir = self.workdir / f"worker-{i}"
                work_dir.mkdir(exist_ok=True)
                self.workers.append(self._launch(
                    f"worker-{i}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                    "--port", str(free_port()), "--webui-port", str(free_port()), "--cores", str(self.cores),
                    "--memory", self.memory, "--work-dir", str(work_dir), self.url))
            self._await(lambda: len(self.alive_workers()) == self.worker_count, "the workers to register")
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _await(self, condition, what: str) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            for name, p in [("master", self.master)] + [(f"worker-{i}", w) for i, w in enumerate(self.workers)]:
                if p is not None and p.poll() is not None:
                    raise RuntimeError(f"{name} exited {p.returncode}:\n{self.log_tail(name)}")
            try:
                if condition():
                    return
            except OSError:
                pass
            time.sleep(0.5)
        raise TimeoutError(f"standalone cluster: waited {self.ready_timeout_s:.0f} s for {what}:\n"
                           f"{self.log_tail('master')}")

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.workdir / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    # --- what runs where ---------------------------------------------------------------------------

    def state(self) -> dict:
        """The master's view (its web UI's /json/): workers, applications. A master still starting
        its web UI may answer /json/ with its HTML page: asked again until it gives JSON."""
        deadline = time.monotonic() + 30
        while True:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.webui_port}/json/", timeout=5) as response:
                body = response.read()
            try:
                return json.loads(body)
            except ValueError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the master's /json/ gives no JSON: {body[:200]!r}") from None
                time.sleep(0.5)

    def alive_workers(self) -> list[dict]:
        return [w for w in self.state()["workers"] if w["state"] == "ALIVE"]

    def executors(self) -> dict[int, list[int]]:
        """Executor JVMs by worker index: the workers' child processes running the executor backend."""
        self._remember()
        return {i: [c for c in children(w.pid) if EXECUTOR_MAIN in command_line(c)]
                for i, w in enumerate(self.workers) if w is not None and w.poll() is None}

    def _remember(self) -> None:
        """Note every process below the cluster's JVMs, so stopping can wait for all of them (a
        Python worker daemon moves to its own process group, out of reach of a group kill)."""
        for p in [self.master, *self.workers]:
            if p is not None and p.poll() is None:
                self._known.update(filter(None, map(identity, descendants(p.pid))))

    def kill_worker(self, index: int) -> list[int]:
        """SIGKILL worker `index`'s JVM and its executors, as a machine that dies would; returns
        the executor pids killed."""
        worker = self.workers[index]
        self._remember()
        executors = [c for c in children(worker.pid) if EXECUTOR_MAIN in command_line(c)]
        below = [p for p in map(identity, descendants(worker.pid)) if p and p[0] not in executors]
        doomed = [p for p in map(identity, executors) if p]
        worker.kill()
        kill_all(doomed)
        worker.wait(30)
        self.workers[index] = None
        kill_all(below)  # the executors' Python workers
        deadline = time.monotonic() + 30  # a big JVM takes a moment to die
        while any(alive(p) for p in doomed) and time.monotonic() < deadline:
            time.sleep(0.05)
        return executors

    def stop(self) -> None:
        self._remember()
        live = [p for p in [*self.workers, self.master] if p is not None]
        for p in live:  # workers first, so the master does not start executors elsewhere
            if p.poll() is None:
                p.terminate()
        for p in live:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
        kill_all(sorted(self._known))
        deadline = time.monotonic() + 20
        while any(alive(p) for p in self._known) and time.monotonic() < deadline:
            time.sleep(0.2)
        self.workers = [None] * len(self.workers)
        self.master = None

    def leftovers(self) -> list[int]:
        """Processes the cluster started that still run (none once stopped)."""
        return [pid for pid, _ in sorted(self._known) if alive((pid, _))]


def stop_driver(driver: subprocess.Popen) -> None:
    """SIGTERM to the job's Python process, as an operator's Ctrl-C: it stops its queries and exits
    0, and spark-submit with it. SIGKILL to all of it only if that does not happen."""
    if driver.poll() is not None:
        return
    python = [p for p in descendants(driver.pid) if "streaming/cli.py" in command_line(p)]
    for pid in python:
        os.kill(pid, signal.SIGTERM)
    try:
        driver.wait(90)
    except subprocess.TimeoutExpired:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(10)
