"""Live steps: the job, or one of its input stages alone, reading a synthetic workload published
at a fixed rate, rates stepped up until a step is not sustained (`job_throughput.py`,
`input_ceiling.py`).

A step is sustained when, after `--warmup-seconds`, every micro-batch finishes within its trigger
and the input delay (a batch's end minus its newest record's time) stays under two triggers, and
the load kept its schedule. Every step cuts a voter of cluster 0 off `--warmup-seconds` + 10 s in;
the job's steps time its `unreachable` transition (the detection).
"""
from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass, field

from paced_load import PacedLoad
from process_usage import PeakMemory, TreeCpu, cpu_seconds
from streaming_bench import MIB, Batch, Bench, stop_after_input

CUT_OFF_REPLICA = 2


def step_options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--start-rate", type=float, default=100, help="events/s of the first step")
    ap.add_argument("--factor", type=float, default=1.5, help="each step's rate over the previous one")
    ap.add_argument("--max-rate", type=float, default=400_000)
    ap.add_argument("--step-seconds", type=float, default=300, help="load per step (measured after the warm-up)")
    ap.add_argument("--warmup-seconds", type=float, default=20, help="start of each step left out of the verdict")
    ap.add_argument("--quick", action="store_true", help="30 s steps, the first 10 s not judged: a smoke run")


def quick_steps(args) -> None:
    if args.quick:
        args.step_seconds, args.warmup_seconds = 30, 10


def steps_text(args) -> str:
    """What the workload line says of the steps."""
    return (f"a {args.trigger_ms} ms trigger; steps of {args.step_seconds:.0f} s "
            f"(first {args.warmup_seconds:.0f} s not judged)")


@dataclass
class Step:
    master: str
    target_rate: float
    stage: str = "job"   # or one of CEILING_STAGES (no detection there: nothing evaluates health)
    clusters: int = 0
    load: object = None
    batches: list[Batch] = field(default_factory=list)
    window: list[Batch] = field(default_factory=list)  # the judged batches
    job_cpu_s: float = 0.0
    broker_cpu_s: float = 0.0
    pushgateway_cpu_s: float = 0.0  # a server on the same cores, as the broker is
    peak_rss: int = 0
    measured_s: float = 0.0  # the judged window: from the warm-up's end to the load's end
    detection_s: float | None = None
    rows_out: int = 0  # the `summary` stage: rows its batches wrote
    failures: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.load.rate if self.load else 0.0

    @property
    def sustained(self) -> bool:
        return not self.failures



class LiveBench(Bench):
    """A run's bench that also runs live steps."""

    def step(self, spark, master: str, rate: float, stage: str = "job") -> Step:
        """One live step of the job (`stage` "job"), or of one of its input stages (`CEILING_STAGES`)."""
        from quorum.synthetic import Fault
        a = self.args
        step = Step(master, rate, stage)
        self.summary_rows.clear()
        topic = self.broker.create_topic(f"bench-{stage}-{master[6]}-{int(rate)}", a.partitions)
        if stage == "job":
            _cfg, job, step.batches, transitions, recorder = self.start(spark, topic)
            stop, read = job.stop, lambda: job.writer.monitor.input_records_total
        else:
            query, step.batches, recorder = self.start_stage(spark, topic, stage)
            stop, read, transitions = query.stop, lambda: sum(b.records for b in step.batches), []
        fault_ms = int((a.warmup_seconds + 10) * 1000)
        fault = Fault("cutoff", start_ms=fault_ms, duration_ms=int(a.step_seconds * 1000) - fault_ms,
                      cluster=0, replica=CUT_OFF_REPLICA)
        step.clusters = self.clusters_for(rate)
        load = PacedLoad(self.workload(step.clusters, rate, [fault]), a.step_seconds, self.broker.bootstrap, topic)
        tree = TreeCpu(os.getpid(), exclude=lambda: (self.broker.pid, load.pid, self.pushgateway.pid))
        load.await_encoded()
        while time.time() * 1000 < load.start_ms + a.warmup_seconds * 1000:
            time.sleep(0.05)
        measured_from = time.time()
        cpu0, broker0 = tree.seconds(), cpu_seconds(self.broker.pid)
        gateway0 = cpu_seconds(self.pushgateway.pid)
        peak = PeakMemory(tree, interval_s=0.5)
        peak.start()
        step.load = load.await_done()
        measured_to = time.time()
        step.measured_s = measured_to - measured_from
        step.job_cpu_s = TreeCpu.used(cpu0, tree.seconds())
        step.broker_cpu_s = cpu_seconds(self.broker.pid) - broker0
        step.pushgateway_cpu_s = cpu_seconds(self.pushgateway.pid) - gateway0
        step.peak_rss = peak.finish().total
        stop_after_input(stop, read, step.load.records, self.trigger_ms)
        recorder.remove()
        step.rows_out = sum(self.summary_rows)
        step.window = [b for b in step.batches if measured_from <= b.wall_s <= measured_to + self.trigger_ms / 1000]
        judge(step, self.trigger_ms)
        fault_start_s = (load.start_ms + fault_ms) / 1000
        flagged = [w for w, e in transitions if e["cluster_id"] == "cluster-0"
                   and e.get("replica_id") == CUT_OFF_REPLICA and e["status"] == "unreachable" and w >= fault_start_s]
        step.detection_s = flagged[0] - fault_start_s if flagged else None
        return step


def judge(step: Step, trigger_ms: int) -> None:
    """Add to `step.failures` what keeps its judged batches from being sustained."""
    window = step.window
    slow = [b for b in window if b.duration_ms > trigger_ms]
    late = [b for b in window if b.delay_ms is not None and b.delay_ms >= 2 * trigger_ms]
    if not window:
        step.failures.append("no batch completed in the measured window")
    if slow:
        step.failures.append(f"{len(slow)} of {len(window)} batches over the trigger "
                             f"(longest {max(b.duration_ms for b in slow)} ms)")
    if late:
        step.failures.append(f"input delay >= 2 triggers in {len(late)} batches "
                             f"(most {max(b.delay_ms for b in late) / 1000:.1f} s)")
    if step.load.max_late_ms > trigger_ms or step.load.start_late_ms > 0:
        step.failures.append(f"the load fell {max(step.load.max_late_ms, step.load.start_late_ms):.0f} ms "
                             f"behind its schedule")

def print_step(s: Step) -> None:
    load = s.load
    verdict = "sustained" if s.sustained else "NOT sustained: " + "; ".join(s.failures)
    durations = sorted(b.duration_ms for b in s.window) or [0]
    delays = [b.delay_ms for b in s.window if b.delay_ms is not None] or [0]
    if s.stage != "job":  # an input stage alone: no health state, nothing to detect
        detection, state_part = "n/a", ""
        if s.stage == "summary":
            records = sum(b.records for b in s.batches)
            state_part = f"{s.rows_out / max(records, 1):.3f} rows out a record in, "
    else:
        detection = f"{s.detection_s:.1f} s" if s.detection_s is not None else "not flagged"
        state = sorted(b.state_ms for b in s.window) or [0]
        state_part = f"health state median {state[len(state) // 2]} ms (its partitions summed), "
    print(f"  {s.master} at {s.rate:>9,.0f} events/s ({s.clusters} clusters, {load.records:,} records): {verdict}\n"
          f"      {len(s.window)} batches judged: median {durations[len(durations) // 2]} ms, "
          f"longest {durations[-1]} ms, {state_part}input delay at most {max(delays) / 1000:.1f} s; job CPU {s.job_cpu_s / s.measured_s:.2f} cores, "
          f"peak RSS {s.peak_rss / MIB:,.0f} MiB; broker CPU {s.broker_cpu_s / s.measured_s:.2f} cores, "
          f"Pushgateway CPU {s.pushgateway_cpu_s / s.measured_s:.2f} cores, "
          f"generator CPU {load.publish_cpu_s / load.publish_wall_s:.2f} cores; detection {detection}", flush=True)


@dataclass
class Steps:
    highest: Step | None = None   # the highest rate sustained
    first: Step | None = None
    failed: Step | None = None    # the step that was not (None: every step asked for was)
    capped: bool = False          # stopped where the workload published no faster

    def rate_text(self, with_failed: bool = False) -> str:
        if self.first is None:
            return "not measured"
        if self.highest is None:
            return f"below {self.first.rate:,.0f} events/s"
        if not with_failed:
            return f"{self.highest.rate:,.0f} events/s"
        if self.failed:
            beyond = f"{self.failed.rate:,.0f} not"
        else:
            beyond = "the highest rate the workload reached" if self.capped else "the highest step asked"
        return f"{self.highest.rate:,.0f} events/s ({beyond})"


def step_up(bench: LiveBench, spark, master: str, stage: str = "job") -> Steps:
    """Rates from `--start-rate` (the input stages: `--ceiling-start-rate` where the script has
    it), x `--factor` a step, until a step is not sustained, or the workload publishes no faster."""
    a = bench.args
    label = master if stage == "job" else f"{master}, {stage} only"
    start = a.start_rate if stage == "job" else getattr(a, "ceiling_start_rate", None) or a.start_rate
    print(f"{label}: rates from {start:,.0f} events/s, x {a.factor} per step", flush=True)
    steps, rate = Steps(), start
    while rate <= a.max_rate:
        step = bench.step(spark, master, rate, stage)
        steps.first = steps.first or step
        print_step(step)
        if not step.sustained:
            steps.failed = step
            break
        # a step that published less than a quarter of the step's rise more than the last: the
        # synthetic workload goes no faster on this machine, and further steps would repeat it
        if steps.highest and step.rate < steps.highest.rate * (1 + (a.factor - 1) / 4):
            print(f"  the workload published {step.rate:,.0f} events/s when asked for {rate:,.0f}: "
                  f"no higher step", flush=True)
            steps.highest, steps.capped = max(steps.highest, step, key=lambda s: s.rate), True
            break
        steps.highest, rate = step, rate * a.factor
    return steps
