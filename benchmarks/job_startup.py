"""The streaming job from its start, as the local stack runs it: the time to its first verdict,
its CPU over its first minutes against its CPU once warm, and its peak memory watching 1 quorum
and watching `--clusters`.

Baseline: Spark's Kafka source alone into Spark's `noop` sink, in a process of its own started
and measured the same way in the same run (its first micro-batch with input, its memory).

The job is `streaming run` with deploy/job.local.yaml (every output on: the Pushgateway, a real
one here, the Kafka health topic, dead letters) in a process of its own (`job_lifecycle.py`),
started while its quorums already publish, as the local stack's nodes do. The runs, one at a
time (`--runs` picks some): `floor`, the source alone watching 1 quorum; `job`, the job watching
1 quorum; `fleet`, the job watching `--clusters`. Each prints its first output, its CPU over its
first `--early-seconds` and over `--seconds` from `--warm-seconds` (the floor and the fleet: warm
after at most 180 s), its peak memory (proportional set sizes summed), where it went, and its
resident sizes summed. Then a line per goal (`goals.py`): `warm_up`, `first_verdict`,
`memory_1_quorum` and `memory_200_quorums`, each
  goal NAME: VALUE against FLOOR = RATIO (goal G): holds      (or short, or not measured)

How long: each run is its warm-up and measurement plus a minute, about 21 minutes with the
defaults (the job's run alone about 12).

    python benchmarks/job_startup.py                                      # about 21 minutes
    python benchmarks/job_startup.py --runs job --warm-seconds 180        # the job's memory after 3 minutes
"""
from __future__ import annotations

import time

from goals import MB, Goal
from job_lifecycle import Lifecycle, measure_floor, measure_job
from paced_load import PacedLoad
from streaming_bench import Bench, environment, parse, parser

RUNS = ("floor", "job", "fleet")  # Spark's source alone; the job at 1 quorum, at --clusters


def run_lifecycle(bench: Bench) -> dict[str, Lifecycle]:
    """The job and Spark's source alone, each in a process of its own started while its quorums
    already publish (as the local stack's nodes do), one at a time."""
    args, tmp, broker, pushgateway = bench.args, bench.tmp, bench.broker, bench.pushgateway
    out: dict[str, Lifecycle] = {}
    early, warm, measured = args.early_seconds, args.warm_seconds, args.seconds
    conf = args.spark_settings
    # the floor's memory and first batch are all the goals read of it: warm after at most 3 minutes
    runs = (("floor", 1, min(warm, 180)), ("job", 1, warm), ("job fleet", args.clusters, min(warm, 180)))
    for name, clusters, warm_after in [run for run in runs if run[0].split()[-1] in args.runs]:
        topic = broker.create_topic(f"bench-lifecycle-{name.replace(' ', '-')}", args.partitions)
        load = PacedLoad(bench.workload(clusters, None), max(early, warm_after) + measured + 60, broker.bootstrap,
                         topic)
        load.await_encoded()
        while time.time() * 1000 < load.start_ms + 2000:  # a couple of seconds of records first
            time.sleep(0.05)
        run_dir = tmp / f"lifecycle-{name.replace(' ', '-')}"
        print(f"lifecycle: {name}, {clusters} quorum(s), warm after {warm_after:.0f} s", flush=True)
        if name == "floor":
            out[name] = measure_floor(run_dir, broker.bootstrap, topic, early, warm_after, measured, conf)
        else:
            pushgateway.wipe()
            health_topic = broker.create_topic(f"bench-lifecycle-health-{name.replace(' ', '-')}", 1)
            out[name] = measure_job(run_dir, broker.bootstrap, topic, health_topic, pushgateway.url,
                                    early, warm_after, measured, what=f"the job, {clusters} quorum(s)",
                                    spark_conf=conf)
        got = out[name]
        print(f"  {got.what}: first output {got.first_output_s if got.first_output_s is not None else float('nan'):.1f} s; "
              f"CPU {got.early_cpu:.2f} CPU s per s over the first {got.early_s:.0f} s, {got.warm_cpu:.2f} after "
              f"{got.warm_after_s:.0f} s; memory {got.peak_memory / MB:,.0f} MB ({got.peak_parts}; "
              f"RSS summed {got.peak_rss_sum / MB:,.0f} MB)", flush=True)
        load.await_done()
    return out


def startup_goals(clusters: int, lifecycle: dict[str, Lifecycle]) -> list[Goal]:
    """The goals of the job's start and memory, each against the source alone's in this run."""
    floor, job_1, fleet = lifecycle.get("floor"), lifecycle.get("job"), lifecycle.get("job fleet")
    return [
        Goal("warm_up", job_1.early_cpu if job_1 else None, job_1.warm_cpu if job_1 else None, 2.0,
             "CPU s per s", f"itself after {job_1.warm_after_s:.0f} s" if job_1 else "",
             how_to_measure="job_startup.py"),
        Goal("first_verdict", job_1.first_output_s if job_1 else None,
             floor.first_output_s if floor else None, 15.0, "s", "Spark's first batch", on_value=True,
             how_to_measure="job_startup.py"),
        Goal("memory_1_quorum", job_1.peak_memory if job_1 else None, floor.peak_memory if floor else None, 800 * MB,
             "MB", "Spark's source alone", on_value=True, how_to_measure="job_startup.py"),
        Goal(f"memory_{clusters}_quorums", fleet.peak_memory if fleet else None,
             floor.peak_memory if floor else None, 1200 * MB, "MB", "Spark's source alone (1 quorum)", on_value=True,
             how_to_measure="job_startup.py"),
    ]


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--early-seconds", type=float, default=120,
                    help="the job's first seconds whose CPU the warm-up goal compares (default %(default)s)")
    ap.add_argument("--warm-seconds", type=float, default=600,
                    help="when the job counts as warm, its CPU then measured for --seconds (default %(default)s)")
    ap.add_argument("--seconds", type=float, default=60, help="measured time once warm (default %(default)s)")
    ap.add_argument("--runs", nargs="+", choices=RUNS, default=list(RUNS),
                    help="which of the runs (default: all; the goals need all three)")
    ap.add_argument("--quick", action="store_true", help="15 s measured once warm")
    args = parse(ap)
    if args.quick:
        args.seconds = 15
    with environment(args, "the job from its start, in a process of its own", raw_read=False) as (bench, _raw):
        lifecycle = run_lifecycle(bench)
    for goal in startup_goals(args.clusters, lifecycle):
        print(goal.line())


if __name__ == "__main__":
    main()
