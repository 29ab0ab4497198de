"""The streaming job: events topic -> decode -> health state -> Prometheus / Kafka / console.

One query, `quorum_health`, checkpointed in `<checkpoint>/health`: source -> `route_records`
(Spark's fast path packs the records it accepts; the others ride raw) -> `build_health_stream`
(the processor decides the raw ones with the contract's decoder; rejects come out as
`dead_letter` rows) -> the sinks' batch writer, which puts the rejects in `dead_letters.path`,
one file per batch, and counts them by reason. The topic is read once. `observe()` on the
routed records gives, per micro-batch, the records read and the newest event time (`_time_ms`),
which a query listener hands to the writer's monitor (the job's own health metrics). Offsets are
read exactly once across restarts (Spark's Kafka connector plans each batch's ranges into the
checkpoint); a restarted job resumes its health state from the state store.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streaming.config import DEFAULT_DEAD_LETTER_TRIGGER_MS, QUORUMS_PER_STATE_PARTITION, JobConfig
from streaming.decode import TIME_MS, route_records
from streaming.fleet_size import RECENT_MS, is_new_local_checkpoint, recent_quorums
from streaming.health import build_health_stream
from streaming.job_logging import BATCH_LOGGER, SLOW_BATCH_TRIGGERS, batch_line, batch_time_line, spark_conf
from streaming.progress_listener import ProgressListener
from streaming.sinks import HealthBatchWriter, make_batch_writer
from streaming.sinks.monitor import MonitorMetrics
from streaming.source import lost_offsets, open_stream
from streaming.state_layout import health_state_layout
from streaming.state_partitions import check_state_partitions

log = logging.getLogger(__name__)

HEALTH_QUERY = "quorum_health"
INPUT_OBSERVATION = "quorum_input"


def session_for(cfg: JobConfig) -> SparkSession:
    """The Spark session the config asks for; under spark-submit, its --master is kept."""
    from streaming.spark_session import build_spark, prepare_environment, submitted_master
    prepare_environment()
    # launched by spark-submit, the JVM already has a master
    master = submitted_master() or cfg.spark.master
    conf = spark_conf({str(k): str(v) for k, v in cfg.spark.conf.items()})
    return build_spark(master=master, app_name=cfg.spark.app_name,
                       shuffle_partitions=new_checkpoint_partitions(cfg, master), extra_conf=conf)


def new_checkpoint_partitions(cfg: JobConfig, master: str) -> int:
    """The state partitions the config gives a new checkpoint on `master`: with `auto` in local
    mode, as many as the quorums in the events topic need (`streaming.fleet_size`). A checkpoint
    that has batches keeps its own number whatever this says (`check_state_partitions`)."""
    wanted = cfg.spark.quorums_to_count(master)
    if not wanted or not is_new_local_checkpoint(str(Path(cfg.job.checkpoint_location) / "health")):
        return cfg.spark.state_partitions(master)
    fleet = recent_quorums(cfg.source, wanted)
    partitions = cfg.spark.state_partitions(master, fleet)
    if fleet is not None:
        log.info("the events topic %s has records of %s quorum(s) in its last %.0f s: %d state partition(s) for the "
                 "new checkpoint (spark.shuffle_partitions auto on %s: one per %d quorums, at most %d)",
                 cfg.source.topic, f"{fleet}+" if fleet == wanted else fleet, RECENT_MS / 1000, partitions, master,
                 QUORUMS_PER_STATE_PARTITION, cfg.spark.state_partitions(master))
    return partitions


def routed_events(spark: SparkSession, cfg: JobConfig) -> DataFrame:
    """The topic's records as the health processor takes them (`route_records`)."""
    raw = open_stream(spark, cfg.source.reader_options())
    return raw.transform(route_records(cfg.decode.max_future_ms))


def observe_input(routed: DataFrame) -> DataFrame:
    """Per-batch input metrics, computed on the records as they pass (no second read). The
    rejects are counted by the batch writer, from the processor's `dead_letter` rows."""
    metrics = [F.count(F.lit(1)).alias("records"), F.max(F.col(TIME_MS)).alias("newest_event_ms")]
    return routed.observe(INPUT_OBSERVATION, *metrics)


def report_observation(monitor: MonitorMetrics, observed: dict) -> None:
    """Hand one batch's observed input metrics to the monitor."""
    row = observed.get(INPUT_OBSERVATION)
    if row is None:
        return
    monitor.record_input(int(row.get("records") or 0), row.get("newest_event_ms"))


def report_lost_offsets(progress: dict) -> None:
    """Say in the log when a batch found records deleted before the job read them."""
    for source in progress.get("sources") or []:
        lost = lost_offsets(source)
        if lost:
            log.warning("events source: %d offsets were deleted from the topic (retention) before the job "
                        "read them, in micro-batch %s; reading on from the earliest offsets left "
                        "(source.fail_on_data_loss: false)", lost, progress.get("batchId"))


def _input_listener(spark: SparkSession, writer: HealthBatchWriter, trigger_ms: int) -> ProgressListener:
    """Hands each health batch's observed input to the writer's monitor, and logs the batch's
    line (a slow one's parts too)."""
    batches = logging.getLogger(BATCH_LOGGER)

    def on_progress(progress: dict) -> None:
        if progress.get("name") != HEALTH_QUERY:
            return
        observed = progress.get("observedMetrics") or {}
        report_observation(writer.monitor, observed)
        report_lost_offsets(progress)
        if batches.isEnabledFor(logging.INFO):
            quorums = [view.quorum for view in writer.snapshot.views()]
            batches.info(batch_line(progress, observed.get(INPUT_OBSERVATION), quorums,
                                    writer.dead_letters_in(progress.get("batchId"))))
        took = (progress.get("durationMs") or {}).get("triggerExecution") or 0
        if took >= SLOW_BATCH_TRIGGERS * trigger_ms and log.isEnabledFor(logging.INFO):
            log.info(batch_time_line(progress))

    return ProgressListener(spark, on_progress)


# How long a stop waits for the running micro-batch to end. A stop that interrupts a batch
# cuts its writer short (the batch runs again after a restart), and Spark then checks the
# writer's long Python traceback against a regular expression that overflows the stack: the
# log gets a StackOverflowError from the stream execution thread. Below Kubernetes' default
# 30 s grace period.
STOP_BATCH_WAIT_S = 20.0


def _between_batches(query, deadline: float, poll_s: float = 0.01) -> bool:
    """Wait until `query` is between micro-batches (or has ended); False at the deadline.
    Between: no trigger running, or a batch has just reported its progress. A query whose
    batches take longer than its trigger runs them back to back, and the next one has then
    only begun (offsets, planning): a stop there does not reach its writer."""
    announced = False
    seen = _last_batch_id(query)
    while query.isActive:
        status = query.status
        if not status.get("isTriggerActive") or _last_batch_id(query) != seen:
            return True
        if not announced:
            log.info("stopping %s: waiting for its running micro-batch to end (%s)", query.name,
                     status.get("message", ""))
            announced = True
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
    return True


def _last_batch_id(query) -> int | None:
    progress = query.lastProgress
    return None if progress is None else progress["batchId"]


@dataclass
class RunningJob:
    spark: SparkSession
    health_query: object
    writer: HealthBatchWriter
    listener: ProgressListener
    queries: list = field(default_factory=list)

    def stop(self, batch_wait_s: float = STOP_BATCH_WAIT_S) -> None:
        """Stop the queries between micro-batches: the running one, if any, ends first (for at
        most `batch_wait_s` in all)."""
        deadline = time.monotonic() + batch_wait_s
        for q in self.queries:
            try:
                if not _between_batches(q, deadline):
                    log.warning("stopping %s in the middle of a micro-batch (it did not end within %.0f s): "
                                "a restart runs that batch again", q.name, batch_wait_s)
                q.stop()
            except Exception as e:  # stopping a failed query raises its failure again
                log.warning("stopping %s: %s", q.name, e)
        self.listener.remove()
        self.writer.close()


def job_batch_writer(cfg: JobConfig) -> HealthBatchWriter:
    """The job's outputs as the config names them: the health topic's undelivered events spooled
    beside the checkpoint, the rejects under `dead_letters.path` when it is on."""
    return make_batch_writer(cfg.sink, cfg.health,
                             spool_path=str(Path(cfg.job.checkpoint_location) / "health-events-pending.jsonl"),
                             dead_letter_dir=cfg.dead_letters.path if cfg.dead_letters.enabled else None)


@dataclass
class PreparedJob:
    """The health query planned and not started: what a standby holds ready (`streaming run
    --standby`), so that taking over costs the query's start and its first batch alone."""
    spark: SparkSession
    cfg: JobConfig
    health: DataFrame


def prepare_job(spark: SparkSession, cfg: JobConfig) -> PreparedJob:
    """Everything before the query starts: the source, the decode and the health stream, built
    on the checkpoint's state partitions and layout. It only reads a checkpoint that has
    started (a new one gets its layout file written here)."""
    from streaming.spark_session import use_local_checkpoint_manager
    use_local_checkpoint_manager(spark, cfg.job.checkpoint_location)
    checkpoint = Path(cfg.job.checkpoint_location)
    if cfg.dead_letters.trigger_interval_ms != DEFAULT_DEAD_LETTER_TRIGGER_MS:
        log.warning("dead_letters.trigger_interval_ms is no longer used: dead letters are written with every "
                    "health batch (job.trigger_interval_ms), from the same read of the topic")
    routed = observe_input(routed_events(spark, cfg))
    # Spark keeps the checkpoint's number of state partitions: say so when the config differs.
    partitions = check_state_partitions(spark, str(checkpoint / "health"),
                                        int(spark.conf.get("spark.sql.shuffle.partitions")))
    layout = health_state_layout(spark, str(checkpoint), str(checkpoint / "health"), partitions)
    health = build_health_stream(routed, cfg.health, max_future_ms=cfg.decode.max_future_ms, buckets=layout.buckets,
                                 api=layout.processor, state_version=layout.state_version)
    return PreparedJob(spark, cfg, health)


def start_prepared(prepared: PreparedJob, writer: HealthBatchWriter | None = None) -> RunningJob:
    """Start a prepared health query with its outputs (`writer`: the config's own,
    `job_batch_writer`, unless a caller brings one that watches it). The writer is made here,
    not in `prepare_job`: it loads the health topic's spool beside the checkpoint, which the job
    a standby replaces may still be writing."""
    spark, cfg = prepared.spark, prepared.cfg
    checkpoint = Path(cfg.job.checkpoint_location)
    writer = writer or job_batch_writer(cfg)
    listener = _input_listener(spark, writer, cfg.job.trigger_interval_ms)
    trigger = f"{cfg.job.trigger_interval_ms} milliseconds"
    health_query = (prepared.health.writeStream.queryName(HEALTH_QUERY).outputMode("update").foreachBatch(writer)
                    .option("checkpointLocation", str(checkpoint / "health"))
                    .trigger(processingTime=trigger).start())
    log.info("started %s from %s topic %s, checkpoint %s, dead letters %s, Prometheus metrics %s, health topic %s",
             HEALTH_QUERY, cfg.source.bootstrap_servers, cfg.source.topic, checkpoint,
             cfg.dead_letters.path if cfg.dead_letters.enabled else "off", cfg.sink.prometheus.describe(),
             cfg.sink.kafka.topic if cfg.sink.kafka.enabled else "off")
    return RunningJob(spark, health_query, writer, listener, [health_query])


def start_job(spark: SparkSession, cfg: JobConfig, writer: HealthBatchWriter | None = None) -> RunningJob:
    """The health query, wired source -> decode -> health state -> outputs, prepared and started."""
    return start_prepared(prepare_job(spark, cfg), writer)
