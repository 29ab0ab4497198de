"""A project node as an observer of a real Apache Kafka controller quorum: Kafka's leader serves it
the `__cluster_metadata` log over Fetch, Kafka's tools see it as an observer, its log is the
controllers' log byte for byte, it follows a new Kafka leader, and its records reach the monitor."""
from __future__ import annotations

import time
from pathlib import Path

from kafka_interop.conftest import PROJECT_NODE_ID, HighWatermarkSampler
from kafka_tools import kafka_tool, metadata_quorum, table
from quorum.raft import kafka_records
from quorum.storage import record_batches
from quorum.storage.durable_log import batches_to_records
from quorum.testing.local_cluster import read_events

SEGMENT = "00000000000000000000.log"
DUMP_LOG_SEGMENTS = "org.apache.kafka.tools.DumpLogSegments"


def controller_segment(cluster, node_id: int) -> Path:
    return cluster.nodes[node_id].data_dir / "data" / "__cluster_metadata-0" / SEGMENT


def node_segment(node) -> Path:
    return node.root / f"node-{PROJECT_NODE_ID}" / "log" / SEGMENT


def directory_id(node) -> str:
    meta = (node.root / f"node-{PROJECT_NODE_ID}" / "meta.properties").read_text()
    return next(line.split("=", 1)[1] for line in meta.splitlines() if line.startswith("directory.id="))


def batches_below(path: Path, end_offset: int) -> list[tuple[int, int, bytes]]:
    """(base offset, last offset, bytes) of every batch of a segment file that ends below `end_offset`."""
    data = path.read_bytes()
    out = []
    for pos, info in record_batches.scan(data):
        if info.last_offset >= end_offset:
            break
        out.append((info.base_offset, info.last_offset, data[pos:pos + info.size]))
    return out


def dumped_batches_below(path: Path, end_offset: int) -> list[str]:
    """Kafka's DumpLogSegments output for a segment (batches and decoded metadata records), up to the
    first batch that reaches `end_offset`."""
    out = kafka_tool(DUMP_LOG_SEGMENTS, "--files", str(path), "--cluster-metadata-decoder")
    assert out.returncode == 0, out.stdout + out.stderr
    lines = []
    for line in out.stdout.splitlines()[1:]:          # the first line names the file
        if line.startswith("baseOffset:") and int(line.split()[3]) >= end_offset:   # "lastOffset: N"
            break
        lines.append(line)
    return lines


def observer_row(bootstrap: str) -> dict[str, str]:
    rows = table(metadata_quorum(bootstrap, "--replication"))
    header = rows[0]
    found = [dict(zip(header, r)) for r in rows[1:] if r[0] == str(PROJECT_NODE_ID)]
    return found[0] if found else {}


def test_kafkas_tool_lists_the_project_node_as_an_observer_caught_up_with_the_leader(kafka_cluster,
                                                                                     project_observer):
    start = time.monotonic()
    first = kafka_cluster.wait_for(lambda: (r := observer_row(kafka_cluster.bootstrap)) and r["Lag"] == "0" and r,
                                   60, "observer row with lag 0 in kafka-metadata-quorum's output")
    print(f"\nKafka's tool lists node {PROJECT_NODE_ID} as a caught-up observer "
          f"{time.monotonic() - start:.1f} s after it answered its control socket: {first}")
    assert first["Status"] == "Observer"
    assert first["DirectoryId"] == directory_id(project_observer)
    # Kafka computes Lag from the leader's log end offset: 0 is the leader's own end offset
    second = kafka_cluster.wait_for(
        lambda: (r := observer_row(kafka_cluster.bootstrap)) and r["Lag"] == "0"
        and int(r["LastCaughtUpTimestamp"]) > int(first["LastCaughtUpTimestamp"]) and r,
        30, "a later caught-up timestamp")
    print(f"LastCaughtUpTimestamp advanced by {int(second['LastCaughtUpTimestamp']) - int(first['LastCaughtUpTimestamp'])} ms")
    status = project_observer.try_status(PROJECT_NODE_ID)
    info = kafka_cluster.describe()
    assert status["state"] == "observer" and status["leader_id"] == info.leader_id and status["epoch"] == info.leader_epoch


def test_its_log_holds_the_controllers_record_batches_byte_for_byte(kafka_cluster, project_observer):
    info = kafka_cluster.describe()
    kafka_cluster.wait_for(lambda: any(
        o.replica_id == PROJECT_NODE_ID and o.log_end_offset >= info.high_watermark
        for o in kafka_cluster.describe().observers), 60, "the observer caught up")
    end = min(info.high_watermark, project_observer.try_status(PROJECT_NODE_ID)["high_watermark"])
    theirs = batches_below(controller_segment(kafka_cluster, info.leader_id), end)
    mine = batches_below(node_segment(project_observer), end)
    print(f"\n{len(mine)} batches below offset {end}, {sum(len(b) for *_, b in mine)} bytes")
    assert [(b, last) for b, last, _ in mine] == [(b, last) for b, last, _ in theirs]
    for (base, last, ours), (_, _, kafkas) in zip(mine, theirs):
        assert ours == kafkas, f"batch {base}-{last} differs from the Kafka leader's"
    # Kafka's control records among them, in the one control batch Kafka writes them in:
    # LeaderChange (2), KRaftVersion (5) and Voters (6)
    control_types = {int.from_bytes(r.key[2:4], "big") for _, _, data in mine if record_batches.batch_info(data).control
                     for r in record_batches.records_of(data)}
    assert {2, 5, 6} <= control_types
    # the node reads Kafka's records as Kafka means them: its LeaderChange messages and NoOpRecords
    # are the ones the node's own leader writes
    records = batches_to_records(b"".join(data for *_, data in mine))
    changes = [r.value for r in records if r.kind == "leader_change"]
    assert changes and all(kafka_records.leader_change(**kafka_records.read_leader_change(v)) == v for v in changes)
    assert any(r.kind == "noop" and r.value == kafka_records.NOOP_RECORD for r in records)
    # and Kafka's own tool reads the node's segment file as it reads the controller's
    assert dumped_batches_below(node_segment(project_observer), end) == \
        dumped_batches_below(controller_segment(kafka_cluster, info.leader_id), end)


def test_it_follows_a_new_kafka_leader(kafka_cluster, project_observer):
    info = kafka_cluster.wait_for(lambda: (i := kafka_cluster.describe()) and any(
        o.replica_id == PROJECT_NODE_ID and o.log_end_offset >= i.high_watermark for o in i.observers) and i,
        60, "the observer following the leader")
    old = info.leader_id
    watermarks = HighWatermarkSampler((PROJECT_NODE_ID,), lambda node_id: (
        (project_observer.procs[node_id].pid, s["high_watermark"])
        if (s := project_observer.try_status(node_id)) else None)).start()
    try:
        kafka_cluster.kill(old)
        killed = time.monotonic()
        new = kafka_cluster.wait_for(lambda: (i := kafka_cluster.describe()).leader_id not in (-1, old) and i, 60,
                                     "a new Kafka leader")
        elected = time.monotonic() - killed
        kafka_cluster.wait_for(lambda: (
            (s := project_observer.try_status(PROJECT_NODE_ID))["leader_id"] == new.leader_id
            and any(o.replica_id == PROJECT_NODE_ID and o.log_end_offset >= s["high_watermark"] > new.high_watermark
                    for o in kafka_cluster.describe().observers)),
            60, f"the observer fetching from leader {new.leader_id}")
        print(f"\nleader {old} killed: Kafka elected {new.leader_id} in {elected:.1f} s; the project observer "
              f"fetched from it and caught up {time.monotonic() - killed:.1f} s after the kill")
    finally:
        watermarks.stop()
        kafka_cluster.restart(old)
        kafka_cluster.wait_for(kafka_cluster.every_replica_fetching, 60, "every Kafka replica fetching again")
    watermarks.assert_never_back()


def test_its_records_reach_the_monitor(kafka_cluster, project_observer):
    leader = kafka_cluster.leader()
    records = read_events(kafka_cluster.bootstrap, "quorum-events", lambda recs: any(
        r.TYPE == "metrics" and r.node_id == PROJECT_NODE_ID and r.leader_id == leader for r in recs), timeout_s=60)
    metrics = [r for r in records if r.TYPE == "metrics" and r.node_id == PROJECT_NODE_ID][-1]
    print(f"\nthe observer's metrics record: {metrics}")
    assert metrics.cluster_id == kafka_cluster.cluster_id and metrics.topic == "__cluster_metadata"
    assert metrics.state == "observer" and metrics.high_watermark > 0
    assert sorted(metrics.voter_set) == kafka_cluster.controller_ids()
