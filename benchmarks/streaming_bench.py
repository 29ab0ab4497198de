"""What the streaming job's benchmarks share: a broker and a real Pushgateway for a run, the raw
read of a topic (the throughput scripts' baseline), the job as `streaming run` starts it with
every output on, its input stages alone into Spark's `noop` sink, a listener keeping each
micro-batch, and the synthetic workload's options.

The scripts: `job_throughput.py` (the rate the whole job sustains live, detection, memory),
`input_ceiling.py` (the same steps for its input stages alone), `idle_cost.py` (its CPU watching
idle quorums), `drain_stages.py` (a backlog drained by stage) and `job_startup.py` (the job from
its start: first verdict, warm-up, memory). `live_steps.py` holds the stepped rates the first two
run; `goals.py` the goal lines.
"""
from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from confluent_kafka import Consumer, KafkaError, TopicPartition

MIB = 1024 * 1024
DEFAULT_TRIGGER_MS = 1000  # the job's own trigger and health tick; `--trigger-ms` runs another
# the job's input stages measured alone, and how the scripts name them
CEILING_STAGES = {"source": "the source alone", "parse": "source + Spark's JSON parse", "decode": "source + decode",
                  "summary": "source + decode + a summary per replica and tick"}
# What `summary` groups a batch's accepted fetches by, besides the quorum and the tick
SUMMARY_FIELDS = ("type", "leader_id", "leader_epoch", "replica_id", "replica_role")
# and those whose idle cost `idle_cost.py` can measure: the job without its outputs too
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


def parser(doc: str) -> argparse.ArgumentParser:
    """A script's parser with the workload's options: `--help` prints the script's docstring."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clusters", type=int, default=200)
    ap.add_argument("--voters", type=int, default=3)
    ap.add_argument("--observers", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--spark-conf", nargs="*", default=[], metavar="KEY=VALUE", help="extra Spark settings")
    return ap


def trigger_option(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--trigger-ms", type=int, default=DEFAULT_TRIGGER_MS,
                    help="the job's trigger and health.tick_ms (default: the job's own); a longer one costs less "
                         "when idle and re-evaluates statuses less often")


def parse(ap: argparse.ArgumentParser) -> argparse.Namespace:
    args = ap.parse_args()
    args.spark_settings = dict(a.split("=", 1) for a in args.spark_conf)  # --spark-conf, for every session
    if "trigger_ms" not in args:  # a script without --trigger-ms runs the job on its own trigger
        args.trigger_ms = DEFAULT_TRIGGER_MS
    return args


@contextmanager
def environment(args, what: str, raw_read: bool = True, bench: type[Bench] | None = None
                ) -> Iterator[tuple[Bench, float | None]]:
    """A run's work directory, broker and Pushgateway (a `bench`, by default a `Bench`, holds them),
    and the raw read of the workload's records (the baseline of the live steps and of the drain),
    printed as it is measured."""
    from quorum.local_kafka.kafka_broker import KafkaBroker
    from quorum.synthetic import SyntheticConfig, publish

    tmp = Path(tempfile.mkdtemp(prefix="streaming-bench-"))
    print(f"workload: {args.clusters} clusters x ({args.voters} voters + {args.observers} observers), "
          f"{args.partitions} partitions; every output on; {what}; work directory {tmp}", flush=True)
    with KafkaBroker(log_path=tmp / "broker.log") as broker:
        pushgateway = Pushgateway(tmp)
        try:
            raw = None
            if raw_read:
                topic = broker.create_topic("bench-raw", args.partitions)
                synthetic = SyntheticConfig(clusters=args.clusters, voters=args.voters, observers=args.observers,
                                            seed=3, append_interval_ms=100)
                total = publish(synthetic, broker.bootstrap, topic, duration_ms=20_000, speed=0)[0].records
                raw = raw_read_rate(broker.bootstrap, topic, args.partitions, total)
                print(f"raw confluent-kafka read of {total:,} records: {raw:,.0f} events/s", flush=True)
            yield (bench or Bench)(args, tmp, broker, pushgateway), raw
        finally:
            pushgateway.stop()


def job_session(args, master: str):
    """A Spark session as the job builds one on `master`, with the state partitions the job gives a
    new checkpoint there with the workload's quorums in its topic (auto: one per 200, at most the
    local cores)."""
    from streaming.config import JobConfig
    from streaming.job_logging import spark_conf
    from streaming.spark_session import build_spark

    partitions = JobConfig().spark.state_partitions(master, args.clusters)
    print(f"{master}: {partitions} state partition(s), as `auto` gives a new checkpoint watching "
          f"{args.clusters} quorums", flush=True)
    spark = build_spark(master=master, app_name=f"streaming-bench-{master}", shuffle_partitions=partitions,
                        extra_conf=spark_conf(args.spark_settings))
    spark.sparkContext.setLogLevel("ERROR")
    return spark
