"""The event contract: every record type round-trips, and every kind of bad record is rejected
with a message that names the field."""
import dataclasses
import json

import pytest

from quorum import events
from quorum.events import ContractError
from streaming.event_schema import envelope_spark_schema, spark_schema

FETCH = events.Fetch("c1", "__cluster_metadata", 0, 1_700_000_000_000, 1, 7, 2, "voter", 120, 7, 125, 118, "valid")
# with the leader's KIP-836 view of the replica (the fields a leader adds since they exist)
FETCH_STATE = events.Fetch("c1", "__cluster_metadata", 0, 1_700_000_000_000, 1, 7, 2, "voter", 120, 7, 125, 118,
                           "valid", 120, 1_700_000_000_000, 1_699_999_999_800)
METRICS = events.Metrics("c1", "__cluster_metadata", 0, 1_700_000_000_000, 1, "leader", 1, 7, 125, 118, 117,
                         1_699_999_999_900, 117, 100, (1, 2, 3), 4)
STATE_CHANGE = events.StateChange("c1", "__cluster_metadata", 0, 1_700_000_000_000, 2, "follower", "candidate", 8,
                                  -1, "fetch timeout")
SNAPSHOT = events.QuorumSnapshot("c1", "__cluster_metadata", 0, 1_700_000_000_000, 1, 7, 118,
                                 (events.SnapshotReplica(1, 125, 1_700_000_000_000, 1_700_000_000_000),
                                  events.SnapshotReplica(2, 120, 1_699_999_999_990, 1_699_999_999_500)),
                                 (events.SnapshotReplica(4, -1, -1, -1),), "broker-1:9093")
SNAPSHOT_V2 = events.QuorumSnapshot("c1", "__cluster_metadata", 0, 1_700_000_000_000, 1, 7, 118,
                                    (events.SnapshotReplica(1, 125, 1_700_000_000_000, 1_700_000_000_000,
                                                         "SuG--fJgSXqfHAu0xLN_vg"),), (), "broker-1:9093",
                                    poll_interval_ms=1000, latency_ms=12, answered_by=2)
POLL_ERROR = events.QuorumPollError("c1", "__cluster_metadata", 0, 1_700_000_000_000, "broker-1:9093", 1000, 4,
                                    6, "NOT_LEADER_OR_FOLLOWER", 2, -1, 7)
ALL = [FETCH, FETCH_STATE, METRICS, STATE_CHANGE, SNAPSHOT, SNAPSHOT_V2, POLL_ERROR]


IDS = [f"{r.TYPE}-{i}" for i, r in enumerate(ALL)]


@pytest.mark.parametrize("record", ALL, ids=IDS)
def test_every_record_type_round_trips_through_json(record):
    raw = events.encode(record)
    assert events.decode(raw) == record
    assert json.loads(raw)["type"] == record.TYPE and json.loads(raw)["version"] == events.VERSION


@pytest.mark.parametrize("record", ALL, ids=IDS)
def test_fast_encoder_writes_the_same_bytes_as_encode(record):
    specs = events.field_specs(type(record))
    values = [list(getattr(record, fs.name)) if fs.kind.endswith("list") else getattr(record, fs.name) for fs in specs]
    assert events.make_encoder(type(record))(*values) == events.encode(record)
    fixed = {"cluster_id": record.cluster_id, "topic": record.topic, "partition": record.partition}
    assert events.make_encoder(type(record), **fixed)(*values[3:]) == events.encode(record)


@pytest.mark.parametrize("record", ALL, ids=IDS)
def test_encode_writes_the_json_modules_bytes(record):
    assert events.encode(record) == json.dumps(events.to_dict(record), separators=(",", ":")).encode()


@pytest.mark.parametrize("odd", [{"epoch": True}, {"epoch": 7.5}, {"epoch": None}, {"voter_set": (1, True)},
                                 {"state": "lé\"ader%s"}, {"cluster_id": None}])
def test_encode_writes_what_json_writes_for_values_no_template_formats(odd):
    """A value that %d or str() would write otherwise than json (a bool, a float, None, a
    string to escape) is written as json writes it."""
    record = dataclasses.replace(METRICS, **odd)
    assert events.encode(record) == json.dumps(events.to_dict(record), separators=(",", ":")).encode()


@pytest.mark.parametrize("odd", [{"replica_id": True}, {"log_end_offset": 1.5}, {"directory_id": None},
                                 {"directory_id": "é\\n"}])
def test_encode_writes_what_json_writes_for_replica_values_no_template_formats(odd):
    voter = dataclasses.replace(SNAPSHOT.voters[0], **odd)
    record = dataclasses.replace(SNAPSHOT, voters=(voter,) + SNAPSHOT.voters[1:])
    assert events.encode(record) == json.dumps(events.to_dict(record), separators=(",", ":")).encode()


def test_every_record_of_a_quorum_has_the_quorums_key():
    assert {events.record_key(r) for r in ALL} == {events.quorum_key("c1", "__cluster_metadata", 0)}
    assert events.quorum_key("c1", "__cluster_metadata", 0) == b"c1/__cluster_metadata-0"
    other = events.Fetch("c2", "__cluster_metadata", 0, 1, 1, 1, 2, "voter", 1, 1, 1, 1, "valid")
    assert events.record_key(other) == b"c2/__cluster_metadata-0"


def test_both_clients_put_a_quorums_key_in_the_same_partition(broker, topic_factory):
    """kafka-python's default partitioner (the nodes, the collector) and librdkafka's
    murmur2_random (the synthetic quorum) must agree, or one quorum's records would split."""
    from confluent_kafka import Producer

    from quorum.node.publisher import EventPublisher
    from quorum.synthetic.publish import PRODUCER_DEFAULTS
    topic = topic_factory(partitions=7)
    keys = [events.quorum_key(f"cluster-{i}", "__cluster_metadata", i % 3) for i in range(40)]
    kp = EventPublisher(broker.bootstrap, topic)._make_producer()
    try:
        by_kafka_python = [kp.send(topic, key=k, value=b"x").get(timeout=10).partition for k in keys]
    finally:
        kp.close(timeout=2)
    by_librdkafka: dict[bytes, int] = {}
    cp = Producer({**PRODUCER_DEFAULTS, "bootstrap.servers": broker.bootstrap, "delivery.report.only.error": False})
    for k in keys:
        cp.produce(topic, b"x", k, on_delivery=lambda err, msg: by_librdkafka.__setitem__(msg.key(), msg.partition()))
    assert cp.flush(10) == 0
    assert [by_librdkafka[k] for k in keys] == by_kafka_python
    assert len(set(by_kafka_python)) > 3  # the keys really spread over the partitions


def test_new_snapshot_fields_and_directory_ids_default_when_absent():
    obj = events.to_dict(SNAPSHOT_V2)
    for name in ("poll_interval_ms", "latency_ms", "answered_by"):
        del obj[name]
    del obj["voters"][0]["directory_id"]
    old = events.from_dict(obj)
    assert (old.poll_interval_ms, old.latency_ms, old.answered_by) == (-1, -1, -1)
    assert old.voters[0].directory_id == events.UNKNOWN_DIRECTORY_ID
    assert events.decode(events.encode(old)) == old  # the unknown directory id round-trips


def test_fields_shared_by_snapshots_and_poll_errors_keep_the_optional_spec_in_the_envelope():
    envelope = events.envelope_fields()
    for name in ("poll_interval_ms", "latency_ms", "answered_by"):
        assert envelope[name].kind == "long" and not envelope[name].required and envelope[name].default == -1


def test_optional_field_added_later_defaults_when_absent():
    obj = events.to_dict(METRICS)
    del obj["dropped_events_total"]
    assert events.from_dict(obj).dropped_events_total == 0


def test_a_fetch_from_a_writer_without_the_replica_state_reads_as_unknown():
    obj = events.to_dict(FETCH_STATE)
    for name in ("replica_log_end_offset", "last_fetch_timestamp_ms", "last_caught_up_timestamp_ms"):
        del obj[name]
    old = events.from_dict(obj)
    assert (old.replica_log_end_offset, old.last_fetch_timestamp_ms, old.last_caught_up_timestamp_ms) == (-1, -1, -1)
    assert old == FETCH


def test_fields_added_by_a_newer_writer_are_ignored():
    obj = events.to_dict(FETCH) | {"a_future_field": 1}
    assert events.from_dict(obj) == FETCH


def _mutated(record, **changes):
    obj = events.to_dict(record)
    for k, v in changes.items():
        if v is _DELETE:
            del obj[k]
        else:
            obj[k] = v
    return json.dumps(obj).encode()


_DELETE = object()

BAD = [
    (b"\x00\xff garbage", "record", "invalid_json"),
    (b'{"type": "fetch", "version": 1, "cluster_id": "c1"', "record", "invalid_json"),
    (b"[1, 2]", "record", "not_an_object"),
    (_mutated(FETCH, type=_DELETE), "type", "missing_field"),
    (_mutated(FETCH, type="heartbeat"), "type", "unknown_type"),
    (_mutated(FETCH, version=2), "version", "unsupported_version"),
    (_mutated(FETCH, version="1"), "version", "wrong_type"),
    (_mutated(FETCH, fetch_offset=_DELETE), "fetch_offset", "missing_field"),
    (_mutated(FETCH, fetch_offset="120"), "fetch_offset", "wrong_type"),
    (_mutated(FETCH, fetch_offset=12.5), "fetch_offset", "wrong_type"),
    (_mutated(FETCH, fetch_offset=True), "fetch_offset", "wrong_type"),
    (_mutated(FETCH, fetch_offset=-1), "fetch_offset", "out_of_range"),
    (_mutated(FETCH, time_ms=-5), "time_ms", "out_of_range"),
    (_mutated(FETCH, leader_epoch=2 ** 64), "leader_epoch", "out_of_range"),
    (_mutated(FETCH, replica_role="boss"), "replica_role", "bad_value"),
    (_mutated(FETCH, outcome="maybe"), "outcome", "bad_value"),
    (_mutated(FETCH, cluster_id=""), "cluster_id", "bad_value"),
    (_mutated(FETCH, cluster_id=None), "cluster_id", "wrong_type"),
    (_mutated(FETCH, fetch_offset=126), "fetch_offset", "inconsistent"),
    (_mutated(FETCH, high_watermark=130), "high_watermark", "inconsistent"),
    (_mutated(FETCH_STATE, replica_log_end_offset=126), "replica_log_end_offset", "inconsistent"),
    (_mutated(FETCH_STATE, last_caught_up_timestamp_ms=1_700_000_000_001), "last_caught_up_timestamp_ms",
     "inconsistent"),
    (_mutated(FETCH_STATE, last_fetch_timestamp_ms=-2), "last_fetch_timestamp_ms", "out_of_range"),
    (_mutated(FETCH_STATE, replica_log_end_offset=None), "replica_log_end_offset", "wrong_type"),
    (_mutated(METRICS, state="king"), "state", "bad_value"),
    (_mutated(METRICS, voter_set=[1, "2"]), "voter_set", "bad_value"),
    (_mutated(METRICS, voter_set="1,2,3"), "voter_set", "wrong_type"),
    (_mutated(METRICS, last_applied_offset=118), "last_applied_offset", "inconsistent"),
    (_mutated(STATE_CHANGE, to_state=_DELETE), "to_state", "missing_field"),
    (_mutated(SNAPSHOT, voters=[{"replica_id": 1}]), "log_end_offset", "missing_field"),
    (_mutated(SNAPSHOT_V2, latency_ms=-2), "latency_ms", "out_of_range"),
    (_mutated(SNAPSHOT_V2, voters=[{**events.to_dict(SNAPSHOT_V2)["voters"][0], "directory_id": ""}]),
     "directory_id", "bad_value"),
    (_mutated(SNAPSHOT_V2, voters=[{**events.to_dict(SNAPSHOT_V2)["voters"][0], "directory_id": 5}]),
     "directory_id", "wrong_type"),
    (_mutated(POLL_ERROR, poll_interval_ms=0), "poll_interval_ms", "out_of_range"),
    (_mutated(POLL_ERROR, latency_ms=-1), "latency_ms", "out_of_range"),
    (_mutated(POLL_ERROR, error_code=-2), "error_code", "out_of_range"),
    (_mutated(POLL_ERROR, error=""), "error", "bad_value"),
    (_mutated(POLL_ERROR, error=_DELETE), "error", "missing_field"),
    (_mutated(POLL_ERROR, leader_epoch=-2), "leader_epoch", "out_of_range"),
    (_mutated(POLL_ERROR, source=_DELETE), "source", "missing_field"),
    (_mutated(SNAPSHOT, voters=[5]), "record", "not_an_object"),
    (_mutated(SNAPSHOT, observers=[{"replica_id": 4, "log_end_offset": -2, "last_fetch_timestamp_ms": -1,
                                     "last_caught_up_timestamp_ms": -1}]), "log_end_offset", "out_of_range"),
]


@pytest.mark.parametrize("raw,field,code", BAD, ids=[f"{f}-{c}-{i}" for i, (_, f, c) in enumerate(BAD)])
def test_bad_record_is_rejected_naming_the_field(raw, field, code):
    with pytest.raises(ContractError) as info:
        events.decode(raw)
    assert info.value.field == field
    assert info.value.code == code
    assert field in str(info.value)


def test_timestamp_far_in_the_future_is_rejected_when_the_reader_gives_its_clock():
    now = FETCH.time_ms - events.DEFAULT_MAX_FUTURE_MS - 1
    with pytest.raises(ContractError, match="time_ms: in the future") as info:
        events.decode(events.encode(FETCH), now_ms=now)
    assert info.value.code == "future_timestamp"
    assert events.decode(events.encode(FETCH), now_ms=FETCH.time_ms) == FETCH


def test_spark_schema_is_derived_from_the_dataclasses():
    schema = spark_schema(events.Fetch)
    assert schema.fieldNames() == ["type", "version"] + [fs.name for fs in events.field_specs(events.Fetch)]
    envelope = envelope_spark_schema()
    for cls in events.RECORD_TYPES.values():
        assert set(spark_schema(cls).fieldNames()) <= set(envelope.fieldNames())
    assert envelope["voters"].dataType.elementType == spark_schema(events.SnapshotReplica)


@pytest.mark.spark
def test_spark_parses_encoded_records_into_the_envelope(spark):
    from pyspark.sql import functions as F
    rows = [(events.encode(r).decode(),) for r in ALL]
    df = spark.createDataFrame(rows, "value string").select(
        F.from_json("value", envelope_spark_schema()).alias("e")).select("e.*")
    rows = df.collect()
    got = {r["type"]: r for r in rows}
    assert got["fetch"]["fetch_offset"] == 120 and got["metrics"]["voter_set"] == [1, 2, 3]
    snaps = {r["answered_by"]: r for r in rows if r["type"] == "quorum_snapshot"}
    assert snaps[-1]["voters"][1]["last_caught_up_timestamp_ms"] == 1_699_999_999_500
    assert snaps[2]["voters"][0]["directory_id"] == "SuG--fJgSXqfHAu0xLN_vg" and snaps[2]["latency_ms"] == 12
    assert got["quorum_poll_error"]["error"] == "NOT_LEADER_OR_FOLLOWER" and got["quorum_poll_error"]["error_code"] == 6


def test_the_contract_document_lists_every_field_and_reject_code():
    from pathlib import Path
    doc = (Path(__file__).resolve().parents[2] / "docs" / "events.md").read_text()
    for cls in list(events.RECORD_TYPES.values()) + [events.SnapshotReplica]:
        for fs in events.field_specs(cls):
            assert f"| `{fs.name}` |" in doc, f"docs/events.md misses {fs.name}"
    for code in ContractError.CODES:
        assert f"`{code}`" in doc, f"docs/events.md misses reject code {code}"


def test_tail_prints_one_line_for_every_record_type():
    from quorum.tail import describe
    lines = [describe(r) for r in ALL]
    assert len(lines) == len(ALL) and all("c1/__cluster_metadata-0" in line for line in lines)
    assert "NOT_LEADER_OR_FOLLOWER (code 6)" in describe(POLL_ERROR) and "by n2 in 12 ms" in describe(SNAPSHOT_V2)
