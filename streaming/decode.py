"""Decode the events topic's records in Spark on a fast path; the rest go to the contract's own decoder.

One `DataFrame -> DataFrame` transform, used by the job:

    routed = raw.transform(route_records(max_future_ms))
    # -> cluster_id, topic, partition (the quorum key), record_json, plus _accepted, _time_ms

Spark parses each record once, typed (`from_json`), and accepts it when the contract's simple
rules hold for it: the hot record types (`fetch`, `metrics`, `quorum_snapshot`), every field present with its JSON
type, ranges, choices, the cross-field rules, not too far in the future. An accepted record is
packed for the health processor as before (`schema.RECORD_JSON`). Every other record (a rarer
type, anything odd) goes to the health processor as it was read, under the quorum key Spark
could read from it (`DEAD_LETTER_KEY` when none), and there `quorum.events.decode` itself
decides: a valid one is folded in with the others in Kafka order, a reject becomes a dead letter
with the decoder's own reason and field (`streaming.health.raw_records`).

Why this split, by measurement: the exact diagnosis in SQL (a CASE per field, the record's JSON
kinds read from a Variant) made Spark's plan large, and Spark plans and generates the code of
every micro-batch anew: planning took 256 ms of a 1.8 s batch at 3,800 events/s. The fast path
must never accept what the contract refuses and must hand the processor the same values;
`tests/streaming/job/test_decode.py` checks both on a corpus of about 400 broken records.

How the fast path stays exact without reading each value's JSON kind:
  - a long field is read strictly by Spark (a string, a fraction, a boolean or an integer beyond
    64 bits fails the parse and sets `_corrupt`), so only the range is left to check;
  - a choice field can hold no other JSON kind that reads as one of its choices;
  - a free-text field (`cluster_id`, `topic`) is read as a string. Spark reads any JSON value
    into a string (a number as its digits, an object as its text), so a value that another
    kind of JSON value reads as (digits, `true`, `false`, a text beginning `{`, `[` or `"`,
    `NaN` or `Infinity` in it) is left to the contract's decoder, routed by that string. Not a
    Variant whose kind is read: that took a third of the input stage's CPU per record
    (`benchmarks/decode_cost.py`);
  - a `fetch` or `metrics` record has no nested object, so its text must hold exactly one `}`,
    its last character: no text after the object (Spark would read the first value and stop),
    and no nested object anywhere. Checked on the bytes: no `}` before the last byte (in valid
    UTF-8 the byte 0x7D is only ever `}`, and a text Spark read an object from holds one, so it
    is then the last byte). `instr(text, '}') = length(text)` walked the text character by
    character twice: 3.2 us a record against 0.14 us (3M records of 300 bytes, one core);
  - a `quorum_snapshot` nests one object per replica, so its text must end in `}` and hold
    exactly as many as the objects Spark read from it (the record and each replica): every `}`
    then closes one of them, so none is left for text after the record, a nested object Spark
    skipped (an unknown field) or a string holding one. Counted on the text, once a record:
    snapshots are one record a quorum per poll, a quarter of a collector's;
  - an optional field (`dropped_events_total`, the KIP-836 state of a `fetch`, a snapshot's poll
    details and a replica's directory id) may be null only when the text holds no `null` at all:
    absent takes the default, a JSON null is a reject.
"""
from __future__ import annotations

from typing import Callable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from quorum import events
from quorum.events import FieldSpec

RECORD = "_record"
ACCEPTED = "_accepted"
TIME_MS = "_time_ms"
CHECKED_AT = "_checked_at_ms"
CORRUPT = "_corrupt"
TEXT = "_text"
# A collector's records are a `quorum_snapshot` and a `metrics` per node every poll: decoding the
# snapshots in Python by the contract took 16 % of the health workers at 2,000 quorums.
FAST_TYPES = ("fetch", "metrics", "quorum_snapshot")
NESTED = {"quorum_snapshot": ("voters", "observers")}  # a fast type's fields of objects (replica_list)
# What Spark writes into a string field for a JSON value of another kind: an integer or a fraction
# (digits, sign, point, exponent), a boolean, a non-number (`NaN`, `INF`, `Infinity`, which Spark's
# reader takes and its writer may quote). Objects and arrays begin with `{` or `[`: `_maybe_not_text`.
_NUMBER_TEXT = "^[-+]?[0-9][0-9.eE+-]*$"
_BOOLEAN_TEXT = "^(true|false)$"
_NON_NUMBERS = ("NaN", "INF", "Infinity")

# The processing clock, read per row. Not `current_timestamp()`: Spark folds that into a literal
# per micro-batch, so the generated code differs every batch and is compiled again each time
# (measured: +1.3 s per batch on this machine).
_WALL_CLOCK_MS = "cast(reflect('java.lang.System', 'currentTimeMillis') AS bigint)"

# Cross-field rules of the fast types' `check()` methods (keep in step with quorum/events.py;
# the fast-path test fails when they drift).
_CROSS_FIELD_RULES: dict[str, list[str]] = {
    "fetch": ["NOT ({outcome} = 'valid' AND {fetch_offset} > {leader_log_end_offset})",
              "{high_watermark} <= {leader_log_end_offset}",
              "{replica_log_end_offset} <= {leader_log_end_offset}",
              "{last_caught_up_timestamp_ms} <= {last_fetch_timestamp_ms}"],
    "metrics": ["NOT ({last_committed_offset} >= 0 AND {last_applied_offset} > {last_committed_offset})"],
}


def _quote(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _fast_fields() -> dict[str, FieldSpec]:
    """The fields of the fast types, by name (a name has one kind across types)."""
    out: dict[str, FieldSpec] = {}
    for rtype in FAST_TYPES:
        for fs in events.field_specs(events.RECORD_TYPES[rtype]):
            seen = out.setdefault(fs.name, fs)
            # one default for the packed value (`_event_columns`), whichever type the record is
            assert (seen.required, seen.default) == (fs.required, fs.default), f"{fs.name} differs between types"
    return out


def _sql_type(fs: FieldSpec) -> str:
    if fs.kind == "replica_list":
        fields = ", ".join(f"{r.name}: {_sql_type(r)}" for r in events.field_specs(events.SnapshotReplica))
        return f"array<struct<{fields}>>"
    return {"string": "string", "long": "bigint", "long_list": "array<bigint>"}[fs.kind]


def _sql_default(fs: FieldSpec) -> str:
    """An optional field's default as a SQL literal of its type."""
    if fs.kind == "string":
        return _quote(fs.default)
    if fs.kind == "long":
        return str(int(fs.default))
    if fs.kind == "long_list":
        return f"cast(array({', '.join(map(str, fs.default))}) AS array<bigint>)"
    raise AssertionError(f"{fs.name}: {fs.kind} has no default here")


def parsed_record() -> Column:
    """The record's text (`TEXT`) parsed by Spark, typed (`_fast_schema`); `_corrupt` set when
    it is no JSON object of those types. Spark's reader takes single-quoted names and strings
    unless told not to; JSON, and the contract's decoder, do not."""
    return F.from_json(TEXT, _fast_schema(), {"columnNameOfCorruptRecord": CORRUPT, "allowSingleQuotes": "false"})


def _fast_schema() -> str:
    fields = [f"{name}: {_sql_type(fs)}" for name, fs in _fast_fields().items()]
    return f"struct<type: string, version: bigint, {', '.join(fields)}, {CORRUPT}: string>"


def _maybe_not_text(v: str) -> str:
    """True when the string `v` may be Spark's reading of a JSON value that is not a string.
    Each anchored pattern is tried only on a text that begins as it must (one regular expression
    of every alternative, searched through each cluster id and topic, took 7% of the read tasks'
    CPU), and the non-numbers are plain substrings."""
    first = f"substr({v}, 1, 1)"
    signs_and_digits = ", ".join(_quote(c) for c in "-+0123456789")
    return (f"({first} IN ('{{', '[', '\"')"
            f" OR ({first} IN ({signs_and_digits}) AND {v} RLIKE '{_NUMBER_TEXT}')"
            f" OR ({first} IN ('t', 'f') AND {v} RLIKE '{_BOOLEAN_TEXT}')"
            + "".join(f" OR contains({v}, {_quote(n)})" for n in _NON_NUMBERS) + ")")


def _field_ok(fs: FieldSpec, v: str | None = None) -> str:
    """True when the field passes the contract's rule (null when it is missing or mistyped);
    `v`: where its value is (a replica's field in a lambda), the record's field by default."""
    v = v or f"{RECORD}.{fs.name}"
    rule = _value_ok(fs, v)
    if not fs.required:  # absent takes the default; a JSON null is refused (see the docstring)
        return f"({rule} OR ({v} IS NULL AND NOT contains({TEXT}, 'null')))"
    return rule


def _value_ok(fs: FieldSpec, v: str) -> str:
    if fs.kind == "string":
        if fs.choices is not None:
            return f"{v} IN ({', '.join(map(_quote, fs.choices))})"
        return f"({v} <> '' AND NOT {_maybe_not_text(v)})"
    if fs.kind == "long":
        return f"{v} >= {fs.minimum}" if fs.minimum is not None else f"{v} IS NOT NULL"
    if fs.kind == "long_list":
        return f"NOT exists({v}, x -> x IS NULL OR x < 0)"
    if fs.kind == "replica_list":
        # each element an object (Spark reads any other JSON value as null or fails the parse)
        # whose every field passes; coalesce: a null rule is a reject, not an unknown
        each = " AND ".join(f"({_field_ok(r, f'r.{r.name}')})" for r in events.field_specs(events.SnapshotReplica))
        return f"NOT exists({v}, r -> r IS NULL OR NOT coalesce({each}, false))"
    raise AssertionError(f"{fs.name}: {fs.kind} has no fast check")


def _type_ok(rtype: str) -> str:
    cls = events.RECORD_TYPES[rtype]
    specs = events.field_specs(cls)
    # an absent optional field takes its default in the cross-field rules too
    values = {fs.name: f"{RECORD}.{fs.name}" if fs.required else f"coalesce({RECORD}.{fs.name}, {_sql_default(fs)})"
              for fs in specs if fs.kind != "replica_list"}
    rules = [_field_ok(fs) for fs in specs] + [r.format(**values) for r in _CROSS_FIELD_RULES.get(rtype, [])]
    return " AND ".join(f"({r})" for r in rules)


def _objects_ok(rtype: str) -> str:
    """True when every `}` of the text closes an object Spark read (see the docstring)."""
    nested = NESTED.get(rtype, ())
    if not nested:  # the one `}` is the last byte
        return "(NOT contains(substr(value, 1, octet_length(value) - 1), X'7D'))"
    objects = " + ".join(["1"] + [f"size({RECORD}.{name})" for name in nested])
    return (f"(substr(value, -1) = X'7D'"
            f" AND octet_length(value) - octet_length(replace({TEXT}, '}}', '')) = {objects})")


def _accepted(max_future_ms: int) -> str:
    supported = ", ".join(str(v) for v in sorted(events.SUPPORTED_VERSIONS))
    per_type = " ".join(f"WHEN {_quote(t)} THEN {_objects_ok(t)} AND {_type_ok(t)}" for t in FAST_TYPES)
    return f"""coalesce(
        {RECORD}.{CORRUPT} IS NULL AND is_valid_utf8({TEXT})
        AND {RECORD}.version IN ({supported})
        AND {RECORD}.time_ms <= {CHECKED_AT} + {int(max_future_ms)}
        AND CASE {RECORD}.type {per_type} ELSE false END, false)"""


def _replica_fields() -> str:
    """A replica struct's fields as `named_struct` takes them, defaults filled in."""
    parts = []
    for r in events.field_specs(events.SnapshotReplica):
        value = f"r.{r.name}" if r.required else f"coalesce(r.{r.name}, {_sql_default(r)})"
        parts.append(f"{_quote(r.name)}, {value}")
    return ", ".join(parts)


def _event_columns() -> list[Column]:
    """An accepted record's columns that the health processor reads (`schema.INPUT_COLUMNS`): a
    field that does not belong to its type is null (and left out of its packed JSON)."""
    from streaming.health.schema import INPUT_COLUMNS
    owners: dict[str, list[str]] = {}
    for rtype in FAST_TYPES:
        for fs in events.field_specs(events.RECORD_TYPES[rtype]):
            owners.setdefault(fs.name, []).append(rtype)
    columns = [F.col(f"{RECORD}.type").alias("type")]
    for name, fs in _fast_fields().items():
        if name not in INPUT_COLUMNS:
            continue
        value = f"{RECORD}.{name}"
        if fs.kind == "replica_list":  # a replica's absent directory id takes its default
            value = f"transform({value}, r -> named_struct({_replica_fields()}))"
        elif not fs.required:
            value = f"coalesce({value}, {_sql_default(fs)})"
        if len(owners[name]) < len(FAST_TYPES):
            value = f"CASE WHEN {RECORD}.type IN ({', '.join(map(_quote, owners[name]))}) THEN {value} END"
        columns.append(F.expr(value).alias(name))
    # Where each record was in Kafka: one quorum's records share a partition, and their offsets
    # are the order they were published in (the health state folds them in that order).
    columns += [F.col("partition").alias("_kafka_partition"), F.col("offset").alias("_offset")]
    return columns


def _raw_record_json(quorum: list[Column]) -> Column:
    """A record not accepted on the fast path, as the health processor receives it: the quorum
    key it is routed under (`quorum`, its named key columns, never null), its bytes and where it
    was in Kafka (`streaming.health.raw_records` reads it)."""
    key = F.struct(*quorum).alias("_quorum")
    # binary columns: to_json writes them in base64 (unlike `base64()`, without line breaks)
    return F.to_json(F.struct(key, F.col("value").alias("_raw"), F.col("key").alias("_key"),
                              F.col("topic").alias("_topic"), F.col("partition").alias("_kafka_partition"),
                              F.col("offset").alias("_offset"), F.unix_millis("timestamp").alias("_timestamp_ms")),
                     {"ignoreNullFields": "true"})


def route_records(max_future_ms: int = events.DEFAULT_MAX_FUTURE_MS,
                  now: Column | None = None, carry: tuple[str, ...] = ()) -> Callable[[DataFrame], DataFrame]:
    """Kafka rows (`value`, `key`, `topic`, `partition`, `offset`, `timestamp`) -> the health
    processor's input: the quorum key, `record_json` (packed when accepted, raw otherwise),
    `_accepted` and `_time_ms` (the record's event time; null when unreadable or too far ahead).
    `now` is the processing clock (default: the wall clock when the record is checked). `carry`:
    fields of an accepted record to add as columns of their own (null for the others), for a
    stage that groups records by them."""
    from streaming.health.schema import DEAD_LETTER_KEY, KEY_COLUMNS, RECORD_JSON
    now_ms = F.unix_millis(now) if now is not None else F.expr(_WALL_CLOCK_MS)

    def transform(df: DataFrame) -> DataFrame:
        parsed = (df.withColumn(TEXT, F.col("value").cast("string"))
                  .withColumn(RECORD, parsed_record())
                  .withColumn(CHECKED_AT, now_ms))
        checked = parsed.withColumn(ACCEPTED, F.expr(_accepted(max_future_ms)))
        accepted = F.col(ACCEPTED)
        packed = F.to_json(F.struct(*_event_columns()), {"ignoreNullFields": "true"})
        # a record Spark could not read a quorum key from has none: the processor's reserved key
        key = [F.col(f"{RECORD}.{name}") for name in KEY_COLUMNS]
        readable = key[0].isNotNull() & (key[0] != "") & key[1].isNotNull() & key[2].isNotNull()
        quorum = [F.when(accepted | readable, k).otherwise(F.lit(reserved)) for k, reserved in zip(key, DEAD_LETTER_KEY)]
        # The event time, for the job's input delay: of every record with a quorum key whose
        # stamp is not from the future (the raw ones too, or a job fed by collectors alone would
        # report none; a raw record may still be refused, for another field).
        time_ms = F.col(f"{RECORD}.time_ms")
        plausible = (accepted | readable) & (time_ms <= F.col(CHECKED_AT) + int(max_future_ms))
        routed = [k.alias(name) for k, name in zip(quorum, KEY_COLUMNS)]
        return checked.select(*routed,
                              F.when(accepted, packed).otherwise(_raw_record_json(routed)).alias(RECORD_JSON),
                              accepted.alias(ACCEPTED), F.when(plausible, time_ms).alias(TIME_MS),
                              *[F.when(accepted, F.col(f"{RECORD}.{name}")).alias(name) for name in carry])
    return transform
