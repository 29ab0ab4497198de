"""Decoding: Spark's fast path accepts nothing the event contract refuses, and the rest is decided by
the contract's own decoder, record for record."""
from __future__ import annotations

import datetime as dt
import json

import pytest
from pyspark.sql import functions as F

from quorum import events
from streaming.decode import FAST_TYPES, NESTED, route_records
from streaming.health import raw_records
from streaming.health.schema import DEAD_LETTER_KEY, unpack_record

pytestmark = pytest.mark.spark

NOW_MS = 1_800_000_000_000
RAW_SCHEMA = "value binary, key binary, topic string, partition int, offset bigint, timestamp timestamp"

FETCH = events.Fetch("c1", "__cluster_metadata", 0, NOW_MS - 10, 1, 3, 2, "voter", 10, 3, 12, 11, "valid")
FETCH_STATE = events.Fetch("c1", "__cluster_metadata", 0, NOW_MS - 10, 1, 3, 2, "voter", 10, 3, 12, 11, "valid",
                           10, NOW_MS - 10, NOW_MS - 500)
METRICS = events.Metrics("c1", "__cluster_metadata", 0, NOW_MS - 5, 2, "follower", 1, 3, 12, 11, 10, NOW_MS - 50,
                         11, 40, (1, 2, 3), 0)
STATE_CHANGE = events.StateChange("c1", "__cluster_metadata", 0, NOW_MS, 3, "candidate", "leader", 4, 3, "won election")
SNAPSHOT = events.QuorumSnapshot("c1", "__cluster_metadata", 0, NOW_MS, 1, 3, 11,
                                 (events.SnapshotReplica(1, 12, NOW_MS, NOW_MS), events.SnapshotReplica(2, 10, NOW_MS, -1)),
                                 (), "localhost:9093")
SNAPSHOT_V2 = events.QuorumSnapshot("c1", "__cluster_metadata", 0, NOW_MS, 1, 3, 11,
                                    (events.SnapshotReplica(1, 12, NOW_MS, NOW_MS, "SuG--fJgSXqfHAu0xLN_vg"),),
                                    (events.SnapshotReplica(4, 12, NOW_MS, NOW_MS, "AAAAAAAAAAAAAAAAAAAABw"),),
                                    "localhost:9093", poll_interval_ms=1000, latency_ms=3, answered_by=2)
POLL_ERROR = events.QuorumPollError("c1", "__cluster_metadata", 0, NOW_MS, "localhost:9093", 1000, 1000, -1,
                                    "timeout", -1, -1, -1)
SAMPLES = [FETCH, FETCH_STATE, METRICS, STATE_CHANGE, SNAPSHOT, SNAPSHOT_V2, POLL_ERROR]


def raw_frame(spark, values: list[bytes | None]):
    rows = [(v, b"k", "events", 0, i, dt.datetime(2026, 1, 1)) for i, v in enumerate(values)]
    return spark.createDataFrame(rows, RAW_SCHEMA)


def routed(spark, values) -> list:
    """`route_records` on the values: one row each, in the values' order."""
    now = F.timestamp_millis(F.lit(NOW_MS))
    rows = raw_frame(spark, values).transform(route_records(now=now)).collect()
    return sorted(rows, key=lambda r: json.loads(r.record_json)["_offset"])


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
            # every other JSON kind, which Spark reads into a string field as its text
            for other in (-7, 1.5, 1e300, 2 ** 70, True, False, {"a": 1}, {}, [1], [], float("nan"), float("-inf")):
                variant(**{fs.name: other})
        if fs.kind == "long_list":
            variant(**{fs.name: [1, -2]})
            variant(**{fs.name: [1, None]})
            variant(**{fs.name: [None, 3]})
            variant(**{fs.name: [None]})
            variant(**{fs.name: [3, -1, None]})
            variant(**{fs.name: [1, "2"]})
            variant(**{fs.name: []})
        if fs.kind == "replica_list":
            variant(**{fs.name: [5]})
            good = dict(base[fs.name][0]) if base[fs.name] else {"replica_id": 1, "log_end_offset": 1,
                                                                  "last_fetch_timestamp_ms": 1,
                                                                  "last_caught_up_timestamp_ms": 1}
            for sub in events.field_specs(events.SnapshotReplica):
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
    fetch, state = events.encode(FETCH), events.encode(FETCH_STATE)
    return [b"", b"garbage", fetch[:-7], b"[1,2]", b'"fetch"', b"42", b"null", b"\xff\xfe{}", None,
            fetch.replace(b'"fetch_offset":10', b'"fetch_offset":13'),        # beyond leader log end
            fetch.replace(b'"high_watermark":11', b'"high_watermark":13'),    # above leader log end
            events.encode(METRICS).replace(b'"last_applied_offset":10', b'"last_applied_offset":12'),
            state.replace(b'"replica_log_end_offset":10', b'"replica_log_end_offset":13'),  # above leader's end
            state.replace(b'"last_caught_up_timestamp_ms":%d' % (NOW_MS - 500),       # after its last fetch
                          b'"last_caught_up_timestamp_ms":%d' % (NOW_MS - 9)),
            json.dumps({k: v for k, v in events.to_dict(FETCH_STATE).items()      # a writer before the state
                        if k not in ("replica_log_end_offset", "last_fetch_timestamp_ms",
                                     "last_caught_up_timestamp_ms")}).encode(),
            b"[" + fetch + b"]", b" " + fetch,
            fetch.replace(b'"cluster_id":"c1"', b'"CLUSTER_ID":"c1"'),        # names are case-sensitive
            fetch.replace(b'"cluster_id":"c1"', b'"\\u0063luster_id":"c1"'),  # an escaped name
            fetch.replace(b'"cluster_id":"c1"', b'"cluster_id":"null-ish"'),  # valid, "null" in the text
            fetch.replace(b'"cluster_id":"c1"', b'"cluster_id":"c1","node_id":"x"'),  # another type's field
            fetch.replace(b'"cluster_id":"c1"', b'"cluster_id":"c\xc3\xa9"'),  # UTF-8 in a string
            fetch.replace(b'"cluster_id":"c1"', b"\"cluster_id\":'c1'"),     # single quotes: no JSON
            fetch.replace(b'"outcome":"valid"', b"'outcome':'valid'"),
            *snapshot_garbage()]


def snapshot_garbage() -> list[bytes]:
    """A snapshot's nested replicas broken, or objects and text where Spark reads no replica."""
    snap = events.encode(SNAPSHOT_V2)
    base = events.to_dict(SNAPSHOT_V2)
    voter = base["voters"][0]
    without_id = {k: v for k, v in voter.items() if k != "directory_id"}

    def with_(**changes):
        return json.dumps({**base, **changes}).encode()
    return [snap + b" x", snap + b"}", snap[:-1] + b',"extra":{}}', snap.replace(b'"localhost:9093"', b'"local}host"'),
            with_(voters=[{**voter, "directory_id": None}]), with_(voters=[without_id]),      # null, absent
            with_(voters=[{**voter, "extra": {"a": 1}}]), with_(voters=voter), with_(voters=[[1]]),
            with_(voters=[voter, None]), with_(voters=[]), with_(observers=[without_id, without_id]),
            with_(refused_nodes=None), with_(source="{}"),
            json.dumps({k: v for k, v in base.items() if k not in ("poll_interval_ms", "latency_ms", "answered_by",
                                                                   "refused_nodes")}).encode()]


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


def corpus() -> list[bytes | None]:
    out = [events.encode(r) for r in SAMPLES] + record_level_garbage()
    for r in SAMPLES:
        out += mutations(r)
    return out


def spaced(record) -> bytes:
    """The record as `json.dumps` writes it by default (spaces after `:` and `,`)."""
    return json.dumps(events.to_dict(record)).encode()


def test_the_fast_path_accepts_nothing_the_contract_refuses(spark):
    values = corpus()
    rows = routed(spark, values)
    wrongly = [(raw, contract_answer(raw)) for raw, row in zip(values, rows)
               if row._accepted and contract_answer(raw) is not None]
    assert not wrongly, "\n".join(f"{raw!r}: the contract says {answer}" for raw, answer in wrongly[:20])
    assert len(values) > 300  # the corpus really covers every field of every type
    # and it does take the hot records: every valid fetch, metrics and snapshot record in it but
    # one with a `}` outside the objects Spark reads (a nested object it skips, one in a string,
    # text after the record) and a field of another fast type with that type's kind wrong (the
    # typed parse fails)
    hot = [raw for raw in values if contract_answer(raw) is None and json.loads(raw)["type"] in FAST_TYPES]
    taken = {raw for raw, row in zip(values, rows) if row._accepted}
    assert len(hot) > 30 and {json.loads(raw)["type"] for raw in taken} == set(FAST_TYPES)
    assert [raw for raw in hot if raw not in taken] == [
        raw for raw in hot if not only_read_objects_close(raw) or b'"node_id":"x"' in raw]


def only_read_objects_close(raw: bytes) -> bool:
    """The text ends in `}` and each `}` closes the record or one of its replicas."""
    record = json.loads(raw)
    objects = 1 + sum(len(record[name]) for name in NESTED.get(record["type"], ()))
    return raw.endswith(b"}") and raw.count(b"}") == objects


def test_the_fast_path_takes_both_the_compact_and_the_spaced_form(spark):
    values = [events.encode(r) for r in (FETCH, METRICS, SNAPSHOT, SNAPSHOT_V2)] + [
        spaced(r) for r in (FETCH, METRICS, SNAPSHOT, SNAPSHOT_V2)]
    assert [row._accepted for row in routed(spark, values)] == [True] * 8


def test_an_accepted_record_reaches_the_tracker_as_the_contracts_decoder_reads_it(spark):
    without_default = events.to_dict(METRICS)
    del without_default["dropped_events_total"]
    snapshot = events.to_dict(SNAPSHOT_V2)
    snapshot_without_defaults = {k: v for k, v in snapshot.items()
                                 if k not in ("poll_interval_ms", "latency_ms", "answered_by", "refused_nodes")}
    snapshot_without_defaults["voters"] = [{k: v for k, v in r.items() if k != "directory_id"}
                                           for r in snapshot["voters"]]
    refused = {**snapshot, "refused_nodes": [2, 3], "observers": []}
    values = [events.encode(FETCH), events.encode(METRICS), spaced(METRICS), json.dumps(without_default).encode(),
              events.encode(FETCH).replace(b'"cluster_id":"c1"', b'"cluster_id":"c\xc3\xa9"'),
              events.encode(SNAPSHOT), spaced(SNAPSHOT_V2), json.dumps(snapshot_without_defaults).encode(),
              json.dumps(refused).encode()]
    for offset, (raw, row) in enumerate(zip(values, routed(spark, values))):
        assert row._accepted, raw
        decoded = events.decode(raw)
        assert unpack_record(row.record_json) == raw_records.as_input(decoded, 0, offset), raw
        assert (row.cluster_id, row.topic, row.partition) == (decoded.cluster_id, decoded.topic, decoded.partition)
        assert row._time_ms == decoded.time_ms


def test_carried_fields_are_an_accepted_records_own_and_null_for_the_rest(spark):
    values = [events.encode(FETCH), events.encode(METRICS), events.encode(STATE_CHANGE), b"{not json"]
    carry = ("type", "replica_id", "leader_epoch")
    now = F.timestamp_millis(F.lit(NOW_MS))
    rows = raw_frame(spark, values).transform(route_records(now=now, carry=carry)).collect()
    by_offset = {json.loads(r.record_json)["_offset"]: r for r in rows}
    assert [tuple(by_offset[i][name] for name in carry) for i in range(len(values))] == [
        ("fetch", FETCH.replica_id, FETCH.leader_epoch), ("metrics", None, None), (None, None, None),
        (None, None, None)]


def test_the_rest_is_routed_to_its_quorum_and_decided_by_the_contract(spark):
    values = corpus()
    for offset, (raw, row) in enumerate(zip(values, routed(spark, values))):
        if row._accepted:
            continue
        quorum, record, reject = raw_records.decide(row.record_json, NOW_MS, events.DEFAULT_MAX_FUTURE_MS)
        assert quorum == (row.cluster_id, row.topic, row.partition), raw
        expected = contract_answer(raw)
        if expected is None:  # valid: under its own quorum's key, as the tracker reads it
            assert record == raw_records.as_input(events.decode(raw), 0, offset), raw
        else:
            assert record is None and reject[0] == expected[0], raw
            line = json.loads(reject[1])
            assert (line["reason"], line["field"], line["offset"]) == (*expected, offset), raw


def test_a_string_that_reads_like_another_kind_is_decided_by_the_contract(spark):
    # Spark reads a number, a boolean or an object into a string field as its text: such strings
    # are left to the contract's decoder, under the quorum they name, and accepted there.
    lookalikes = ["7", "-1.5e3", "true", "false", "{x", "[1]", '"q"', "NaN", "-Infinity", "INF"]
    values = [json.dumps({**events.to_dict(r), "cluster_id": c}).encode() for r in (FETCH, METRICS) for c in lookalikes]
    rows = routed(spark, values)
    assert not [row for row in rows if row._accepted]
    for offset, (raw, row) in enumerate(zip(values, rows)):
        quorum, record, reject = raw_records.decide(row.record_json, NOW_MS, events.DEFAULT_MAX_FUTURE_MS)
        assert quorum == (row.cluster_id, row.topic, row.partition), raw
        assert reject is None and record == raw_records.as_input(events.decode(raw), 0, offset), raw
    # and the strings that merely begin like one are taken on the fast path
    names = ["7up", "4L6g3nShT-eMCtK--X86sw", "true-north", "e5", "-prod"]
    values = [json.dumps({**events.to_dict(FETCH), "cluster_id": c}).encode() for c in names]
    assert [row._accepted for row in routed(spark, values)] == [True] * len(names)


def test_a_record_spark_cannot_read_a_key_from_goes_to_the_reserved_key(spark):
    utf16 = json.dumps(events.to_dict(FETCH)).encode("utf-16")  # Python's JSON reader takes it
    rows = routed(spark, [b"garbage", None, b'{"type":"fetch","cluster_id":""}', utf16])
    assert [(r.cluster_id, r.topic, r.partition) for r in rows] == [DEAD_LETTER_KEY] * 4
    # each rides raw under that key, a tombstone (no value) too, and is decided by the contract
    answers = [raw_records.decide(r.record_json, NOW_MS, 1000) for r in rows]
    assert all(raw_records.is_raw(r.record_json) for r in rows)
    assert [quorum for quorum, _, _ in answers] == [DEAD_LETTER_KEY] * 4
    assert answers[1][2][0] == contract_answer(None)[0]
    # valid to the contract, but not under its own key: a reject, never folded in elsewhere
    _, record, (reason, line) = answers[3]
    assert record is None and reason == "inconsistent" and json.loads(line)["field"] == "record"


def test_what_spark_reads_differently_is_decided_by_the_contract(spark):
    # Spark's parser stops after the first value and keeps the last of duplicate names: the
    # fast path leaves such texts to the contract's decoder, which refuses the first two.
    fetch = events.encode(FETCH)
    values = [fetch + b" x", fetch + b"," + fetch, fetch.replace(b'"cluster_id":"c1"', b'"cluster_id":"c1","cluster_id":5')]
    rows = routed(spark, values)
    assert [r._accepted for r in rows] == [False, False, False]
    answers = [raw_records.decide(r.record_json, NOW_MS, 1000) for r in rows]
    assert [a[2][0] if a[2] else None for a in answers] == ["invalid_json", "invalid_json", "wrong_type"]


def test_a_dead_letter_line_is_what_sparks_json_writer_writes_for_it(spark, tmp_path):
    # The lines keep the format of the job's earlier Spark-written dead letters: the same
    # fields, raw bytes and key in base64, times in ISO 8601 (UTC), null fields left out.
    values = [events.encode(FETCH)[:-7], b'{"type":"vote","version":1}', None]
    rows = routed(spark, values)
    lines = [raw_records.decide(r.record_json, NOW_MS, 1000)[2][1] for r in rows]
    expected_rows = []
    for offset, (raw, line) in enumerate(zip(values, lines)):
        code, field = contract_answer(raw)
        at = json.loads(line)["dead_lettered_at"]
        expected_rows.append((code, field, "vote" if offset == 1 else "record", raw, b"k", "events", 0, offset,
                              dt.datetime(2026, 1, 1), dt.datetime.fromisoformat(at.replace("Z", "+00:00"))))
    frame = spark.createDataFrame(expected_rows, "reason string, field string, record_type string, value binary, "
                                  "key binary, topic string, partition int, offset bigint, timestamp timestamp, "
                                  "dead_lettered_at timestamp")
    frame.write.json(str(tmp_path / "sink"))
    written = [line for f in sorted((tmp_path / "sink").glob("part-*.json")) for line in f.read_text().splitlines()]
    assert sorted(map(json.loads, lines), key=str) == sorted(map(json.loads, written), key=str)


def test_the_event_time_for_the_input_delay_comes_from_raw_records_too(spark):
    # a job fed by collectors whose polls fail (their records ride raw) still reports how far
    # behind it reads; a stamp from the future or a record without a quorum key gives none
    ahead = events.to_dict(POLL_ERROR)
    ahead["time_ms"] = NOW_MS + events.DEFAULT_MAX_FUTURE_MS + 1
    rows = routed(spark, [events.encode(POLL_ERROR), events.encode(FETCH), json.dumps(ahead).encode(), b"garbage"])
    assert [(r._accepted, r._time_ms) for r in rows] == [(False, POLL_ERROR.time_ms), (True, FETCH.time_ms),
                                                        (False, None), (False, None)]


def test_no_decoding_method_is_left_for_the_jvm_to_interpret(spark):
    """HotSpot never compiles a method over 8,000 bytes of bytecode. Spark compiles each
    whole-stage-codegen stage into one method; the job's session has Spark run any stage whose
    method is larger without whole-stage codegen (on small methods)."""
    from streaming.spark_session import HOTSPOT_HUGE_METHOD_LIMIT, HUGE_METHOD_LIMIT
    plan = raw_frame(spark, [events.encode(FETCH)]).transform(route_records())._jdf.queryExecution().executedPlan()
    debug = getattr(getattr(spark._jvm.org.apache.spark.sql.execution.debug, "package$"), "MODULE$")
    stages = debug.codegenStringSeq(plan).iterator()
    sizes = []
    while stages.hasNext():
        sizes.append(stages.next()._3().maxMethodCodeSize())
    limit = int(spark.conf.get(HUGE_METHOD_LIMIT))
    print(f"whole-stage-codegen method sizes: {sizes}; Spark's limit {limit}")
    assert sizes and limit <= HOTSPOT_HUGE_METHOD_LIMIT

