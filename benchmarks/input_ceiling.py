"""The highest input rate the streaming job's input stages sustain live on `local[2]`, each alone
into Spark's `noop` sink on the job's trigger: rates no health design can pass while it reads
through this source and decodes in Spark on this machine.

Baseline: a raw read of the same records by one confluent-kafka consumer, in the same run.

The stages (`--stages`, default source, parse and decode): `source`, Spark's Kafka source alone;
`parse`, the source with Spark's typed JSON parse alone; `decode`, the source with the job's
decoding; `summary`, the source and the decoding with a summary of each micro-batch in the JVM
(a batch `groupBy` in `foreachBatch`: each replica's accepted fetches of a tick become their
first and last record), the first query of a design that would hand the health state a row per
replica and tick; it prints the rows out per record in.

The steps are the job's (`job_throughput.py`): the same synthetic workload published live at a
fixed rate, rates stepped up by `--factor` from `--start-rate`, each for `--step-seconds`, on a
fresh topic and checkpoint, until a step fails (a batch over the trigger, an input delay of two
triggers, the load behind its schedule), or the workload publishes no faster. Each step prints
its median batch, the stage's CPU and peak RSS, and the broker's, the Pushgateway's and the
generator's CPU. Then a line a stage:
  ceiling, STAGE (local[2], noop sink): N events/s (M not)

How long: a step is `--step-seconds` of load plus the query's start and stop, about 6 minutes at
the default 300 s, 1 with `--quick`; a stage's steps run until one fails (the source alone
reaches the highest rate the load generator publishes, about 160,000 events/s).

    python benchmarks/input_ceiling.py --quick                                 # 30 s steps
    python benchmarks/input_ceiling.py --quick --stages decode --start-rate 20000 --factor 1.3
"""
from __future__ import annotations

from live_steps import LiveBench, Steps, quick_steps, step_options, step_up, steps_text
from streaming_bench import CEILING_STAGES, environment, job_session, parse, parser, trigger_option

DEFAULT_CEILING_STAGES = ("source", "parse", "decode")  # `--stages` with no stage named


def main() -> None:
    ap = parser(__doc__)
    step_options(ap)
    trigger_option(ap)
    ap.add_argument("--stages", nargs="*", choices=CEILING_STAGES, default=list(DEFAULT_CEILING_STAGES),
                    metavar="STAGE", help=f"the input stages stepped, one after another: {', '.join(CEILING_STAGES)} "
                                          "(default: source, parse and decode)")
    args = parse(ap)
    quick_steps(args)
    ceiling: dict[str, Steps] = {}
    with environment(args, steps_text(args), bench=LiveBench) as (bench, _raw):
        spark = job_session(args, "local[2]")
        for stage in args.stages or DEFAULT_CEILING_STAGES:
            ceiling[stage] = step_up(bench, spark, "local[2]", stage)
        spark.stop()
    for stage, steps in ceiling.items():
        print(f"ceiling, {CEILING_STAGES[stage]} (local[2], noop sink): {steps.rate_text(with_failed=True)}")


if __name__ == "__main__":
    main()
