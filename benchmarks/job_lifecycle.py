"""The job as the local stack runs it, in a process of its own, from its start: the time to its
first verdict, its CPU over its first minutes and once warm, and its resident memory; and Spark's
own floor measured the same way in the same run.

The job is `streaming run` on `local[*]` with deploy/job.local.yaml's settings (every output on:
the Pushgateway, the Kafka health topic, dead letters), as `deploy/run-local` starts it. Its
first verdict is the first quorum status it pushes to the Pushgateway. The floor is a process
that starts Spark's session as the job does and reads the same topic with the job's source into
Spark's `noop` sink on the job's trigger (`python benchmarks/job_lifecycle.py floor ...`, which
`measure_floor` starts); its first output is its first micro-batch with input. Both are measured
the same way: CPU and resident memory of the process and everything it starts (the JVM, the
Python workers), read from /proc.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from process_usage import PeakMemory, TreeCpu

ROOT = Path(__file__).resolve().parents[1]
FIRST_BATCH_LINE = "first batch with input"  # what the floor process prints
POLL_S = 0.2


@dataclass
class Lifecycle:
    what: str
    first_output_s: float | None  # from the process's start to its first verdict (the floor: first batch)
    first_output: str             # what that was
    early_cpu: float              # CPU s per s over its first `early_s`, the JVM's start included
    early_s: float
    warm_cpu: float               # CPU s per s over `measured_s` from `warm_after_s`
    warm_after_s: float
    measured_s: float
    peak_memory: int              # bytes, the process and all it started, at the most: proportional
                                  # set sizes summed (a page several of them share counts once)
    peak_parts: str = ""          # where that went: the JVM, the job's Python, its Python workers
    peak_rss_sum: int = 0         # their resident sizes summed (shared pages once per process)


def _tree_cpu(tree: TreeCpu) -> float:
    return sum(tree.seconds().values())


def measure(what: str, command: list[str], first_output: Callable[[], str | None], log: Path, early_s: float,
            warm_after_s: float, measured_s: float) -> Lifecycle:
    """Start `command`, await `first_output()` (what it shows first, or None), and read its CPU
    over [0, early_s] and [warm_after_s, warm_after_s + measured_s] and its peak RSS; then stop
    it as an operator would (SIGTERM)."""
    with log.open("wb") as out:
        start = time.monotonic()
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    tree = TreeCpu(process.pid)
    peak = PeakMemory(tree, interval_s=0.5, proportional=True)
    peak.start()
    first: list = []  # (seconds, what) once shown

    def wait_until(t: float) -> None:
        """Until `t`, watching for the first output and for the process's end."""
        while time.monotonic() < t:
            if process.poll() is not None:
                raise RuntimeError(f"{what} exited with {process.returncode} (log: {log})")
            if not first:
                shown = first_output()
                if shown:
                    first.append((time.monotonic() - start, shown))
                    print(f"  {what}: {shown} {first[0][0]:.1f} s after its start", flush=True)
            time.sleep(min(POLL_S, max(0.0, t - time.monotonic())))
    try:
        wait_until(start + early_s)
        early = _tree_cpu(tree) / (time.monotonic() - start)
        wait_until(start + warm_after_s)
        cpu0, t0 = _tree_cpu(tree), time.monotonic()
        wait_until(t0 + measured_s)
        warm = (_tree_cpu(tree) - cpu0) / (time.monotonic() - t0)
    finally:
        peak.finish()
        _stop(process)
    first_s, shown = first[0] if first else (None, "")
    return Lifecycle(what, first_s, shown, early, early_s, warm, warm_after_s, measured_s, peak.pss_total,
                     peak.breakdown(), peak.total)


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def job_config(run_dir: Path, bootstrap: str, topic: str, health_topic: str, pushgateway_url: str, job: str,
               spark_conf: dict[str, str] | None = None) -> Path:
    """deploy/job.local.yaml with this run's addresses, as `deploy/run-local` writes it, and
    `spark_conf` added to its Spark settings."""
    import yaml
    config = yaml.safe_load((ROOT / "deploy" / "job.local.yaml").read_text())
    config["spark"]["master"] = "local[*]"
    config["spark"]["conf"] = {**(config["spark"].get("conf") or {}), **(spark_conf or {})}
    config["source"].update(bootstrap_servers=bootstrap, topic=topic, starting_offsets="earliest")
    config["job"]["checkpoint_location"] = str(run_dir / "checkpoints")
    config["dead_letters"]["path"] = str(run_dir / "dead-letters")
    config["sink"]["prometheus"].update(mode="pushgateway", pushgateway_url=pushgateway_url, job=job)
    config["sink"]["kafka"].update(enabled=True, bootstrap_servers=bootstrap, topic=health_topic)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "job.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def pushed_status(pushgateway_url: str, job: str) -> str | None:
    """The first quorum status the job `job` has pushed (`quorum_status` at 1), as `cluster status`."""
    try:
        with urllib.request.urlopen(f"{pushgateway_url}/api/v1/metrics", timeout=2) as r:
            groups = json.load(r)["data"]
    except OSError:
        return None
    for group in groups:
        for metric in group.get("quorum_status", {}).get("metrics", []):
            labels = metric["labels"]
            if labels.get("job") == job and float(metric["value"]) == 1.0:
                return f"first verdict ({labels.get('cluster')} {labels.get('status')})"
    return None


def measure_job(run_dir: Path, bootstrap: str, topic: str, health_topic: str, pushgateway_url: str,
                early_s: float, warm_after_s: float, measured_s: float, what: str = "the job",
                spark_conf: dict[str, str] | None = None) -> Lifecycle:
    job = "lifecycle_" + run_dir.name.replace("-", "_")
    config = job_config(run_dir, bootstrap, topic, health_topic, pushgateway_url, job, spark_conf)
    command = [sys.executable, "-m", "streaming.cli", "run", "--config", str(config)]
    return measure(what, command, lambda: pushed_status(pushgateway_url, job), run_dir / "job.log",
                   early_s, warm_after_s, measured_s)


def measure_floor(run_dir: Path, bootstrap: str, topic: str, early_s: float, warm_after_s: float,
                  measured_s: float, spark_conf: dict[str, str] | None = None) -> Lifecycle:
    run_dir.mkdir(parents=True, exist_ok=True)
    log = run_dir / "floor.log"
    command = [sys.executable, str(Path(__file__).resolve()), "floor", "--bootstrap", bootstrap, "--topic", topic,
               "--checkpoint", str(run_dir / "checkpoint")]
    command += [f"--spark-conf={key}={value}" for key, value in (spark_conf or {}).items()]

    def first_batch() -> str | None:
        try:
            return "first micro-batch with input" if FIRST_BATCH_LINE in log.read_text(errors="replace") else None
        except OSError:
            return None
    return measure("Spark's source alone", command, first_batch, log, early_s, warm_after_s, measured_s)


def run_floor(bootstrap: str, topic: str, checkpoint: str, spark_conf: dict[str, str]) -> None:
    """The floor process: Spark's session as the job builds it, the job's source into `noop` on
    the job's trigger, until SIGTERM."""
    sys.path.insert(0, str(ROOT))
    from streaming.config import JobConfig
    from streaming.job import session_for
    from streaming.progress_listener import ProgressListener
    from streaming.source import open_stream
    from streaming.spark_session import use_local_checkpoint_manager
    cfg = JobConfig.from_dict({"spark": {"master": "local[*]", "conf": spark_conf},
                               "source": {"bootstrap_servers": bootstrap, "topic": topic,
                                          "starting_offsets": "earliest"}})
    spark = session_for(cfg)
    spark.sparkContext.setLogLevel("ERROR")
    use_local_checkpoint_manager(spark, checkpoint)
    announced = []

    def on_progress(progress: dict) -> None:
        if not announced and int(progress.get("numInputRows") or 0) > 0:
            announced.append(True)
            print(FIRST_BATCH_LINE, flush=True)

    listener = ProgressListener(spark, on_progress)
    query = (open_stream(spark, cfg.source.reader_options()).writeStream.format("noop")
             .option("checkpointLocation", checkpoint)
             .trigger(processingTime=f"{cfg.job.trigger_interval_ms} milliseconds").start())
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    while not stopping and query.isActive:
        time.sleep(0.2)
    query.stop()
    listener.remove()
    spark.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description="The floor process of job_lifecycle.py: Spark's source alone into "
                                             "noop on the job's trigger, until SIGTERM.")
    sub = ap.add_subparsers(dest="command", required=True)
    floor = sub.add_parser("floor")
    floor.add_argument("--bootstrap", required=True)
    floor.add_argument("--topic", required=True)
    floor.add_argument("--checkpoint", required=True)
    floor.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                       help="a Spark setting more, as the job's spark.conf takes it")
    args = ap.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    run_floor(args.bootstrap, args.topic, args.checkpoint, dict(a.split("=", 1) for a in args.spark_conf))


if __name__ == "__main__":
    main()
