"""The highest input rate the streaming job sustains live with every output on, on `local[2]`
and `local[1]`; the detection of a cut-off voter under that load and the job's peak memory.

Baseline: a raw read of the same records by one confluent-kafka consumer, in the same run; with
`--ceiling`, also the source and the job's decoding alone into Spark's `noop` sink, stepped the
same way on `local[2]` first: the `throughput` goal's baseline.

Every output is on, as in production: dead letters, the Prometheus push (a real Pushgateway) and
the Kafka health topic. The load is a synthetic workload of `--clusters` clusters x (3 voters + 2
observers), encoded before each step and published at a fixed rate by the raw producer in a
process of its own (`paced_load.py`), stamped with the wall clock: a live input, not a backlog.

  1. raw read: one confluent-kafka consumer reading a topic of the same records (the ceiling);
  2. sustained rate, for each of `--masters` (`local[2]`, then `local[1]`): rates stepped up by
     `--factor` from `--start-rate`, each for `--step-seconds`, on a fresh topic and checkpoint,
     until a step fails. A step is sustained when, after `--warmup-seconds`, every micro-batch
     finishes within its trigger and the input delay (a batch's end minus its newest record's
     time) stays under two triggers, and the load kept its schedule. Each step prints its median
     batch and the health state's part of it (`state_time_ms`), the job's CPU, its peak RSS
     (JVM, Python workers and driver together) and the CPU the broker, the Pushgateway and the
     generator took (the gateway is wiped before each run, so it holds only that run's groups);
  3. detection: every step cuts a voter of cluster 0 off `--warmup-seconds` + 10 s in; the time
     from the fault to its `unreachable` transition reaching the writer, at the highest sustained
     `local[2]` step (the goal: within the unreachable threshold + 2 s).
Then `local[2] / local[1]: X x (goal >= 1.7)`, with `--ceiling` the line
  ceiling, source + decode (local[2], noop sink): N events/s (M not)
the goal line (`goals.py`)
  goal throughput: VALUE against FLOOR = RATIO (goal >= 0.7): holds      (or short, or not measured)
and last the summary ("below N events/s" when even the first step was not sustained; detection
and memory are then the first step's):
  sustained: N events/s for S s (local[2]), R x the raw read of M events/s in the same run;
  local[1] K events/s; detection D s; peak RSS P MiB

How long: a step is `--step-seconds` of load plus the job's start and stop, about 6 minutes at
the default 300 s; each master's steps run until one fails (about ten from 100 events/s).

    python benchmarks/job_throughput.py                 # 300 s steps: 6 min a step
    python benchmarks/job_throughput.py --quick         # 30 s steps: a smoke run (about 6 min)
    python benchmarks/job_throughput.py --quick --ceiling --masters 'local[2]'   # the throughput goal
"""
from __future__ import annotations

from goals import Goal
from live_steps import LiveBench, Steps, quick_steps, step_options, step_up, steps_text
from streaming_bench import MIB, environment, job_session, parse, parser, trigger_option


def throughput_goal(decode: Steps | None, job: Steps) -> Goal:
    """The job's highest sustained rate on `local[2]` against the source and its decoding alone's."""
    return Goal("throughput", job.highest.rate if job.highest else None,
                decode.highest.rate if decode and decode.highest else None,
                0.7, "events/s", "source + decode", at_least=True,
                how_to_measure="job_throughput.py --ceiling, the job's steps on local[2]")


def report(args, raw: float, runs: dict[str, Steps], decode: Steps | None) -> None:
    nothing = Steps()
    on_two, on_one = runs.get("local[2]", nothing), runs.get("local[1]", nothing)
    two, one = on_two.highest, on_one.highest
    if two and one:
        print(f"local[2] / local[1]: {two.rate / one.rate:.2f} x (goal >= 1.7)")
    if decode is not None:
        print(f"ceiling, source + decode (local[2], noop sink): {decode.rate_text(with_failed=True)}")
    print(throughput_goal(decode, on_two).line())
    shown = two or on_two.first  # detection and memory at the highest sustained step, else the lowest
    detection = f"{shown.detection_s:.1f} s" if shown and shown.detection_s is not None else "n/a"
    print(f"sustained: {on_two.rate_text()} for {args.step_seconds:.0f} s (local[2]), "
          f"{(two.rate if two else 0) / raw:.3f} x the raw read of {raw:,.0f} events/s in the same run; "
          f"local[1] {on_one.rate_text()}; detection {detection}; "
          f"peak RSS {(shown.peak_rss if shown else 0) / MIB:,.0f} MiB")


def main() -> None:
    ap = parser(__doc__)
    step_options(ap)
    trigger_option(ap)
    ap.add_argument("--masters", nargs="+", default=["local[2]", "local[1]"])
    ap.add_argument("--ceiling", action="store_true",
                    help="also the source + decode alone into noop, stepped on local[2] before the job: the "
                         "throughput goal's baseline")
    ap.add_argument("--ceiling-start-rate", type=float, default=None,
                    help="events/s of the source + decode's first step (default: --start-rate)")
    args = parse(ap)
    if args.ceiling and "local[2]" not in args.masters:
        ap.error("--ceiling measures on local[2]: add it to --masters")
    quick_steps(args)
    runs: dict[str, Steps] = {}
    decode = None
    with environment(args, steps_text(args), bench=LiveBench) as (bench, raw):
        for master in args.masters:
            spark = job_session(args, master)
            if args.ceiling and master == "local[2]":
                decode = step_up(bench, spark, master, "decode")
            runs[master] = step_up(bench, spark, master)
            spark.stop()
    report(args, raw, runs, decode)


if __name__ == "__main__":
    main()
