"""Decode and validate the events topic's records in Spark, with the event contract's own rules.

Pure `DataFrame -> DataFrame` transforms, chained by the job:

    checked = raw.transform(check_records(max_future_ms))   # adds `_error` (null when valid)
    events  = checked.transform(valid_events)               # envelope columns, valid records only
    dead    = checked.transform(dead_letters)               # reason, field, raw bytes, Kafka position
    checked.select(*event_columns(), dead_letter_json())    # both at once, on one read (the job)
    counts  = dead.transform(count_by_reason)               # reason -> records

Validation is generated from `quorum.events.field_specs`, so it follows the contract as it
changes, and gives the same first error (`ContractError.code` and field) as `events.decode`
(a test compares the two on a corpus of bad records). Records are parsed once into a Variant:
unlike `from_json`, it keeps each value's JSON type, so `"5"` for an integer field is
`wrong_type` rather than silently cast, and a missing field is told apart from a `null` one.

Where Spark and the Python decoder differ, on purpose or by necessity:
  - JSON with a duplicate key is `invalid_json` here (Python keeps the last value);
  - a text with more after its first JSON value (`{...} x`, `{...},{...}`) is that value here:
    Spark's JSON parsers stop after it, where Python refuses the text as `invalid_json`.
    Reading the whole text (`json_array_length` of the text as an array) would cost 2 to 5 us
    a record, about a tenth of decoding (measured), for input no emitter writes;
  - nested ReplicaState errors name their field as `voters[].replica_id`.
"""
from __future__ import annotations

import dataclasses
from functools import lru_cache
from typing import Callable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from quorum import events
from quorum.events import FieldSpec

ERROR = "_error"
VARIANT = "_json"
RECORD = "_record"
CHECKED_AT = "_checked_at_ms"
KAFKA_COLUMNS = ("key", "topic", "partition", "offset", "timestamp")
DEAD_LETTER_COLUMNS = ("reason", "field", "record_type", "value", "key", "topic", "partition", "offset",
                       "timestamp", "dead_lettered_at")

_SQL_TYPES = {"string": "string", "long": "bigint", "long_list": "array<bigint>",
              "replica_list": "array<struct<%s>>" % ",".join(
                  f"{fs.name}:bigint" for fs in events.field_specs(events.ReplicaState))}


def _quote(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _err(code: str, field: str) -> str:
    assert code in events.ContractError.CODES, code
    return f"named_struct('code', {_quote(code)}, 'field', {_quote(field)})"


def _json_kind(var: str, name: str) -> str:
    """The JSON type of `var.name` as Spark names it (BIGINT, STRING, ARRAY<...>, OBJECT<...>,
    VOID for null, DECIMAL(p,s)/DOUBLE for other numbers); SQL NULL when the key is absent."""
    return f"schema_of_variant(variant_get({var}, '$.{name}', 'variant'))"


def _top_kind(name: str) -> str:
    return f"_kind_{name}"


def _top_value(fs: FieldSpec) -> str:
    return f"{RECORD}.{fs.name}"


def _field_error(fs: FieldSpec, label: str, kind_of: Callable[[str], str] = _top_kind,
                 value_of: Callable[[FieldSpec], str] = _top_value) -> str:
    """SQL for the first error of one field, or NULL; mirrors `events._check_value`. The value
    is only read once the kind is right, so a lenient cast ("5" -> 5) never passes a check."""
    kind = kind_of(fs.name)
    missing = f"WHEN {kind} IS NULL THEN {_err('missing_field', label)}" if fs.required else \
        f"WHEN {kind} IS NULL THEN NULL"
    value = value_of(fs)
    if fs.kind == "string":
        checks = [f"WHEN {kind} <> 'STRING' THEN {_err('wrong_type', label)}"]
        if fs.choices is None:
            checks.append(f"WHEN {value} = '' THEN {_err('bad_value', label)}")
        else:
            checks.append(f"WHEN {value} NOT IN ({', '.join(map(_quote, fs.choices))}) THEN {_err('bad_value', label)}")
    elif fs.kind == "long":
        # An integer too large for 64 bits comes as DECIMAL(p,0): the contract calls it out of range.
        checks = [f"WHEN {kind} RLIKE '^DECIMAL\\\\([0-9]+,0\\\\)$' THEN {_err('out_of_range', label)}",
                  f"WHEN {kind} <> 'BIGINT' THEN {_err('wrong_type', label)}"]
        if fs.minimum is not None:
            checks.append(f"WHEN {value} < {fs.minimum} THEN {_err('out_of_range', label)}")
    elif fs.kind == "long_list":
        checks = [f"WHEN NOT startswith({kind}, 'ARRAY') THEN {_err('wrong_type', label)}",
                  f"WHEN {kind} NOT IN ('ARRAY<BIGINT>', 'ARRAY<VOID>') THEN {_err('bad_value', label)}",
                  f"WHEN exists({value}, x -> x IS NULL OR x < 0) THEN {_err('bad_value', label)}"]
    elif fs.kind == "replica_list":
        # Rare (collector snapshots): checked element by element on the Variant itself.
        items = f"try_variant_get({VARIANT}, '$.{fs.name}', 'array<variant>')"
        element_errors = ", ".join(
            _field_error(sub, f"{fs.name}[].{sub.name}", lambda n: _json_kind("r", n),
                         lambda f: f"variant_get(r, '$.{f.name}', '{_SQL_TYPES[f.kind]}')")
            for sub in events.field_specs(events.ReplicaState))
        per_item = (f"CASE WHEN NOT startswith(schema_of_variant(r), 'OBJECT') "
                    f"THEN {_err('not_an_object', fs.name + '[]')} ELSE coalesce({element_errors}) END")
        checks = [f"WHEN NOT startswith({kind}, 'ARRAY') THEN {_err('wrong_type', label)}",
                  f"ELSE get(filter(transform({items}, r -> {per_item}), e -> e IS NOT NULL), 0)"]
    else:
        raise AssertionError(fs.kind)
    return f"CASE {missing} {' '.join(checks)} END"


# Cross-field rules of the record types' `check()` methods (keep in step with quorum/events.py;
# the decode-vs-contract test fails when they drift).
_CROSS_FIELD_CHECKS: dict[str, list[tuple[str, str]]] = {
    "fetch": [("{outcome} = 'valid' AND {fetch_offset} > {leader_log_end_offset}", "fetch_offset"),
              ("{high_watermark} > {leader_log_end_offset}", "high_watermark")],
    "metrics": [("{last_committed_offset} >= 0 AND {last_applied_offset} > {last_committed_offset}",
                 "last_applied_offset")],
}


def _cross_field_error(rtype: str) -> str:
    values = {fs.name: f"{RECORD}.{fs.name}" for fs in events.field_specs(events.RECORD_TYPES[rtype])}
    whens = [f"WHEN {condition.format(**values)} THEN {_err('inconsistent', field)}"
             for condition, field in _CROSS_FIELD_CHECKS.get(rtype, [])]
    return f"CASE {' '.join(whens)} END" if whens else "NULL"


@lru_cache(maxsize=1)
def _field_checks() -> dict[FieldSpec, str]:
    """One check column per distinct field spec: a name can carry different constraints in
    different record types (`leader_id` is >= 0 in a fetch, >= -1 in metrics)."""
    out: dict[FieldSpec, str] = {}
    for cls in events.RECORD_TYPES.values():
        for fs in events.field_specs(cls):
            fs = dataclasses.replace(fs, doc="")  # the same rule documented twice is one check
            if fs not in out:
                out[fs] = f"_check_{fs.name}_{sum(1 for f in out if f.name == fs.name)}"
    return out


def _field_column(fs: FieldSpec) -> str:
    return _field_checks()[dataclasses.replace(fs, doc="")]


def _record_error(now_ms: str, max_future_ms: int) -> str:
    """The first error of a record, given the per-field error columns (`_check_<field>`)."""
    type_kind, version_kind = _top_kind("type"), _top_kind("version")
    per_type = []
    for rtype, cls in events.RECORD_TYPES.items():
        fields = ", ".join(_field_column(fs) for fs in events.field_specs(cls))
        future = (f"CASE WHEN {RECORD}.time_ms > {now_ms} + {int(max_future_ms)} "
                  f"THEN {_err('future_timestamp', 'time_ms')} END")
        per_type.append(f"WHEN {RECORD}.type = {_quote(rtype)} THEN coalesce({fields}, "
                        f"{_cross_field_error(rtype)}, {future})")
    supported = ", ".join(str(v) for v in sorted(events.SUPPORTED_VERSIONS))
    # JSON null for `type`/`version` counts as missing, as in events.from_dict (obj.get(...) is None).
    return f"""CASE
        WHEN value IS NULL OR NOT is_valid_utf8(cast(value AS string)) OR {VARIANT} IS NULL
            THEN {_err('invalid_json', 'record')}
        WHEN {RECORD} IS NULL THEN {_err('not_an_object', 'record')}
        WHEN {type_kind} IS NULL OR {type_kind} = 'VOID' THEN {_err('missing_field', 'type')}
        WHEN {type_kind} <> 'STRING' THEN {_err('wrong_type', 'type')}
        WHEN {RECORD}.type NOT IN ({', '.join(map(_quote, events.RECORD_TYPES))}) THEN {_err('unknown_type', 'type')}
        WHEN {version_kind} IS NULL OR {version_kind} = 'VOID' THEN {_err('missing_field', 'version')}
        WHEN {version_kind} RLIKE '^DECIMAL\\\\([0-9]+,0\\\\)$' THEN {_err('unsupported_version', 'version')}
        WHEN {version_kind} <> 'BIGINT' THEN {_err('wrong_type', 'version')}
        WHEN {RECORD}.version NOT IN ({supported}) THEN {_err('unsupported_version', 'version')}
        {' '.join(per_type)}
    END"""


def _envelope_ddl() -> str:
    return ", ".join(f"{f.name}: {f.dataType.simpleString()}" for f in events.envelope_spark_schema().fields)


# The processing clock, read per row. Not `current_timestamp()`: Spark folds that into a literal
# per micro-batch, so the generated code differs every batch and is compiled again each time
# (measured: +1.3 s per batch on this machine).
_WALL_CLOCK_MS = "cast(reflect('java.lang.System', 'currentTimeMillis') AS bigint)"


def check_records(max_future_ms: int = events.DEFAULT_MAX_FUTURE_MS,
                  now: Column | None = None) -> Callable[[DataFrame], DataFrame]:
    """Parse `value` (binary JSON) and add `_error` (struct code, field; null when the record is
    valid) with the parsed record (`_json`, and typed: `_record`) and `_checked_at_ms`. `now` is
    the processing clock (default: the wall clock when the record is checked); records stamped
    more than `max_future_ms` after it are rejected."""
    now_ms = F.unix_millis(now) if now is not None else F.expr(_WALL_CLOCK_MS)
    error = _record_error(CHECKED_AT, max_future_ms)
    envelope = f"struct<{_envelope_ddl()}>"

    def transform(df: DataFrame) -> DataFrame:
        # In steps, each field's JSON kind, value and error computed once in an expression of
        # its own (a map of kinds looked up in every check was 5 times slower).
        parsed = df.withColumn(VARIANT, F.expr("try_parse_json(cast(value AS string))"))
        names = ["type", "version", *events.envelope_fields()]
        # A non-object does not cast to the struct: `_record` null means "not an object".
        typed = (parsed
                 .withColumns({_top_kind(n): F.expr(_json_kind(VARIANT, n)) for n in names})
                 .withColumn(RECORD, F.expr(f"try_variant_get({VARIANT}, '$', '{envelope}')"))
                 .withColumn(CHECKED_AT, now_ms))
        fields = _field_checks()
        checked = typed.withColumns({column: F.expr(_field_error(fs, fs.name)) for fs, column in fields.items()})
        return (checked.withColumn(ERROR, F.expr(error))
                .drop(*fields.values(), *[_top_kind(n) for n in names]))
    return transform


def event_columns() -> list[Column]:
    """The columns of `valid_events`, computed on any checked record (null-filled for a reject)."""
    owners: dict[str, list[str]] = {}
    for rtype, cls in events.RECORD_TYPES.items():
        for fs in events.field_specs(cls):
            owners.setdefault(fs.name, []).append(rtype)
    columns = [F.col(f"{RECORD}.type").alias("type"), F.col(f"{RECORD}.version").alias("version")]
    for name, fs in events.envelope_fields().items():
        value = f"{RECORD}.{name}" if fs.required else f"coalesce({RECORD}.{name}, {fs.default!r})"
        in_types = ", ".join(map(_quote, owners[name]))
        columns.append(F.expr(f"CASE WHEN {RECORD}.type IN ({in_types}) THEN {value} END").alias(name))
    # Where each record was in Kafka: one quorum's records share a partition, and their offsets
    # are the order they were published in (the health state folds them in that order).
    columns += [F.col("partition").alias("_kafka_partition"), F.col("offset").alias("_offset")]
    return columns


def valid_events(checked: DataFrame) -> DataFrame:
    """The valid records with the columns of `events.envelope_spark_schema()` (a field that does
    not belong to the record's type is null, an optional one missing takes its default), then
    their Kafka partition and offset as `_kafka_partition` and `_offset`."""
    return checked.where(F.col(ERROR).isNull()).select(*event_columns())


def dead_letter_columns() -> list[Column]:
    """The columns of `dead_letters` (`DEAD_LETTER_COLUMNS`), computed on a rejected record."""
    return [F.col(f"{ERROR}.code").alias("reason"), F.col(f"{ERROR}.field").alias("field"),
            F.coalesce(F.col(f"{RECORD}.type"), F.lit("record")).alias("record_type"),
            F.col("value"), *[F.col(c) for c in KAFKA_COLUMNS],
            F.timestamp_millis(F.col(CHECKED_AT)).alias("dead_lettered_at")]


def dead_letters(checked: DataFrame) -> DataFrame:
    """The rejected records: reason (a `ContractError.code`), field, record type when known,
    the raw bytes, where they were in Kafka, and when they were rejected."""
    return checked.where(F.col(ERROR).isNotNull()).select(*dead_letter_columns())


def dead_letter_json() -> Column:
    """A rejected record as one JSON line, as Spark's JSON writer writes `dead_letters` rows
    (raw bytes in base64, times in ISO 8601, null fields left out)."""
    return F.to_json(F.struct(*dead_letter_columns()), {"ignoreNullFields": "true"})


def count_by_reason(dead: DataFrame) -> DataFrame:
    """Rejected records per reason code."""
    return dead.groupBy("reason").agg(F.count(F.lit(1)).alias("records"))
