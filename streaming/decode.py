"""Decode and validate the events topic's records in Spark, with the event contract's own rules.

Pure `DataFrame -> DataFrame` transforms, chained by the job:

    checked = raw.transform(check_records(max_future_ms))   # adds `_error` (null when valid)
    events  = checked.transform(valid_events)               # envelope columns, valid records only
    dead    = checked.transform(dead_letters)               # reason, field, raw bytes, Kafka position
    counts  = dead.transform(count_by_reason)               # reason -> records

Validation is generated from `quorum.events.field_specs`, so it follows the contract as it
changes, and gives the same first error (`ContractError.code` and field) as `events.decode`
(a test compares the two on a corpus of bad records). Records are parsed once into a Variant:
unlike `from_json`, it keeps each value's JSON type, so `"5"` for an integer field is
`wrong_type` rather than silently cast, and a missing field is told apart from a `null` one.

Where Spark and the Python decoder differ, on purpose or by necessity:
  - JSON with a duplicate key is `invalid_json` here (Python keeps the last value);
  - nested ReplicaState errors name their field as `voters[].replica_id`.
"""
from __future__ import annotations

from typing import Callable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from quorum import events
from quorum.events import FieldSpec

ERROR = "_error"
VARIANT = "_json"
RECORD_TYPE = "_type"
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


def _field_error(var: str, fs: FieldSpec, label: str) -> str:
    """SQL for the first error of one field, or NULL; mirrors `events._check_value`."""
    kind = _json_kind(var, fs.name)
    missing = f"WHEN {kind} IS NULL THEN {_err('missing_field', label)}" if fs.required else \
        f"WHEN {kind} IS NULL THEN NULL"
    if fs.kind == "string":
        value = f"variant_get({var}, '$.{fs.name}', 'string')"
        checks = [f"WHEN {kind} <> 'STRING' THEN {_err('wrong_type', label)}"]
        if fs.choices is None:
            checks.append(f"WHEN {value} = '' THEN {_err('bad_value', label)}")
        else:
            checks.append(f"WHEN {value} NOT IN ({', '.join(map(_quote, fs.choices))}) THEN {_err('bad_value', label)}")
    elif fs.kind == "long":
        value = f"variant_get({var}, '$.{fs.name}', 'bigint')"
        # An integer too large for 64 bits comes as DECIMAL(p,0): the contract calls it out of range.
        checks = [f"WHEN {kind} RLIKE '^DECIMAL\\\\([0-9]+,0\\\\)$' THEN {_err('out_of_range', label)}",
                  f"WHEN {kind} <> 'BIGINT' THEN {_err('wrong_type', label)}"]
        if fs.minimum is not None:
            checks.append(f"WHEN {value} < {fs.minimum} THEN {_err('out_of_range', label)}")
    elif fs.kind == "long_list":
        items = f"try_variant_get({var}, '$.{fs.name}', 'array<variant>')"
        checks = [f"WHEN NOT startswith({kind}, 'ARRAY') THEN {_err('wrong_type', label)}",
                  f"WHEN exists({items}, x -> schema_of_variant(x) <> 'BIGINT' OR variant_get(x, '$', 'bigint') < 0)"
                  f" THEN {_err('bad_value', label)}"]
    elif fs.kind == "replica_list":
        items = f"try_variant_get({var}, '$.{fs.name}', 'array<variant>')"
        element_errors = ", ".join(_field_error("r", sub, f"{fs.name}[].{sub.name}")
                                   for sub in events.field_specs(events.ReplicaState))
        per_item = (f"CASE WHEN NOT startswith(schema_of_variant(r), 'OBJECT') "
                    f"THEN {_err('not_an_object', fs.name + '[]')} ELSE coalesce({element_errors}) END")
        checks = [f"WHEN NOT startswith({kind}, 'ARRAY') THEN {_err('wrong_type', label)}",
                  f"ELSE get(filter(transform({items}, r -> {per_item}), e -> e IS NOT NULL), 0)"]
    else:
        raise AssertionError(fs.kind)
    return f"CASE {missing} {' '.join(checks)} END"


def _typed(var: str, fs: FieldSpec) -> str:
    sql = f"try_variant_get({var}, '$.{fs.name}', '{_SQL_TYPES[fs.kind]}')"
    return sql if fs.required else f"coalesce({sql}, {fs.default!r})"


# Cross-field rules of the record types' `check()` methods (keep in step with quorum/events.py;
# the decode-vs-contract test fails when they drift).
_CROSS_FIELD_CHECKS: dict[str, list[tuple[str, str]]] = {
    "fetch": [("{outcome} = 'valid' AND {fetch_offset} > {leader_log_end_offset}", "fetch_offset"),
              ("{high_watermark} > {leader_log_end_offset}", "high_watermark")],
    "metrics": [("{last_committed_offset} >= 0 AND {last_applied_offset} > {last_committed_offset}",
                 "last_applied_offset")],
}


def _cross_field_error(rtype: str, var: str) -> str:
    values = {fs.name: f"variant_get({var}, '$.{fs.name}', '{_SQL_TYPES[fs.kind]}')"
              for fs in events.field_specs(events.RECORD_TYPES[rtype]) if fs.kind in ("long", "string")}
    whens = [f"WHEN {condition.format(**values)} THEN {_err('inconsistent', field)}"
             for condition, field in _CROSS_FIELD_CHECKS.get(rtype, [])]
    return f"CASE {' '.join(whens)} END" if whens else "NULL"


def _record_error(var: str, now_ms: str, max_future_ms: int) -> str:
    kind = f"schema_of_variant({var})"
    type_kind = _json_kind(var, "type")
    type_value = f"variant_get({var}, '$.type', 'string')"
    version_kind = _json_kind(var, "version")
    per_type = []
    for rtype, cls in events.RECORD_TYPES.items():
        fields = ", ".join(_field_error(var, fs, fs.name) for fs in events.field_specs(cls))
        future = (f"CASE WHEN variant_get({var}, '$.time_ms', 'bigint') > {now_ms} + {int(max_future_ms)} "
                  f"THEN {_err('future_timestamp', 'time_ms')} END")
        per_type.append(f"WHEN {type_value} = {_quote(rtype)} THEN coalesce({fields}, "
                        f"{_cross_field_error(rtype, var)}, {future})")
    supported = ", ".join(str(v) for v in sorted(events.SUPPORTED_VERSIONS))
    # JSON null for `type`/`version` counts as missing, as in events.from_dict (obj.get(...) is None).
    return f"""CASE
        WHEN value IS NULL OR NOT is_valid_utf8(cast(value AS string)) OR {var} IS NULL
            THEN {_err('invalid_json', 'record')}
        WHEN NOT startswith({kind}, 'OBJECT') THEN {_err('not_an_object', 'record')}
        WHEN {type_kind} IS NULL OR {type_kind} = 'VOID' THEN {_err('missing_field', 'type')}
        WHEN {type_kind} <> 'STRING' THEN {_err('wrong_type', 'type')}
        WHEN {type_value} NOT IN ({', '.join(map(_quote, events.RECORD_TYPES))}) THEN {_err('unknown_type', 'type')}
        WHEN {version_kind} IS NULL OR {version_kind} = 'VOID' THEN {_err('missing_field', 'version')}
        WHEN {version_kind} RLIKE '^DECIMAL\\\\([0-9]+,0\\\\)$' THEN {_err('unsupported_version', 'version')}
        WHEN {version_kind} <> 'BIGINT' THEN {_err('wrong_type', 'version')}
        WHEN variant_get({var}, '$.version', 'bigint') NOT IN ({supported})
            THEN {_err('unsupported_version', 'version')}
        {' '.join(per_type)}
    END"""


def check_records(max_future_ms: int = events.DEFAULT_MAX_FUTURE_MS,
                  now: Column | None = None) -> Callable[[DataFrame], DataFrame]:
    """Parse `value` (binary JSON) and add `_error` (struct code, field; null when the record is
    valid), `_type` and the parsed `_json`. `now` is the processing clock (default: the batch's
    `current_timestamp()`); records stamped more than `max_future_ms` after it are rejected."""
    now_col = now if now is not None else F.current_timestamp()

    def transform(df: DataFrame) -> DataFrame:
        parsed = (df.withColumn(VARIANT, F.expr("try_parse_json(cast(value AS string))"))
                  .withColumn("_now_ms", F.unix_millis(now_col)))
        return (parsed.withColumn(ERROR, F.expr(_record_error(VARIANT, "_now_ms", max_future_ms)))
                .withColumn(RECORD_TYPE, F.expr(f"try_variant_get({VARIANT}, '$.type', 'string')"))
                .drop("_now_ms"))
    return transform


def valid_events(checked: DataFrame) -> DataFrame:
    """The valid records with exactly the columns of `events.envelope_spark_schema()`; a field
    that does not belong to the record's type is null."""
    owners: dict[str, list[str]] = {}
    for rtype, cls in events.RECORD_TYPES.items():
        for fs in events.field_specs(cls):
            owners.setdefault(fs.name, []).append(rtype)
    fields = events.envelope_fields()
    columns = [F.col(RECORD_TYPE).alias("type"),
               F.expr(f"try_variant_get({VARIANT}, '$.version', 'bigint')").alias("version")]
    for name, fs in fields.items():
        in_types = ", ".join(map(_quote, owners[name]))
        columns.append(F.expr(f"CASE WHEN {RECORD_TYPE} IN ({in_types}) THEN {_typed(VARIANT, fs)} END").alias(name))
    schema = events.envelope_spark_schema()
    return (checked.where(F.col(ERROR).isNull()).select(*columns)
            .select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields]))


def dead_letters(checked: DataFrame) -> DataFrame:
    """The rejected records: reason (a `ContractError.code`), field, record type when known,
    the raw bytes, where they were in Kafka, and when they were rejected."""
    return (checked.where(F.col(ERROR).isNotNull())
            .select(F.col(f"{ERROR}.code").alias("reason"), F.col(f"{ERROR}.field").alias("field"),
                    F.coalesce(F.col(RECORD_TYPE), F.lit("record")).alias("record_type"),
                    F.col("value"), *[F.col(c) for c in KAFKA_COLUMNS],
                    F.current_timestamp().alias("dead_lettered_at")))


def count_by_reason(dead: DataFrame) -> DataFrame:
    """Rejected records per reason code."""
    return dead.groupBy("reason").agg(F.count(F.lit(1)).alias("records"))
