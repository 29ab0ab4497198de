"""`streaming run --config job.yaml`: run the quorum health job until stopped.

The same entry through spark-submit:
    spark-submit "$(python -c 'import streaming, os; print(os.path.dirname(streaming.__file__))')/__main__.py" \\
        run --config job.yaml
"""
from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
import time

from streaming.config import ConfigError, JobConfig, load_config
from streaming.job_logging import LEVELS, configure
from streaming.state_layout import StateLayoutError

EXAMPLE = "deploy/job.local.yaml"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streaming", description="The quorum health streaming job (PySpark Structured Streaming).")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the job until interrupted",
                         description="Read the events topic, keep per-replica and per-quorum health, "
                                     "push to Prometheus. Stop with Ctrl-C or SIGTERM (the running "
                                     "micro-batch ends first, for up to 20 s); a restart resumes "
                                     "from the checkpoint.")
    check = sub.add_parser("check-config", help="validate a config file and print it with every default filled in")
    for p in (run, check):
        p.add_argument("--config", "-c", required=True, metavar="FILE",
                       help=f"YAML configuration (every key documented in {EXAMPLE})")
    run.add_argument("--master", help="Spark master, overriding spark.master of the config (e.g. local[2])")
    run.add_argument("--checkpoint", help="checkpoint directory, overriding job.checkpoint_location")
    run.add_argument("--log-level", default="INFO", choices=LEVELS,
                     help="the job's own log level (default %(default)s: a line per micro-batch); "
                          "Spark's own loggers stay at WARN")
    run.add_argument("--standby", action="store_true",
                     help="start Spark and plan the query, then wait for SIGUSR1 before starting it: a "
                          "supervisor keeps one ready to take over from a job that dies (deploy/run-local "
                          "does), so the takeover costs no JVM or Spark start. Only for a checkpoint the job "
                          "has started; never two started on one checkpoint")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        cfg = load_config(args.config)
        if args.command == "run":
            cfg = _with_overrides(cfg, args)
        cfg.check_files()
    except ConfigError as e:
        print(f"streaming: bad configuration: {e}", file=sys.stderr)
        return 2
    if args.command == "check-config":
        print(json.dumps(cfg.shown(), indent=2, sort_keys=True))
        return 0
    return _run(cfg, args.log_level, args.standby)


def _with_overrides(cfg: JobConfig, args: argparse.Namespace) -> JobConfig:
    d = cfg.to_dict()
    if args.master:
        d["spark"]["master"] = args.master
    if args.checkpoint:
        d["job"]["checkpoint_location"] = args.checkpoint
    return JobConfig.from_dict(d)


def _run(cfg: JobConfig, log_level: str, standby: bool = False) -> int:
    configure(log_level)
    log = logging.getLogger("streaming")
    stop = threading.Event()
    take_over = threading.Event()
    if standby:
        # before Spark starts: SIGUSR1's default action ends the process, and the supervisor
        # may need this standby while it is still starting
        signal.signal(signal.SIGUSR1, lambda *_: take_over.set())
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    from streaming.job import prepare_job, session_for, start_prepared
    spark = session_for(cfg)
    spark.sparkContext.setLogLevel("WARN")
    try:
        prepared = prepare_job(spark, cfg)
    except StateLayoutError as e:
        print(f"streaming: cannot start: {e}", file=sys.stderr)
        spark.stop()
        return 2
    if standby:
        from streaming.standby_warm_up import warm_up
        started = time.monotonic()
        warm = warm_up(spark, cfg, cancelled=lambda: take_over.is_set() or stop.is_set())
        log.info("standby: Spark started, the query planned and %s in %.0f s; waiting for SIGUSR1 to take over",
                 "warmed up on a batch of the live topic" if warm else "not warmed up (no records came, or called first)",
                 time.monotonic() - started)
        while not take_over.wait(0.05):
            if stop.is_set():
                spark.stop()
                return 0
        log.info("standby: taking over")
    job = start_prepared(prepared)

    def shutdown(signum, _frame):
        # Only flag it: stopping queries from inside a signal handler interrupts a Py4J call.
        log.info("signal %d: stopping the queries", signum)
        stop.set()

    signal.signal(signal.SIGTERM, shutdown)
    signal.signal(signal.SIGINT, shutdown)
    try:
        while not stop.is_set():
            if spark.streams.awaitAnyTermination(1.0):
                break
    except Exception as e:
        if not stop.is_set():  # a failed query: say which and why, exit non-zero
            from quorum.kafka_client.kafka_client_properties import principal
            from streaming.source import refusal
            why = refusal(str(e), cfg.source.topic, principal(cfg.source.client_properties()))
            print(f"streaming: query failed: {why + ': ' if why else ''}{e}", file=sys.stderr)
            _stop_quietly(job, log)
            return 1
    _stop_quietly(job, log)
    if not stop.is_set():
        print("streaming: a query stopped on its own", file=sys.stderr)
        return 1
    return 0


def _stop_quietly(job, log) -> None:
    try:
        job.stop()
    except Exception as e:  # e.g. Ctrl-C reached Spark's JVM too and it is gone already
        log.warning("while stopping: %s", e)

if __name__ == "__main__":
    sys.exit(main())
