"""The streaming job's idle cost: CPU seconds per wall second of the job (`local[2]`, every output
on) watching 1 idle quorum, then `--clusters`, after a warm-up; and the part of it the JVM's JIT
compilers took.

Baseline: Spark's Kafka source alone into Spark's `noop` sink on the same trigger, watching the
same 1 quorum and then the `--clusters` (Spark's own cost of a query on this trigger), measured
in the same run after the job. `--idle-floors` names the stages measured watching the 1 quorum
(default: source, the baseline); `decode` adds the job's decoding, `health` the job without its
outputs, to see where the cost goes.

A quorum is 3 voters + 2 observers with nothing but NoOps, fetches and metrics (about 13 events/s),
published live by the raw producer in a process of its own (`paced_load.py`). Each run is
measured for `--idle-seconds` after `--idle-warmup-seconds` (the JVM still compiles code for
minutes after the job starts; an always-on job is judged by what it takes after that); the
broker and the load generator are left out. The job runs first, on a fresh JVM. `--trigger-ms`
runs the job (and the stages) on another trigger, with `health.tick_ms` the same, as an operator
would to pay less when idle. It prints a line a run, then
  idle cost: 1 quorum(s) C CPU s per s (compilers J), 200 quorum(s) ... (after W s; goal ...)
  idle floor, 1 quorum: the source alone F CPU s per s (the job X x)
and a line per goal (`goals.py`), `goal idle_1_quorum: ...` and `goal idle_200_quorums: ...`.

How long: each run is `--idle-warmup-seconds` + `--idle-seconds` plus a start and a stop: four
runs with the defaults, about 14 minutes (`--idle-floors source decode health`: about 22);
`--quick`, about 4.

    python benchmarks/idle_cost.py                                     # about 14 minutes
    python benchmarks/idle_cost.py --idle-floors source decode health   # where it goes, about 22 minutes
    python benchmarks/idle_cost.py --quick                             # 15 s runs after 30 s: a smoke run
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

from goals import Goal
from paced_load import PacedLoad
from process_usage import TreeCpu, thread_cpu_seconds
from streaming_bench import (DEFAULT_TRIGGER_MS, IDLE_STAGES, Bench, environment, job_session, parse, parser,
                             stop_after_input, trigger_option)

JIT_THREADS = ("C1 CompilerThre", "C2 CompilerThre")  # HotSpot's compiler threads (names cut at 15)


@dataclass
class IdleCost:
    cpu: float        # CPU s per s of the job (JVM, its Python workers, the driver's Python)
    compilers: float  # the part the JVM's JIT compilers took: a job still warming up


def idle_goal(trigger_ms: int, clusters: int) -> str:
    """The idle goals, which hold on the job's own trigger: on another, the line says so."""
    goal = f"goal 1 quorum <= 1.5 x the source alone, {clusters} <= 0.40"
    return goal if trigger_ms == DEFAULT_TRIGGER_MS else f"on a {trigger_ms} ms trigger; the {goal} on the job's own"


def idle_cost(bench: Bench, spark, clusters: int, stage: str = "job") -> IdleCost:
    """CPU seconds per wall second of the job (`stage` "job"), or of one of its input stages
    (`IDLE_STAGES`), watching `clusters` idle quorums, and the part of it the JVM's
    compilers took."""
    a, broker = bench.args, bench.broker
    topic = broker.create_topic(f"bench-idle-{stage}-{clusters}", a.partitions)
    if stage == "job":
        _, job, _, _, recorder = bench.start(spark, topic)
        stop, read = job.stop, lambda: job.writer.monitor.input_records_total
    else:
        query, batches, recorder = bench.start_stage(spark, topic, stage)
        stop, read = query.stop, lambda: sum(b.records for b in batches)
    load = PacedLoad(bench.workload(clusters, None), a.idle_warmup_seconds + a.idle_seconds, broker.bootstrap, topic)
    tree = TreeCpu(os.getpid(), exclude=lambda: (broker.pid, load.pid, bench.pushgateway.pid))
    jvm = spark.sparkContext._gateway.proc.pid  # spark-submit execs the driver's JVM
    load.await_encoded()
    while time.time() * 1000 < load.start_ms + a.idle_warmup_seconds * 1000:
        time.sleep(0.05)
    cpu0, jit0, t0 = tree.seconds(), thread_cpu_seconds(jvm, JIT_THREADS), time.perf_counter()
    load.await_done()
    used, wall = TreeCpu.used(cpu0, tree.seconds()), time.perf_counter() - t0
    jit = thread_cpu_seconds(jvm, JIT_THREADS) - jit0
    stop_after_input(stop, read, load.encoded, bench.trigger_ms)
    recorder.remove()
    return IdleCost(used / wall, jit / wall)


def measure(bench: Bench, spark) -> tuple[dict[int, IdleCost], dict[str, IdleCost], IdleCost | None]:
    """The job at 1 and `--clusters` quorums, then each of `--idle-floors` at 1 and the source
    alone at `--clusters`: each printed as it is measured."""
    args = bench.args
    idle: dict[int, IdleCost] = {}
    floors: dict[str, IdleCost] = {}   # per stage, 1 quorum
    floor_fleet = None                 # the source alone, `--clusters` quorums
    for clusters in (1, args.clusters):
        idle[clusters] = idle_cost(bench, spark, clusters)
        print(f"  idle: {clusters} quorum(s), the job takes {idle[clusters].cpu:.2f} CPU s per s "
              f"after {args.idle_warmup_seconds:.0f} s ({idle[clusters].compilers:.2f} of it the "
              f"JVM's compilers)", flush=True)
    for stage in args.idle_floors:
        floors[stage] = idle_cost(bench, spark, 1, stage)
        print(f"  idle: 1 quorum, {IDLE_STAGES[stage]} into noop takes {floors[stage].cpu:.2f} "
              f"CPU s per s after {args.idle_warmup_seconds:.0f} s ({floors[stage].compilers:.2f} "
              f"of it the JVM's compilers)", flush=True)
    if "source" in args.idle_floors:  # the baseline at the fleet's size too
        floor_fleet = idle_cost(bench, spark, args.clusters, "source")
        print(f"  idle: {args.clusters} quorums, the source alone into noop takes "
              f"{floor_fleet.cpu:.2f} CPU s per s after {args.idle_warmup_seconds:.0f} s", flush=True)
    return idle, floors, floor_fleet


def idle_goals(args, idle: dict[int, IdleCost], source: IdleCost | None, source_fleet: IdleCost | None) -> list[Goal]:
    """The idle goals, each against the source alone's cost in this run."""
    n = args.clusters
    on_trigger = "" if args.trigger_ms == DEFAULT_TRIGGER_MS else f" (on a {args.trigger_ms} ms trigger)"
    return [
        Goal("idle_1_quorum" + on_trigger, idle[1].cpu if 1 in idle else None, source.cpu if source else None, 1.5,
             "CPU s per s", "the source alone", how_to_measure="idle_cost.py with the source floor"),
        Goal(f"idle_{n}_quorums" + on_trigger, idle[n].cpu if n in idle else None,
             source_fleet.cpu if source_fleet else None, 0.4, "CPU s per s", "the source alone", on_value=True,
             how_to_measure="idle_cost.py with the source floor"),
    ]


def report(args, idle: dict[int, IdleCost], floors: dict[str, IdleCost], floor_fleet: IdleCost | None) -> None:
    print("idle cost: " + ", ".join(f"{n} quorum(s) {cost.cpu:.2f} CPU s per s (compilers {cost.compilers:.2f})"
                                    for n, cost in idle.items())
          + f" (after {args.idle_warmup_seconds:.0f} s; {idle_goal(args.trigger_ms, args.clusters)})")
    if idle.get(1) and floors:
        print("idle floor, 1 quorum: " + ", ".join(
            f"{IDLE_STAGES[stage]} {cost.cpu:.2f} CPU s per s (the job {idle[1].cpu / cost.cpu:.1f} x)"
            for stage, cost in floors.items()))
    for goal in idle_goals(args, idle, floors.get("source"), floor_fleet):
        print(goal.line())


def main() -> None:
    ap = parser(__doc__)
    trigger_option(ap)
    ap.add_argument("--idle-seconds", type=float, default=60, help="measured idle time per run")
    ap.add_argument("--idle-warmup-seconds", type=float, default=180,
                    help="start of each run left out (the JVM's compilers settle for minutes)")
    ap.add_argument("--idle-floors", nargs="*", choices=IDLE_STAGES, default=["source"], metavar="STAGE",
                    help="stages whose idle cost is measured too, watching 1 quorum, after the job's: "
                         f"{', '.join(IDLE_STAGES)} (default: source, the baseline; the option with no "
                         "stage skips them)")
    ap.add_argument("--quick", action="store_true", help="15 s idle runs after 30 s: a smoke run")
    args = parse(ap)
    if args.quick:
        args.idle_seconds, args.idle_warmup_seconds = 15, 30
    what = (f"a {args.trigger_ms} ms trigger; idle runs of {args.idle_seconds:.0f} s "
            f"(the first {args.idle_warmup_seconds:.0f} s not measured)")
    with environment(args, what, raw_read=False) as (bench, _raw):
        spark = job_session(args, "local[2]")
        measured = measure(bench, spark)
        spark.stop()
    report(args, *measured)


if __name__ == "__main__":
    main()
