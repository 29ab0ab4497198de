"""The streaming job's sustained throughput, against the ceiling of its source, measured in one run.

Every output is on, as in production: dead letters, the Prometheus push (a real Pushgateway) and
the Kafka health topic. The load is a synthetic workload of `--clusters` clusters x (3 voters + 2
observers), encoded before each step and published at a fixed rate by the raw producer in a
process of its own (`paced_load.py`), stamped with the wall clock: a live input, not a backlog.

  1. raw read: one confluent-kafka consumer reading a topic of the same records (the ceiling);
  2. sustained rate, for `local[2]` and then `local[1]`: rates stepped up by `--factor` from
     `--start-rate`, each for `--step-seconds`, on a fresh topic and checkpoint, until a step
     fails. A step is sustained when, after `--warmup-seconds`, every micro-batch finishes within
     its trigger and the input delay (a batch's end minus its newest record's time) stays under
     two triggers, and the load kept its schedule. Each step prints its median batch and the
     health state's part of it (`state_time_ms`), the job's CPU, its peak RSS
     (JVM, Python workers and driver together) and the CPU the broker, the Pushgateway and the
     generator took (the gateway is wiped before each run, so it holds only that run's groups);
  3. detection: every step cuts a voter of cluster 0 off `--warmup-seconds` + 10 s in; the time
     from the fault to its `unreachable` transition reaching the writer, at the highest sustained
     `local[2]` step (the goal: within the unreachable threshold + 2 s);
  4. idle cost: CPU seconds per wall second of the job watching 1 idle quorum, then 200, measured
     after `--idle-warmup-seconds` (the JVM still compiles code for minutes after the job starts;
     an always-on job is judged by what it takes after that), and the same for the input stages
     named by `--idle-floors` (default: the source alone into `noop`, Spark's own cost of a query
     on this trigger, the baseline; `health` is the job without its outputs), watching the 1
     quorum. `--idle-only` measures just these. `--trigger-ms` runs the job (and the stages) on
     another trigger, with `health.tick_ms` the same, as an operator would to pay less when idle;
  5. `--drain`: where the time goes by stage: the source alone, source + decode, the full job,
     each draining a backlog with `availableNow` (start-up included);
  6. `--ceiling`: the same live steps on `local[2]` for the source alone, the source with Spark's
     typed JSON parse alone, and the source with the job's decoding, each into Spark's `noop`
     sink with the job's trigger: rates no health design can pass while it reads through this
     source and decodes in Spark on this machine. `summary` adds a summary of each micro-batch
     in the JVM (a batch `groupBy` in `foreachBatch`: each replica's accepted fetches of a tick
     become their first and last record), the first query of a design that would hand the
     health state a row per replica and tick; it prints the rows out per record in.
  7. `--lifecycle`: the job as the local stack runs it (`streaming run`, deploy/job.local.yaml,
     in a process of its own, `job_lifecycle.py`) watching 1 quorum from its start: the time to
     its first verdict at the Pushgateway, its CPU over its first `--lifecycle-early-seconds`
     against its CPU after `--lifecycle-warm-seconds`, its peak memory (proportional set sizes
     summed, and where they went); then watching `--clusters` quorums, its peak memory; and
     Spark's source alone into `noop` measured the same way, the floor. `--lifecycle-runs` picks
     some of the three; `--spark-conf` reaches the job's and the floor's sessions.
Then one line per goal (`goals.py`), each figure against Spark's own from the same run:
  goal NAME: VALUE against FLOOR = RATIO (goal G): holds      (or short, or not measured)
The last line is the summary ("below N events/s" when even the first step was not sustained;
detection and memory are then the first step's):
  sustained: N events/s for S s (local[2]), R x the raw read of M events/s in the same run;
  local[1] K events/s; detection D s; peak RSS P MiB

    python benchmarks/streaming_throughput.py            # 300 s steps: 6 min a step
    python benchmarks/streaming_throughput.py --quick    # 30 s steps: a smoke run (about 6 min)
"""
from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from confluent_kafka import Consumer, KafkaError, TopicPartition

from goals import MB, Goal
from job_lifecycle import Lifecycle, measure_floor, measure_job
from paced_load import PacedLoad
from process_usage import PeakMemory, TreeCpu, cpu_seconds, thread_cpu_seconds

MIB = 1024 * 1024
DEFAULT_TRIGGER_MS = 1000  # the job's own trigger and health tick; `--trigger-ms` runs another
JIT_THREADS = ("C1 CompilerThre", "C2 CompilerThre")  # HotSpot's compiler threads (names cut at 15)
CUT_OFF_REPLICA = 2
# the job's input stages `--ceiling` measures alone, and how its summary names them
CEILING_STAGES = {"source": "the source alone", "parse": "source + Spark's JSON parse", "decode": "source + decode",
                  "summary": "source + decode + a summary per replica and tick"}
DEFAULT_CEILING_STAGES = ("source", "parse", "decode")  # `--ceiling` with no stage named
# What `summary` groups a batch's accepted fetches by, besides the quorum and the tick
SUMMARY_FIELDS = ("type", "leader_id", "leader_epoch", "replica_id", "replica_role")
# and those `--idle-floors` can measure: the job without its outputs too
IDLE_STAGES = {**CEILING_STAGES, "health": "source + decode + health state"}


def raw_read_rate(bootstrap: str, topic: str, partitions: int, expected: int) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    n, eof, start = 0, set(), time.perf_counter()
    while n < expected or len(eof) < partitions:
        for m in c.consume(10_000, 1.0):
            if m.error() is None:
                n += 1
            elif m.error().code() == KafkaError._PARTITION_EOF:
                eof.add(m.partition())
    elapsed = time.perf_counter() - start
    c.close()
    return n / elapsed


class Pushgateway:
    """The Debian package's Pushgateway on a free loopback port, for the job's Prometheus push."""

    def __init__(self, workdir: Path):
        from quorum.local_kafka.loopback_ports import free_port
        self.url = f"http://127.0.0.1:{free_port()}"
        self._log = (workdir / "pushgateway.log").open("wb")
        self._process = subprocess.Popen(
            ["prometheus-pushgateway", f"--web.listen-address={self.url[7:]}", "--persistence.file=",
             "--web.enable-admin-api"],
            stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{self.url}/-/ready", timeout=1).read()
                return
            except OSError:
                if time.monotonic() > deadline or self._process.poll() is not None:
                    raise RuntimeError(f"the Pushgateway did not start (log: {self._log.name})")
                time.sleep(0.2)

    @property
    def pid(self) -> int:
        return self._process.pid

    def wipe(self) -> None:
        """Delete every group. Each PUT is checked against all the groups the gateway holds, so
        the groups earlier runs left would make a later run's pushes cost more than the same
        job's pushes cost in production, where the job holds only its own clusters' groups."""
        request = urllib.request.Request(f"{self.url}/api/v1/admin/wipe", method="PUT")
        urllib.request.urlopen(request, timeout=10).read()

    def stop(self) -> None:
        self._process.terminate()
        self._process.wait(10)
        self._log.close()


@dataclass
class Batch:
    wall_s: float          # when the batch's progress was reported (its end)
    duration_ms: int
    records: int
    newest_event_ms: int | None
    state_ms: int = 0      # the health state's work in it, summed over its partitions (state_time_ms)

    @property
    def delay_ms(self) -> float | None:
        return None if self.newest_event_ms is None else self.wall_s * 1000 - self.newest_event_ms


def state_time_ms(progress: dict) -> int:
    """A micro-batch's time in its stateful operators, summed over their partitions: the health
    processor's work runs inside the state updates (its Python, its state server's round trips),
    then each partition's state commit. Partitions run side by side, so on `local[2]` with two
    state partitions the stage's wall time is about half of this."""
    return sum(int(op.get(k) or 0) for op in progress.get("stateOperators") or []
               for k in ("allUpdatesTimeMs", "allRemovalsTimeMs", "commitTimeMs"))


def batch_recorder(spark, query_name: str, batches: list[Batch]):
    """A listener keeping each micro-batch of the health query: duration, records, newest event
    (the job's own lean listener: PySpark's would add its conversion cost to what is measured)."""
    from streaming.job import INPUT_OBSERVATION
    from streaming.progress_listener import ProgressListener

    def on_progress(p: dict) -> None:
        if p.get("name") != query_name:
            return
        observed = (p.get("observedMetrics") or {}).get(INPUT_OBSERVATION) or {}
        batches.append(Batch(time.time(), int((p.get("durationMs") or {}).get("triggerExecution") or 0),
                             int(p.get("numInputRows") or 0), observed.get("newest_event_ms"), state_time_ms(p)))

    return ProgressListener(spark, on_progress)


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


def summary_of(batch_df, tick_ms: int = DEFAULT_TRIGGER_MS):
    """A micro-batch of routed records (`route_records` carrying `SUMMARY_FIELDS`) summarised in
    the JVM as the first query of two would hand the second its health state's input (the shape
    of the designs that keep Python to a row per replica and tick): the accepted fetches of one
    quorum, leader, epoch, replica and tick become their first and last record (by stamp; one row
    when there is one fetch), every other record passes as it is. Columns: the quorum key and
    `record_json`."""
    from pyspark.sql import functions as F

    from streaming.decode import ACCEPTED, TIME_MS
    from streaming.health.schema import KEY_COLUMNS, RECORD_JSON
    fetch = F.col(ACCEPTED) & (F.col("type") == "fetch")
    group = [*KEY_COLUMNS, *SUMMARY_FIELDS[1:], F.floor(F.col(TIME_MS) / tick_ms).alias("_tick")]
    ends = (batch_df.where(fetch).groupBy(*group)
            .agg(F.min_by(RECORD_JSON, TIME_MS).alias("first"), F.max_by(RECORD_JSON, TIME_MS).alias("last"),
                 F.count(F.lit(1)).alias("fetches"))
            .select(*KEY_COLUMNS, F.explode(F.when(F.col("fetches") > 1, F.array("first", "last"))
                                            .otherwise(F.array("first"))).alias(RECORD_JSON)))
    return ends.unionByName(batch_df.where(~fetch).select(*KEY_COLUMNS, RECORD_JSON))


def summarise_batch(rows_out: list[int]):
    """The `summary` stage's batch writer: `summary_of` each micro-batch into `noop`, its rows
    appended to `rows_out`."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    def write(batch_df, batch_id: int) -> None:
        observation = Observation("summary")
        summary_of(batch_df).observe(observation, F.count(F.lit(1)).alias("rows")).write.format("noop").mode(
            "append").save()
        rows_out.append(int(observation.get["rows"]))
    return write


def trigger_settings(trigger_ms: int) -> dict:
    """The job's settings for a trigger of `trigger_ms`: its health tick as long (a tick may not
    be shorter than the trigger, and a longer one would re-evaluate silent quorums less often)."""
    return {"job": {"trigger_interval_ms": trigger_ms}, "health": {"tick_ms": trigger_ms}}


def idle_goal(trigger_ms: int, clusters: int) -> str:
    """The idle goals, which hold on the job's own trigger: on another, the line says so."""
    goal = f"goal 1 quorum <= 1.5 x the source alone, {clusters} <= 0.40"
    return goal if trigger_ms == DEFAULT_TRIGGER_MS else f"on a {trigger_ms} ms trigger; the {goal} on the job's own"


class Bench:
    def __init__(self, args, tmp: Path, broker, pushgateway: Pushgateway):
        self.args, self.tmp, self.broker, self.pushgateway = args, tmp, broker, pushgateway
        self.trigger_ms = args.trigger_ms  # the run's trigger: steps are judged against it
        self.runs = 0
        self.summary_rows: list[int] = []  # rows out of each batch of the `summary` stage

    def prometheus_sink(self) -> dict:
        """The job's Prometheus output: a push to the run's own group on the Pushgateway."""
        return {"mode": "pushgateway", "pushgateway_url": self.pushgateway.url, "job": f"bench_{self.runs}"}

    def job_config(self, topic: str):
        from streaming.config import JobConfig
        self.runs += 1
        run = self.tmp / f"run-{self.runs}"
        health_topic = self.broker.create_topic(f"bench-health-{self.runs}", 1)
        trigger = trigger_settings(self.trigger_ms)
        return JobConfig.from_dict({
            "source": {"bootstrap_servers": self.broker.bootstrap, "topic": topic,
                       "starting_offsets": "earliest"},
            "job": {"checkpoint_location": str(run / "checkpoint"), **trigger["job"]},
            "health": trigger["health"],
            "dead_letters": {"enabled": True, "path": str(run / "dead-letters")},
            "sink": {"prometheus": self.prometheus_sink(),
                     "kafka": {"enabled": True, "bootstrap_servers": self.broker.bootstrap, "topic": health_topic}}})

    def start(self, spark, topic: str):
        """The job as `streaming run` starts it, plus a recorder of batches and of transitions."""
        from streaming.job import HEALTH_QUERY, job_batch_writer, start_job
        cfg = self.job_config(topic)
        if self.pushgateway is not None:
            self.pushgateway.wipe()  # only this run's groups, as in production
        writer = job_batch_writer(cfg)
        transitions: list[tuple[float, dict]] = []
        writer.add_event_listener(
            lambda events: transitions.extend((time.time(), e) for e in events if e["kind"] == "transition"))
        batches: list[Batch] = []
        recorder = batch_recorder(spark, HEALTH_QUERY, batches)
        job = start_job(spark, cfg, writer)
        deadline = time.monotonic() + 120
        while job.health_query.lastProgress is None:
            if time.monotonic() > deadline:
                raise RuntimeError("the job ran no batch in 120 s")
            time.sleep(0.2)
        return cfg, job, batches, transitions, recorder

    def start_stage(self, spark, topic: str, stage: str):
        """The job's input alone (`source`), with Spark's typed parse alone (`parse`), with the
        job's decoding (`decode`) or with its decoding and health state (`health`: the job without
        its outputs), into the `noop` sink on the job's trigger, observed as the job observes its
        input."""
        from pyspark.sql import functions as F

        from streaming.config import JobConfig
        from streaming.decode import TEXT, parsed_record, route_records
        from streaming.job import INPUT_OBSERVATION, observe_input
        from streaming.source import open_stream
        from streaming.spark_session import use_local_checkpoint_manager
        self.runs += 1
        # read as the job reads (its read tasks), with no bound on a batch
        source = {"bootstrap_servers": self.broker.bootstrap, "topic": topic, "starting_offsets": "earliest",
                  "max_offsets_per_trigger": None}
        raw = open_stream(spark, JobConfig.from_dict({"source": source}).source.reader_options())
        if stage == "summary":
            observed = observe_input(raw.transform(route_records(carry=SUMMARY_FIELDS)))
        elif stage in ("decode", "health"):
            observed = observe_input(raw.transform(route_records()))
            if stage == "health":
                from streaming.health import build_health_stream
                from streaming.health.config import HealthConfig
                from streaming.state_layout import new_checkpoint_layout
                # the layout of the job's new checkpoint
                layout = new_checkpoint_layout(int(spark.conf.get("spark.sql.shuffle.partitions")))
                observed = build_health_stream(observed, HealthConfig(), buckets=layout.buckets, api=layout.processor)
        elif stage == "parse":   # the job's typed JSON parse alone: the floor of decoding in Spark
            parsed = raw.withColumn(TEXT, F.col("value").cast("string")).select(parsed_record().alias("r"))
            # a hash of every field, so Spark cannot prune the parse to the one field observed
            fields = [F.col(f"r.{name}") for name in parsed.schema["r"].dataType.fieldNames()]
            observed = parsed.observe(INPUT_OBSERVATION, F.count(F.lit(1)).alias("records"),
                                      F.max("r.time_ms").alias("newest_event_ms"), F.sum(F.hash(*fields)).alias("h"))
        else:   # the Kafka timestamp: the producer's, as close to the event's stamp as this stage has
            observed = raw.observe(INPUT_OBSERVATION, F.count(F.lit(1)).alias("records"),
                                   F.max(F.unix_millis("timestamp")).alias("newest_event_ms"))
        name = f"ceiling_{stage}_{self.runs}"
        batches: list[Batch] = []
        recorder = batch_recorder(spark, name, batches)
        checkpoint = str(self.tmp / f"run-{self.runs}" / "checkpoint")
        use_local_checkpoint_manager(spark, checkpoint)  # as the job does
        writer = observed.writeStream.queryName(name).outputMode("update")
        if stage == "summary":
            writer = writer.foreachBatch(summarise_batch(self.summary_rows))
        else:
            writer = writer.format("noop")
        query = (writer.option("checkpointLocation", checkpoint)
                 .trigger(processingTime=f"{self.trigger_ms} milliseconds").start())
        return query, batches, recorder

    def clusters_for(self, rate: float) -> int:
        """`--clusters`, or fewer at low rates: an idle cluster already sends 13 events/s (NoOp
        fetches and metrics), so each cluster gets at least 20/s and the rate is set by appends."""
        return max(1, min(self.args.clusters, int(rate // 20)))

    def workload(self, clusters: int, rate: float | None, faults=()):
        from quorum.synthetic import SyntheticConfig
        from quorum.synthetic.command import append_interval_for_rate
        a = self.args
        interval = append_interval_for_rate(rate, clusters, a.voters, a.observers) if rate else None
        return SyntheticConfig(clusters=clusters, voters=a.voters, observers=a.observers, seed=7,
                               append_interval_ms=interval, faults=tuple(faults))

    def step(self, spark, master: str, rate: float, stage: str = "job") -> Step:
        """One live step of the job (`stage` "job"), or of one of its input stages (`CEILING_STAGES`)."""
        from quorum.synthetic import Fault
        a = self.args
        step = Step(master, rate, stage)
        self.summary_rows.clear()
        topic = self.broker.create_topic(f"bench-{stage}-{master[6]}-{int(rate)}", a.partitions)
        if stage == "job":
            cfg, job, step.batches, transitions, recorder = self.start(spark, topic)
        else:
            query, step.batches, recorder = self.start_stage(spark, topic, stage)
            transitions = []
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
        if stage == "job":
            stop_after_input(job.stop, lambda: job.writer.monitor.input_records_total, step.load.records,
                             self.trigger_ms)
        else:
            stop_after_input(query.stop, lambda: sum(b.records for b in step.batches), step.load.records,
                             self.trigger_ms)
        recorder.remove()
        step.rows_out = sum(self.summary_rows)
        step.window = window = [b for b in step.batches
                                if measured_from <= b.wall_s <= measured_to + self.trigger_ms / 1000]
        slow = [b for b in window if b.duration_ms > self.trigger_ms]
        late = [b for b in window if b.delay_ms is not None and b.delay_ms >= 2 * self.trigger_ms]
        if not window:
            step.failures.append("no batch completed in the measured window")
        if slow:
            step.failures.append(f"{len(slow)} of {len(window)} batches over the trigger "
                                 f"(longest {max(b.duration_ms for b in slow)} ms)")
        if late:
            step.failures.append(f"input delay >= 2 triggers in {len(late)} batches "
                                 f"(most {max(b.delay_ms for b in late) / 1000:.1f} s)")
        if step.load.max_late_ms > self.trigger_ms or step.load.start_late_ms > 0:
            step.failures.append(f"the load fell {max(step.load.max_late_ms, step.load.start_late_ms):.0f} ms "
                                 f"behind its schedule")
        fault_start_s = (load.start_ms + fault_ms) / 1000
        flagged = [w for w, e in transitions if e["cluster_id"] == "cluster-0"
                   and e.get("replica_id") == CUT_OFF_REPLICA and e["status"] == "unreachable" and w >= fault_start_s]
        step.detection_s = flagged[0] - fault_start_s if flagged else None
        return step

    def idle_cost(self, spark, clusters: int, stage: str = "job") -> IdleCost:
        """CPU seconds per wall second of the job (`stage` "job"), or of one of its input stages
        (`IDLE_STAGES`), watching `clusters` idle quorums, and the part of it the JVM's
        compilers took."""
        a = self.args
        topic = self.broker.create_topic(f"bench-idle-{stage}-{clusters}", a.partitions)
        if stage == "job":
            _, job, _, _, recorder = self.start(spark, topic)
            stop, read = job.stop, lambda: job.writer.monitor.input_records_total
        else:
            query, batches, recorder = self.start_stage(spark, topic, stage)
            stop, read = query.stop, lambda: sum(b.records for b in batches)
        load = PacedLoad(self.workload(clusters, None), a.idle_warmup_seconds + a.idle_seconds,
                         self.broker.bootstrap, topic)
        tree = TreeCpu(os.getpid(), exclude=lambda: (self.broker.pid, load.pid, self.pushgateway.pid))
        jvm = spark.sparkContext._gateway.proc.pid  # spark-submit execs the driver's JVM
        load.await_encoded()
        while time.time() * 1000 < load.start_ms + a.idle_warmup_seconds * 1000:
            time.sleep(0.05)
        cpu0, jit0, t0 = tree.seconds(), thread_cpu_seconds(jvm, JIT_THREADS), time.perf_counter()
        load.await_done()
        used, wall = TreeCpu.used(cpu0, tree.seconds()), time.perf_counter() - t0
        jit = thread_cpu_seconds(jvm, JIT_THREADS) - jit0
        stop_after_input(stop, read, load.encoded, self.trigger_ms)
        recorder.remove()
        return IdleCost(used / wall, jit / wall)


@dataclass
class IdleCost:
    cpu: float        # CPU s per s of the job (JVM, its Python workers, the driver's Python)
    compilers: float  # the part the JVM's JIT compilers took: a job still warming up


def stop_after_input(stop: Callable[[], None], read: Callable[[], int], records: int, trigger_ms: int,
                     patience_s: float = 30) -> None:
    """Call `stop` once `read()` (the records the query has read) reaches `records`, or after
    `patience_s`: a query stopped in the middle of a batch makes Spark print a StackOverflowError
    (its check of the interrupted batch's error message), noise that a benchmark need not make."""
    deadline = time.monotonic() + patience_s
    while read() < records and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(2 * trigger_ms / 1000)  # the batch after the last records (its delay is judged too)
    stop()


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


def step_up(bench: Bench, spark, master: str, stage: str = "job") -> Steps:
    """Rates from `--start-rate` (the input stages: `--ceiling-start-rate`), x `--factor` a step,
    until a step is not sustained, or the workload publishes no faster."""
    a = bench.args
    label = master if stage == "job" else f"{master}, {stage} only"
    start = a.start_rate if stage == "job" else a.ceiling_start_rate or a.start_rate
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


LIFECYCLE_RUNS = ("floor", "job", "fleet")  # Spark's source alone; the job at 1 quorum, at --clusters


def run_lifecycle(bench: Bench) -> dict[str, Lifecycle]:
    """`--lifecycle`: the job and Spark's source alone, each in a process of its own started
    while its quorums already publish (as the local stack's nodes do), one at a time."""
    args, tmp, broker, pushgateway = bench.args, bench.tmp, bench.broker, bench.pushgateway
    out: dict[str, Lifecycle] = {}
    early, warm, measured = args.lifecycle_early_seconds, args.lifecycle_warm_seconds, args.idle_seconds
    conf = args.spark_settings
    # the floor's memory and first batch are all the goals read of it: warm after at most 3 minutes
    runs = (("floor", 1, min(warm, 180)), ("job", 1, warm), ("job fleet", args.clusters, min(warm, 180)))
    for name, clusters, warm_after in [run for run in runs if run[0].split()[-1] in args.lifecycle_runs]:
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


def goal_lines(args, decode: Steps | None, job: Step | None, idle: dict[int, IdleCost], source: IdleCost | None,
               source_fleet: IdleCost | None, lifecycle: dict[str, Lifecycle]) -> list[Goal]:
    """The issue's goals, each against Spark's own figure from this run."""
    n = args.clusters
    on_trigger = "" if args.trigger_ms == DEFAULT_TRIGGER_MS else f" (on a {args.trigger_ms} ms trigger)"
    floor, job_1, fleet = lifecycle.get("floor"), lifecycle.get("job"), lifecycle.get("job fleet")
    return [
        Goal("throughput", job.rate if job else None, decode.highest.rate if decode and decode.highest else None,
             0.7, "events/s", "source + decode", at_least=True,
             how_to_measure="--ceiling decode, the job's steps on local[2]"),
        Goal("idle_1_quorum" + on_trigger, idle[1].cpu if 1 in idle else None, source.cpu if source else None, 1.5,
             "CPU s per s", "the source alone", how_to_measure="the idle runs with the source floor"),
        Goal(f"idle_{n}_quorums" + on_trigger, idle[n].cpu if n in idle else None,
             source_fleet.cpu if source_fleet else None, 0.4, "CPU s per s", "the source alone", on_value=True,
             how_to_measure="the idle runs with the source floor"),
        Goal("warm_up", job_1.early_cpu if job_1 else None, job_1.warm_cpu if job_1 else None, 2.0,
             "CPU s per s", f"itself after {job_1.warm_after_s:.0f} s" if job_1 else "",
             how_to_measure="--lifecycle"),
        Goal("first_verdict", job_1.first_output_s if job_1 else None,
             floor.first_output_s if floor else None, 15.0, "s", "Spark's first batch", on_value=True,
             how_to_measure="--lifecycle"),
        Goal("memory_1_quorum", job_1.peak_memory if job_1 else None, floor.peak_memory if floor else None, 800 * MB,
             "MB", "Spark's source alone", on_value=True, how_to_measure="--lifecycle"),
        Goal(f"memory_{n}_quorums", fleet.peak_memory if fleet else None, floor.peak_memory if floor else None,
             1200 * MB, "MB", "Spark's source alone (1 quorum)", on_value=True, how_to_measure="--lifecycle"),
    ]


def drain_stages(spark, broker, args, tmp: Path, raw: float) -> None:
    """The older breakdown: each stage draining a backlog of the same workload."""
    from pyspark.sql import functions as F

    from quorum.synthetic import SyntheticConfig, publish
    from streaming.decode import route_records
    from streaming.source import open_stream

    def timed(df, checkpoint: Path) -> float:
        start = time.perf_counter()
        q = (df.writeStream.format("noop").option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
        q.awaitTermination()
        return time.perf_counter() - start

    topic = broker.create_topic("bench-drain", args.partitions)
    synthetic = SyntheticConfig(clusters=args.clusters, voters=args.voters, observers=args.observers, seed=3)
    total = publish(synthetic, broker.bootstrap, topic, duration_ms=args.drain_seconds * 1000, speed=0)[0].records
    options = {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic, "startingOffsets": "earliest"}
    print(f"drain stages ({total:,} records, local[2], start-up included):")
    elapsed = timed(open_stream(spark, options), tmp / "cp-source")
    print(f"  source only:     {total / elapsed:>10,.0f} events/s  ({total / elapsed / raw:.3f} x raw)")
    routed = open_stream(spark, options).transform(route_records())
    elapsed = timed(routed.select(F.length("record_json").alias("n")), tmp / "cp-decode")
    print(f"  source + decode: {total / elapsed:>10,.0f} events/s  ({total / elapsed / raw:.3f} x raw)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clusters", type=int, default=200)
    ap.add_argument("--voters", type=int, default=3)
    ap.add_argument("--observers", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--start-rate", type=float, default=100, help="events/s of the first step")
    ap.add_argument("--factor", type=float, default=1.5, help="each step's rate over the previous one")
    ap.add_argument("--max-rate", type=float, default=400_000)
    ap.add_argument("--step-seconds", type=float, default=300, help="load per step (measured after the warm-up)")
    ap.add_argument("--warmup-seconds", type=float, default=20, help="start of each step left out of the verdict")
    ap.add_argument("--idle-seconds", type=float, default=60, help="measured idle time per idle-cost run")
    ap.add_argument("--idle-warmup-seconds", type=float, default=180,
                    help="start of each idle-cost run left out (the JVM's compilers settle for minutes)")
    ap.add_argument("--idle-only", action="store_true", help="only the idle costs (on local[2])")
    ap.add_argument("--idle-floors", nargs="*", choices=IDLE_STAGES, default=["source"], metavar="STAGE",
                    help="stages whose idle cost is measured too, watching 1 quorum, after the job's: "
                         f"{', '.join(IDLE_STAGES)} (default: source, the baseline; the option with no "
                         "stage skips them)")
    ap.add_argument("--masters", nargs="+", default=["local[2]", "local[1]"])
    ap.add_argument("--drain", action="store_true", help="also the drain breakdown by stage")
    ap.add_argument("--drain-seconds", type=int, default=60, help="synthetic seconds in the drain backlog")
    ap.add_argument("--ceiling", nargs="*", choices=CEILING_STAGES, metavar="STAGE",
                    help=f"also the live steps of the job's input stages on local[2]: {', '.join(CEILING_STAGES)} "
                         "(source, parse and decode when none is named)")
    ap.add_argument("--ceiling-start-rate", type=float, default=None,
                    help="events/s of the input stages' first step (default: --start-rate)")
    ap.add_argument("--spark-conf", nargs="*", default=[], metavar="KEY=VALUE", help="extra Spark settings")
    ap.add_argument("--trigger-ms", type=int, default=DEFAULT_TRIGGER_MS,
                    help="the job's trigger and health.tick_ms (default: the job's own); a longer one costs less "
                         "when idle and re-evaluates statuses less often")
    ap.add_argument("--lifecycle", action="store_true",
                    help="also the job as the local stack runs it, in a process of its own, from its start: first "
                         "verdict, CPU early and warm, memory at 1 and --clusters quorums, against Spark's source "
                         "alone measured the same way (about 30 minutes with the defaults)")
    ap.add_argument("--lifecycle-only", action="store_true", help="only --lifecycle")
    ap.add_argument("--lifecycle-early-seconds", type=float, default=120,
                    help="the job's first seconds whose CPU the warm-up goal compares (default %(default)s)")
    ap.add_argument("--lifecycle-warm-seconds", type=float, default=600,
                    help="when the job counts as warm, its CPU then measured for --idle-seconds (default %(default)s)")
    ap.add_argument("--lifecycle-runs", nargs="+", choices=LIFECYCLE_RUNS, default=list(LIFECYCLE_RUNS),
                    help="which of the lifecycle runs (default: all; the goals need all three)")
    ap.add_argument("--quick", action="store_true", help="30 s steps, 15 s idle runs after 30 s: a smoke run")
    args = ap.parse_args()
    args.spark_settings = dict(a.split("=", 1) for a in args.spark_conf)  # --spark-conf, for every session
    if args.ceiling is not None and "local[2]" not in args.masters:
        ap.error("--ceiling measures on local[2]: add it to --masters")
    if args.quick:
        args.step_seconds, args.warmup_seconds, args.idle_seconds, args.drain_seconds = 30, 10, 15, 10
        args.idle_warmup_seconds = 30
    if args.idle_only:
        args.masters = ["local[2]"]
    args.lifecycle = args.lifecycle or args.lifecycle_only

    from quorum.local_kafka.kafka_broker import KafkaBroker
    from quorum.synthetic import SyntheticConfig, publish
    from streaming.config import JobConfig
    from streaming.job_logging import spark_conf
    from streaming.spark_session import build_spark

    tmp = Path(tempfile.mkdtemp(prefix="streaming-bench-"))
    print(f"workload: {args.clusters} clusters x ({args.voters} voters + {args.observers} observers), "
          f"{args.partitions} partitions; every output on; a {args.trigger_ms} ms trigger; steps of "
          f"{args.step_seconds:.0f} s (first {args.warmup_seconds:.0f} s not judged); work directory {tmp}", flush=True)
    with KafkaBroker(log_path=tmp / "broker.log") as broker:
        pushgateway = Pushgateway(tmp)
        try:
            topic = broker.create_topic("bench-raw", args.partitions)
            synthetic = SyntheticConfig(clusters=args.clusters, voters=args.voters, observers=args.observers,
                                        seed=3, append_interval_ms=100)
            total = publish(synthetic, broker.bootstrap, topic, duration_ms=20_000, speed=0)[0].records
            raw = raw_read_rate(broker.bootstrap, topic, args.partitions, total)
            print(f"raw confluent-kafka read of {total:,} records: {raw:,.0f} events/s", flush=True)

            bench = Bench(args, tmp, broker, pushgateway)
            runs: dict[str, Steps] = {}      # per master
            ceiling: dict[str, Steps] = {}   # per stage, on local[2]
            idle: dict[int, IdleCost] = {}
            floors: dict[str, IdleCost] = {}  # per stage, 1 quorum
            floor_fleet: IdleCost | None = None  # the source alone, `--clusters` quorums
            lifecycle = run_lifecycle(bench) if args.lifecycle else {}
            for master in [] if args.lifecycle_only else args.masters:
                # the state partitions the job gives a new checkpoint on this master with the
                # workload's quorums in its topic (auto: one per 200, at most the local cores)
                partitions = JobConfig().spark.state_partitions(master, args.clusters)
                print(f"{master}: {partitions} state partition(s), as `auto` gives a new checkpoint watching "
                      f"{args.clusters} quorums", flush=True)
                spark = build_spark(master=master, app_name=f"streaming-bench-{master}", shuffle_partitions=partitions,
                                    extra_conf=spark_conf(args.spark_settings))
                spark.sparkContext.setLogLevel("ERROR")
                if master == "local[2]":  # first, on a fresh JVM
                    for clusters in (1, args.clusters):
                        idle[clusters] = bench.idle_cost(spark, clusters)
                        print(f"  idle: {clusters} quorum(s), the job takes {idle[clusters].cpu:.2f} CPU s per s "
                              f"after {args.idle_warmup_seconds:.0f} s ({idle[clusters].compilers:.2f} of it the "
                              f"JVM's compilers)", flush=True)
                    for stage in args.idle_floors:
                        floors[stage] = bench.idle_cost(spark, 1, stage)
                        print(f"  idle: 1 quorum, {IDLE_STAGES[stage]} into noop takes {floors[stage].cpu:.2f} "
                              f"CPU s per s after {args.idle_warmup_seconds:.0f} s ({floors[stage].compilers:.2f} "
                              f"of it the JVM's compilers)", flush=True)
                    if "source" in args.idle_floors:  # the baseline at the fleet's size too
                        floor_fleet = bench.idle_cost(spark, args.clusters, "source")
                        print(f"  idle: {args.clusters} quorums, the source alone into noop takes "
                              f"{floor_fleet.cpu:.2f} CPU s per s after {args.idle_warmup_seconds:.0f} s", flush=True)
                if args.idle_only:
                    spark.stop()
                    continue
                if args.drain and master == "local[2]":
                    drain_stages(spark, broker, args, tmp, raw)
                if args.ceiling is not None and master == "local[2]":
                    for stage in args.ceiling or DEFAULT_CEILING_STAGES:
                        ceiling[stage] = step_up(bench, spark, master, stage)
                runs[master] = step_up(bench, spark, master)
                spark.stop()
        finally:
            pushgateway.stop()

    nothing = Steps()
    on_two, on_one = runs.get("local[2]", nothing), runs.get("local[1]", nothing)
    two, one = on_two.highest, on_one.highest
    if two and one:
        print(f"local[2] / local[1]: {two.rate / one.rate:.2f} x (goal >= 1.7)")
    for stage, steps in ceiling.items():
        print(f"ceiling, {CEILING_STAGES[stage]} (local[2], noop sink): {steps.rate_text(with_failed=True)}")
    if idle:
        print("idle cost: " + ", ".join(f"{n} quorum(s) {cost.cpu:.2f} CPU s per s (compilers {cost.compilers:.2f})"
                                        for n, cost in idle.items())
              + f" (after {args.idle_warmup_seconds:.0f} s; {idle_goal(args.trigger_ms, args.clusters)})")
    if idle.get(1) and floors:
        print("idle floor, 1 quorum: " + ", ".join(
            f"{IDLE_STAGES[stage]} {cost.cpu:.2f} CPU s per s (the job {idle[1].cpu / cost.cpu:.1f} x)"
            for stage, cost in floors.items()))
    goals = goal_lines(args, ceiling.get("decode"), two, idle, floors.get("source"), floor_fleet, lifecycle)
    for goal in goals:
        print(goal.line())
    if args.idle_only or args.lifecycle_only:
        return
    shown = two or on_two.first  # detection and memory at the highest sustained step, else the lowest
    detection = f"{shown.detection_s:.1f} s" if shown and shown.detection_s is not None else "n/a"
    print(f"sustained: {on_two.rate_text()} for {args.step_seconds:.0f} s (local[2]), "
          f"{(two.rate if two else 0) / raw:.3f} x the raw read of {raw:,.0f} events/s in the same run; "
          f"local[1] {on_one.rate_text()}; detection {detection}; "
          f"peak RSS {(shown.peak_rss if shown else 0) / MIB:,.0f} MiB")

if __name__ == "__main__":
    main()
