"""Decoding in Spark agrees with the event contract, record for record."""
from __future__ import annotations

import datetime as dt
import json

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F
from pyspark.sql import types as T

from quorum import events
from streaming.decode import (DEAD_LETTER_COLUMNS, check_records, count_by_reason, dead_letter_json, dead_letters,
                             event_columns, valid_events)

pytestmark = pytest.mark.spark

NOW_MS = 1_800_000_000_000
RAW_SCHEMA = "value binary, key binary, topic string, partition int, offset bigint, timestamp timestamp"

FETCH = events.Fetch("c1", "__cluster_metadata", 0, NOW_MS - 10, 1, 3, 2, "voter", 10, 3, 12, 11, "valid")
METRICS = events.Metrics("c1", "__cluster_metadata", 0, NOW_MS - 5, 2, "follower", 1, 3, 12, 11, 10, NOW_MS - 50,
                         11, 40, (1, 2, 3), 0)
STATE_CHANGE = events.StateChange("c1", "__cluster_metadata", 0, NOW_MS, 3, "candidate", "leader", 4, 3, "won election")
SNAPSHOT = events.QuorumSnapshot("c1", "__cluster_metadata", 0, NOW_MS, 1, 3, 11,
                                 (events.ReplicaState(1, 12, NOW_MS, NOW_MS), events.ReplicaState(2, 10, NOW_MS, -1)),
                                 (), "localhost:9093")
SNAPSHOT_V2 = events.QuorumSnapshot("c1", "__cluster_metadata", 0, NOW_MS, 1, 3, 11,
                                    (events.ReplicaState(1, 12, NOW_MS, NOW_MS, "SuG--fJgSXqfHAu0xLN_vg"),),
                                    (events.ReplicaState(4, 12, NOW_MS, NOW_MS, "AAAAAAAAAAAAAAAAAAAABw"),),
                                    "localhost:9093", poll_interval_ms=1000, latency_ms=3, answered_by=2)
POLL_ERROR = events.QuorumPollError("c1", "__cluster_metadata", 0, NOW_MS, "localhost:9093", 1000, 1000, -1,
                                    "timeout", -1, -1, -1)
SAMPLES = [FETCH, METRICS, STATE_CHANGE, SNAPSHOT, SNAPSHOT_V2, POLL_ERROR]


def raw_frame(spark, values: list[bytes | None]):
    rows = [(v, b"k", "events", 0, i, dt.datetime(2026, 1, 1)) for i, v in enumerate(values)]
    return spark.createDataFrame(rows, RAW_SCHEMA)


def checked(spark, values):
    now = F.timestamp_millis(F.lit(NOW_MS))
    return raw_frame(spark, values).transform(check_records(now=now))


def mutations(record) -> list[bytes]:
    """Bad variants of a valid record: one broken field each, plus record-level breakage."""
    base = events.to_dict(record)
    out = []

    def variant(**changes):
        d = dict(base)
        for k, v in changes.items():
            if v is KeyError:
                d.pop(k, None)
            else:
                d[k] = v
        out.append(json.dumps(d).encode())

    for fs in events.field_specs(type(record)):
        variant(**{fs.name: KeyError})
        variant(**{fs.name: None})
        variant(**{fs.name: "7" if fs.kind != "string" else 7})
        if fs.kind == "long":
            variant(**{fs.name: -5})
            if fs.minimum is not None:  # the bounds themselves, which differ between record types
                variant(**{fs.name: fs.minimum})
                variant(**{fs.name: fs.minimum - 1})
            variant(**{fs.name: 2 ** 64})
            variant(**{fs.name: 1.5})
            variant(**{fs.name: True})
        if fs.kind == "string":
            variant(**{fs.name: ""})
            variant(**{fs.name: "no-such-choice"})
        if fs.kind == "long_list":
            variant(**{fs.name: [1, -2]})
            variant(**{fs.name: [1, "2"]})
            variant(**{fs.name: []})
        if fs.kind == "replica_list":
            variant(**{fs.name: [5]})
            good = dict(base[fs.name][0]) if base[fs.name] else {"replica_id": 1, "log_end_offset": 1,
                                                                  "last_fetch_timestamp_ms": 1,
                                                                  "last_caught_up_timestamp_ms": 1}
            for sub in events.field_specs(events.ReplicaState):
                missing = {k: v for k, v in good.items() if k != sub.name}
                variant(**{fs.name: [good, missing]})
                variant(**{fs.name: [good, {**good, sub.name: -9}]})
                variant(**{fs.name: [{**good, sub.name: "x"}]})
    variant(type=KeyError)
    variant(type=None)
    variant(type=5)
    variant(type="fetchh")
    variant(version=KeyError)
    variant(version=None)
    variant(version="1")
    variant(version=2)
    variant(version=2 ** 70)
    variant(time_ms=NOW_MS + events.DEFAULT_MAX_FUTURE_MS + 1)
    variant(time_ms=NOW_MS + events.DEFAULT_MAX_FUTURE_MS)
    variant(unknown_extra_field={"a": 1})
    return out


def record_level_garbage() -> list[bytes | None]:
    fetch = events.encode(FETCH)
    return [b"", b"garbage", fetch[:-7], b"[1,2]", b'"fetch"', b"42", b"null", b"\xff\xfe{}", None,
            fetch.replace(b'"fetch_offset":10', b'"fetch_offset":13'),        # beyond leader log end
            fetch.replace(b'"high_watermark":11', b'"high_watermark":13'),    # above leader log end
            events.encode(METRICS).replace(b'"last_applied_offset":10', b'"last_applied_offset":12'),
            b"[" + fetch + b"]", b" " + fetch,
            fetch.replace(b'"cluster_id":"c1"', b'"CLUSTER_ID":"c1"'),        # names are case-sensitive
            fetch.replace(b'"cluster_id":"c1"', b'"\\u0063luster_id":"c1"'),  # an escaped name
            fetch.replace(b'"cluster_id":"c1"', b'"cluster_id":"null-ish"'),  # valid, "null" in the text
            fetch.replace(b'"cluster_id":"c1"', b'"cluster_id":"c1","node_id":"x"'),  # another type's field
            fetch.replace(b'"cluster_id":"c1"', b'"cluster_id":"c\xc3\xa9"')]  # UTF-8 in a string


def contract_answer(raw: bytes | None) -> tuple[str, str] | None:
    """(code, field) of the Python decoder's first error, fields of nested replicas as `voters[].x`."""
    try:
        events.decode(raw if raw is not None else b"", now_ms=NOW_MS)
        return None
    except events.ContractError as e:
        if "." in e.record_type:
            prefix = e.record_type.split(".", 1)[1]
            return e.code, prefix if e.field == "record" else f"{prefix}.{e.field}"
        return e.code, e.field


def test_spark_validation_gives_the_contracts_first_error_for_every_mutation(spark):
    corpus = [events.encode(r) for r in SAMPLES] + record_level_garbage()
    for r in SAMPLES:
        corpus += mutations(r)
    rows = checked(spark, corpus).select("offset", "_error").collect()
    got = {r["offset"]: (r["_error"]["code"], r["_error"]["field"]) if r["_error"] else None for r in rows}
    disagreements = []
    for i, raw in enumerate(corpus):
        expected = contract_answer(raw)
        if got[i] != expected:
            disagreements.append((raw, expected, got[i]))
    assert not disagreements, "\n".join(f"{raw!r}: contract {exp}, spark {act}" for raw, exp, act in disagreements[:20])
    assert len(corpus) > 300  # the corpus really covers every field of every type


def test_the_documented_differences_from_the_python_decoder_are_as_documented(spark):
    # streaming/decode.py lists them; this keeps the list honest
    fetch = events.encode(FETCH)
    cases = {fetch.replace(b'"cluster_id":"c1"', b'"cluster_id":"c1","cluster_id":"c2"'): ("invalid_json", "record"),
             fetch + b" x": None, fetch + b"," + fetch: None}
    rows = checked(spark, list(cases)).select("offset", "_error", "_record.cluster_id").collect()
    for row in rows:
        raw = list(cases)[row.offset]
        assert contract_answer(raw) != cases[raw], raw   # Python decides otherwise
        assert ((row._error.code, row._error.field) if row._error else None) == cases[raw], raw
        assert row._error or row.cluster_id == "c1"       # the first value, read as it stands


def test_valid_records_become_envelope_rows_with_foreign_fields_null(spark):
    df = checked(spark, [events.encode(FETCH), events.encode(SNAPSHOT), b"garbage"]).transform(valid_events)
    schema = events.envelope_spark_schema()
    empty = {f.name: None for f in schema.fields}
    fetch_row = {**empty, **events.to_dict(FETCH)}
    snap = events.to_dict(SNAPSHOT)
    snap_row = {**empty, **snap, "voters": [tuple(v.values()) for v in snap["voters"]], "observers": []}
    expected = spark.createDataFrame([tuple(fetch_row[f.name] for f in schema.fields) + (0, 0),
                                      tuple(snap_row[f.name] for f in schema.fields) + (0, 1)],
                                     schema.add("_kafka_partition", T.IntegerType()).add("_offset", T.LongType()))
    assert_df_equality(df, expected, ignore_row_order=True, ignore_nullable=True)


def test_metrics_without_the_optional_dropped_events_field_take_its_default(spark):
    raw = events.to_dict(METRICS)
    del raw["dropped_events_total"]
    df = checked(spark, [json.dumps(raw).encode()]).transform(valid_events)
    assert df.select("dropped_events_total", "voter_set").collect() == [(0, [1, 2, 3])]


def test_snapshots_without_the_poll_fields_take_their_defaults_and_poll_errors_keep_theirs(spark):
    raw = events.to_dict(SNAPSHOT_V2)
    for name in ("poll_interval_ms", "latency_ms", "answered_by"):
        del raw[name]
    df = checked(spark, [json.dumps(raw).encode(), events.encode(POLL_ERROR)]).transform(valid_events)
    got = {r["type"]: r for r in df.select("type", "poll_interval_ms", "latency_ms", "answered_by", "error_code",
                                           "error", "source").collect()}
    assert tuple(got["quorum_snapshot"])[1:4] == (-1, -1, -1) and got["quorum_snapshot"]["error"] is None
    assert tuple(got["quorum_poll_error"])[1:] == (1000, 1000, -1, -1, "timeout", "localhost:9093")


def test_dead_letters_keep_reason_field_raw_bytes_and_kafka_position(spark):
    truncated = events.encode(FETCH)[:-7]
    df = checked(spark, [events.encode(FETCH), truncated, b'{"type":"vote","version":1}']).transform(dead_letters)
    assert tuple(df.columns) == DEAD_LETTER_COLUMNS
    got = df.select("reason", "field", "record_type", "value", "partition", "offset")
    expected = spark.createDataFrame(
        [("invalid_json", "record", "record", truncated, 0, 1),
         ("unknown_type", "type", "vote", b'{"type":"vote","version":1}', 0, 2)],
        "reason string, field string, record_type string, value binary, partition int, offset bigint")
    assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True)


def test_a_dead_letter_line_is_what_sparks_json_writer_writes_for_it(spark, tmp_path):
    # The job writes its rejects itself (from the one read of the topic): each line must be the
    # line the JSON file sink wrote for the same `dead_letters` row.
    values = [events.encode(FETCH), events.encode(FETCH)[:-7], b'{"type":"vote","version":1}', None]
    frame = checked(spark, values)
    lines = [r.line for r in frame.where(F.col("_error").isNotNull()).select(dead_letter_json().alias("line")).collect()]
    frame.transform(dead_letters).write.json(str(tmp_path / "sink"))
    written = [line for f in sorted((tmp_path / "sink").glob("part-*.json")) for line in f.read_text().splitlines()]
    assert len(lines) == 3 and sorted(lines) == sorted(written)


def test_event_columns_of_a_valid_record_are_those_of_valid_events(spark):
    frame = checked(spark, [events.encode(r) for r in SAMPLES])
    assert_df_equality(frame.where(F.col("_error").isNull()).select(*event_columns()), frame.transform(valid_events),
                       ignore_row_order=True)


def test_rejects_are_counted_by_reason(spark):
    values = [b"x", b"y", b"[1]", events.encode(FETCH), events.encode(FETCH).replace(b'"replica_id":2', b'"replica_id":-2')]
    counts = checked(spark, values).transform(dead_letters).transform(count_by_reason)
    expected = spark.createDataFrame([("invalid_json", 2), ("not_an_object", 1), ("out_of_range", 1)],
                                     "reason string, records bigint")
    assert_df_equality(counts, expected, ignore_row_order=True, ignore_nullable=True)
