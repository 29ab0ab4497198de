"""The whole job on Apache Kafka and local[2]: the synthetic quorum's faults are flagged
and cleared, garbage is dead-lettered and counted while flagging goes on, and a job stopped and
restarted from its checkpoint keeps its state and reads no record twice."""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from prometheus_tools import wait_for
from quorum import events
from quorum.synthetic import Fault, SyntheticConfig, publish
from state_operators import PANDAS_PROCESSOR, state_operators
from streaming.config import JobConfig
from streaming.job import HEALTH_QUERY, start_job

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TRIGGER_MS = 500
STALL_MS = 4000


def job_config(broker, topic, tmp_path) -> JobConfig:
    return JobConfig.from_dict({
        "source": {"bootstrap_servers": broker.bootstrap, "topic": topic,
                   "starting_offsets": "earliest"},
        "job": {"checkpoint_location": str(tmp_path / "checkpoint"), "trigger_interval_ms": TRIGGER_MS},
        "dead_letters": {"path": str(tmp_path / "dead")},
        "health": {"stall_after_ms": STALL_MS, "tick_ms": TRIGGER_MS},
        "sink": {"prometheus": {"mode": "off"}},
    })


def rows_read(job) -> int:
    """Records of the health query's completed micro-batches (a batch cut short by a stop is not
    in its progress and is replayed whole by the next run)."""
    return sum(p["numInputRows"] for p in job.health_query.recentProgress)


def batches_reported(job) -> dict[int, int]:
    """Records of each micro-batch that read any, by batch id, as the run's progress reports them."""
    return {p["batchId"]: p["numInputRows"] for p in job.health_query.recentProgress if p["numInputRows"]}


def records_in_range(checkpoint: Path, batch_id: int) -> int:
    """The records between a batch's start and end in the checkpoint's offset log (the topic is
    new, so every partition starts at 0; its offsets are consecutive)."""
    def ends(n: int) -> dict[str, int]:
        if n < 0:
            return {}
        lines = (checkpoint / "offsets" / str(n)).read_text().splitlines()
        (partitions,) = json.loads(lines[2]).values()   # the connector's {topic: {partition: offset}}
        return partitions
    before, after = ends(batch_id - 1), ends(batch_id)
    return sum(end - before.get(p, 0) for p, end in after.items())


def committed_unreported(checkpoint: Path, reported: set[int]) -> dict[int, int]:
    """Records of the batches the checkpoint has committed but no progress reported: Spark writes a
    batch's commit before it reports the batch, so a stop landing between the two loses only the
    report. Such a batch is not replayed; its records are its range in the offset log."""
    committed = sorted(int(f.name) for f in (checkpoint / "commits").iterdir() if f.name.isdigit())
    missing = {n: records_in_range(checkpoint, n) for n in committed if n not in reported}
    return {n: records for n, records in missing.items() if records}


def transitions_to(writer, cluster: str, replica: int, status: str) -> list[dict]:
    return [e for e in writer.seen_events if e["kind"] == "transition" and e["cluster_id"] == cluster
            and e["replica_id"] == replica and e["status"] == status]


def garbage(now_ms: int) -> list[tuple[bytes | None, str]]:
    """Bad records and the reason each must be dead-lettered with."""
    good = events.Fetch("cluster-0", "__cluster_metadata", 0, now_ms, 1, 1, 2, "voter", 5, 1, 5, 5, "valid")
    raw = events.encode(good)
    return [(b"\x00\x01garbage", "invalid_json"), (raw[:-9], "invalid_json"),
            (raw.replace(b'"fetch_offset":5', b'"fetch_offset":"5"'), "wrong_type"),
            (b'{"type":"vote_request","version":1}', "unknown_type"),
            (raw.replace(b'"fetch_offset":5', b'"fetch_offset":-5'), "out_of_range"),
            (raw.replace(str(now_ms).encode(), str(now_ms + 3_600_000).encode()), "future_timestamp"),
            (None, "invalid_json")]  # a tombstone: no value at all


def test_faults_flagged_and_cleared_garbage_dead_lettered_restart_keeps_state_and_reads_once(
        spark, broker, topic_factory, tmp_path, recording_writer):
    # Every micro-batch's progress and offsets are kept so the records read can be summed over a whole run.
    spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "100000")
    spark.conf.set("spark.sql.streaming.minBatchesToRetain", "100000")
    topic = topic_factory(partitions=2)
    cfg = job_config(broker, topic, tmp_path)
    writer = recording_writer(cfg)
    job = start_job(spark, cfg, writer)
    # one query reads the topic, for the health state and the dead letters alike
    assert [q.name for q in spark.streams.active] == [HEALTH_QUERY]
    # The quorum starts once the job runs, so faults arrive as they happen rather than in one backlog.
    wait_for(lambda: job.health_query.lastProgress is not None, 120, "the job's first micro-batch")

    start_ms = int(time.time() * 1000)
    cutoff = Fault("cutoff", start_ms=6000, duration_ms=20_000, cluster=0, replica=2)
    stall = Fault("stall", start_ms=6000, duration_ms=22_000, cluster=1, replica=3)
    synthetic = SyntheticConfig(clusters=3, voters=3, observers=1, seed=11, start_ms=start_ms,
                                faults=(cutoff, stall))
    published = {}
    publisher = threading.Thread(target=lambda: published.update(
        result=publish(synthetic, broker.bootstrap, topic, duration_ms=42_000, speed=1.0)), daemon=True)
    publisher.start()
    bad = garbage(start_ms)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for value, _ in bad:
        producer.produce(topic, value=value, key=b"cluster-0/__cluster_metadata-0/2")
    producer.flush(10)

    try:
        wait_for(lambda: transitions_to(writer, "cluster-0", 2, "unreachable"), 60, "cutoff flagged unreachable")
        wait_for(lambda: transitions_to(writer, "cluster-1", 3, "stalled"), 60, "stall flagged stalled")
        wait_for(lambda: sum(writer.monitor.invalid_records_total.values()) >= len(bad), 30,
                 f"{len(bad)} rejects counted, got {writer.monitor.invalid_records_total}")
    finally:
        job.stop()
    first_run = batches_reported(job)
    checkpoint = tmp_path / "checkpoint" / "health"
    before = {v.quorum["cluster_id"]: v.quorum for v in writer.snapshot.views()}

    # Restart from the checkpoint while the quorum keeps publishing.
    writer2 = recording_writer(cfg)
    job2 = start_job(spark, cfg, writer2)
    try:
        wait_for(lambda: transitions_to(writer2, "cluster-0", 2, "caught_up"), 60, "cutoff cleared")
        wait_for(lambda: transitions_to(writer2, "cluster-1", 3, "caught_up"), 60, "stall cleared")
        publisher.join(60)
        stats, timeline = published["result"]
        total = stats.records + len(bad)
        # A batch the first run committed but did not report (stopped in between) is counted
        # from the checkpoint; a batch it did not commit is replayed, and reported, by this run.
        def read_so_far() -> dict[int, int]:
            reported = {**first_run, **batches_reported(job2)}
            return {**reported, **committed_unreported(checkpoint, set(reported))}
        wait_for(lambda: sum(read_so_far().values()) >= total, 90,
                 lambda: f"all {total} records read, got {read_so_far()}")
        time.sleep(3 * TRIGGER_MS / 1000)  # a few more triggers: anything read twice would show now
        after = {v.quorum["cluster_id"]: v.quorum for v in writer2.snapshot.views()}
    finally:
        job2.stop()

    reads = read_so_far()
    assert not set(first_run) & set(batches_reported(job2)), "a batch both runs read"
    assert sum(reads.values()) == total, f"records read twice or lost: {total} published, {reads}"
    # each batch read exactly the records of its range in the offset log
    assert {n: records_in_range(checkpoint, n) for n in reads} == reads
    assert state_operators(checkpoint) == {PANDAS_PROCESSOR}  # a new checkpoint's health state, both runs
    # a local checkpoint is written without Hadoop's checksum files (spark_session.skip_local_checksums)
    assert not list((tmp_path / "checkpoint").rglob("*.crc"))
    # State survived the restart: the second run clears the flags the first run raised (a lost
    # state would start from `unknown`), and counters continue instead of starting over.
    assert transitions_to(writer2, "cluster-0", 2, "caught_up")[0]["previous_status"] == "unreachable"
    assert transitions_to(writer2, "cluster-1", 3, "caught_up")[0]["previous_status"] == "stalled"
    for cluster, q in before.items():
        assert after[cluster]["elections_total"] >= q["elections_total"]
        assert after[cluster]["seq"] > q["seq"]

    # Flagged with the right replica and status within the threshold plus two triggers (quorum clock).
    transitions = writer.seen_events + writer2.seen_events
    for fault, status, threshold in ((cutoff, "unreachable", cfg.health.unreachable_after_ms),
                                     (stall, "stalled", STALL_MS)):
        cluster = f"cluster-{fault.cluster}"
        flagged = [e for e in transitions if e["kind"] == "transition" and e["cluster_id"] == cluster
                   and e["replica_id"] == fault.replica and e["status"] == status]
        assert flagged, f"{cluster}/{fault.replica} never became {status}"
        delay = flagged[0]["now_ms"] - (start_ms + fault.start_ms)
        assert 0 <= delay <= threshold + 2 * TRIGGER_MS + cfg.health.tick_ms, (cluster, status, delay)
    # The healthy control quorum was never flagged.
    assert not [e for e in transitions if e["kind"] == "transition" and e["cluster_id"] == "cluster-2"
                and e["status"] not in ("caught_up", "healthy", "unknown")]

    # Every bad record is in the dead-letter output once, with its reason.
    def dead_reasons():
        files = list((tmp_path / "dead").glob("batch-*.json"))
        return sorted(json.loads(line)["reason"] for f in files for line in f.read_text().splitlines())
    assert dead_reasons() == sorted(reason for _, reason in bad)
    assert writer.monitor.invalid_records_total == {
        reason: sum(1 for _, r in bad if r == reason) for reason in {r for _, r in bad}}


def test_nothing_is_flagged_on_a_healthy_quorum_over_ten_minutes_of_synthetic_time(
        spark, broker, topic_factory, tmp_path, recording_writer):
    spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "100000")
    topic = topic_factory(partitions=2)
    synthetic = SyntheticConfig(clusters=3, voters=3, observers=1, seed=23, start_ms=int(time.time() * 1000),
                                append_interval_ms=200)
    stats, timeline = publish(synthetic, broker.bootstrap, topic, duration_ms=600_000, speed=0)
    assert not [e for e in timeline if e.kind != "election"], "the healthy run has scripted faults"
    cfg = JobConfig.from_dict({**job_config(broker, topic, tmp_path).to_dict(),
                               "source": {"bootstrap_servers": broker.bootstrap, "topic": topic,
                                          "starting_offsets": "earliest", "max_offsets_per_trigger": 5000},
                               "dead_letters": {"enabled": False}})
    writer = recording_writer(cfg)
    job = start_job(spark, cfg, writer)
    try:
        wait_for(lambda: rows_read(job) >= stats.records, 240, "ten minutes of records read")
    finally:
        job.stop()
    flagged = [e for e in writer.seen_events if e["kind"] == "transition"
               and e["status"] not in ("caught_up", "healthy", "unknown")]
    assert not flagged, flagged[:5]
    statuses = {v.quorum["cluster_id"]: v.quorum["status"] for v in writer.snapshot.views()}
    assert statuses == {f"cluster-{i}": "healthy" for i in range(3)}


def quorum_transitions(writer, cluster: str, status: str) -> list[dict]:
    return [e for e in writer.seen_events if e["kind"] == "transition" and e["cluster_id"] == cluster
            and e["replica_id"] is None and e["status"] == status]


def test_quorum_faults_flagged_and_cleared(spark, broker, topic_factory, tmp_path, recording_writer):
    """The synthetic quorum's quorum-wide faults, one cluster each, through the whole job: a leader
    partitioned away (its replica unreachable, a new leader, its tail truncated on return), the
    high watermark stalled, an election storm, a split brain; each flagged within its threshold
    plus two triggers on the quorum's clock, and every quorum healthy again at the end."""
    spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "100000")
    topic = topic_factory(partitions=2)
    base = job_config(broker, topic, tmp_path).to_dict()
    # a storm window short enough that the storm also clears within the run
    cfg = JobConfig.from_dict({**base, "health": {**base["health"], "storm_window_ms": 15_000}})
    writer = recording_writer(cfg)
    job = start_job(spark, cfg, writer)
    wait_for(lambda: job.health_query.lastProgress is not None, 120, "the job's first micro-batch")
    start_ms = int(time.time() * 1000)
    partition = Fault("leader_partition", 6000, 12_000, cluster=0)
    hw_stall = Fault("hw_stall", 6000, 10_000, cluster=1)
    storm = Fault("election_storm", 6000, 8000, cluster=2)
    split = Fault("split_brain", 6000, 6000, cluster=3, replica=2)
    synthetic = SyntheticConfig(clusters=4, voters=3, observers=1, seed=31, start_ms=start_ms,
                                faults=(partition, hw_stall, storm, split))
    published = {}
    publisher = threading.Thread(target=lambda: published.update(
        result=publish(synthetic, broker.bootstrap, topic, duration_ms=40_000, speed=1.0)), daemon=True)
    publisher.start()
    try:
        wait_for(lambda: quorum_transitions(writer, "cluster-1", "stalled"), 180, "hw stall flagged")
        wait_for(lambda: quorum_transitions(writer, "cluster-3", "split_brain"), 180, "split brain flagged")
        wait_for(lambda: transitions_to(writer, "cluster-0", 1, "unreachable"), 180, "partitioned leader unreachable")
        wait_for(lambda: [e for e in writer.seen_events if e["kind"] == "truncation"
                          and e["cluster_id"] == "cluster-0" and e["replica_id"] == 1], 60,
                 "the old leader's truncation on return")
        publisher.join(90)
        _stats, timeline = published["result"]
        wait_for(lambda: {v.quorum["cluster_id"]: v.quorum["status"] for v in writer.snapshot.views()}
                 == {f"cluster-{i}": "healthy" for i in range(4)}, 60, "every quorum healthy again")
        views = {v.quorum["cluster_id"]: v.quorum for v in writer.snapshot.views()}
    finally:
        job.stop()

    def delay_of(first_event, fault):
        return first_event["now_ms"] - (start_ms + fault.start_ms)
    slack = 2 * TRIGGER_MS + cfg.health.tick_ms
    assert 0 <= delay_of(quorum_transitions(writer, "cluster-1", "stalled")[0], hw_stall) <= (
        cfg.health.hw_stall_after_ms + synthetic.noop_interval_ms + slack)
    # a claim shows in the claimant's next metrics record, at most one metrics interval later
    assert 0 <= delay_of(quorum_transitions(writer, "cluster-3", "split_brain")[0], split) <= (
        synthetic.metrics_interval_ms + slack)
    # the old leader stops fetching when the new one is elected (the timeline says when)
    election = next(e for e in timeline if e.kind == "election" and e.cluster_id == "cluster-0")
    unreachable = transitions_to(writer, "cluster-0", 1, "unreachable")[0]
    assert election.start_ms <= unreachable["now_ms"] <= election.start_ms + cfg.health.unreachable_after_ms + slack
    truncation = next(e for e in timeline if e.kind == "truncation" and e.cluster_id == "cluster-0")
    seen = next(e for e in writer.seen_events if e["kind"] == "truncation" and e["cluster_id"] == "cluster-0")
    assert seen["records_lost"] == truncation.detail["records_lost"]
    storm_elections = [e for e in timeline if e.kind == "election" and e.cluster_id == "cluster-2"]
    assert views["cluster-2"]["elections_total"] >= len(storm_elections) >= cfg.health.storm_leader_changes
    assert quorum_transitions(writer, "cluster-2", "degraded"), "the storm degrades the quorum"
    assert views["cluster-0"]["leader_id"] == election.replica_id
