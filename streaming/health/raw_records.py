"""Records the job's fast path in Spark did not accept, decided by the event contract itself.

They reach the health processor as `{"_quorum": {"cluster_id": ..., "topic": ..., "partition":
...}, "_raw": <base64 bytes>, "_key": ..., "_topic": ..., "_kafka_partition": ..., "_offset": ...,
"_timestamp_ms": ...}` (see `streaming.decode`): `_quorum` is the quorum key Spark could read
from them (never null: the reserved key when none), the others are left out when null (a
tombstone has no `_raw`). `quorum.events.decode` decides: a valid record
becomes the same dict an accepted one unpacks to, and is folded in with the others in Kafka
order; a reject becomes its dead-letter line (reason, field, record type, the raw bytes in
base64, the Kafka position, times in ISO 8601 UTC), with the decoder's own reason and field.
A valid record under a key that is not its own (Spark read the key differently, e.g. a text in
UTF-16, which Python's JSON reader accepts) is a reject too: `inconsistent`, field `record`.
"""
from __future__ import annotations

import base64
import datetime as dt
import json
from typing import Any

from quorum import events

from .schema import INPUT_COLUMNS

RAW_PREFIX = '{"_quorum"'  # how the processor tells a raw record from a packed one (whose first field is `type`)
_INPUT = frozenset(INPUT_COLUMNS)
_EMPTY = dict.fromkeys(INPUT_COLUMNS)


def is_raw(text: str) -> bool:
    return text.startswith(RAW_PREFIX)


def _iso_utc(ms: int) -> str:
    t = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(milliseconds=ms)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def _record_type(raw: bytes) -> str:
    """The record's `type` when it is a JSON object with a string type, else `record`."""
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return "record"
    rtype = obj.get("type") if isinstance(obj, dict) else None
    return rtype if isinstance(rtype, str) else "record"


def _field(e: events.ContractError) -> str:
    """The offending field, nested SnapshotReplica fields named `voters[].replica_id`."""
    if "." in e.record_type:
        prefix = e.record_type.split(".", 1)[1]
        return prefix if e.field == "record" else f"{prefix}.{e.field}"
    return e.field


def dead_letter_line(wrapper: dict[str, Any], raw: bytes, code: str, field: str, now_ms: int) -> str:
    """One rejected record as a JSON line (a null value or Kafka key left out)."""
    line = {"reason": code, "field": field, "record_type": _record_type(raw)}
    for name, source in (("value", "_raw"), ("key", "_key")):
        if wrapper.get(source) is not None:
            line[name] = wrapper[source]
    line.update(topic=wrapper["_topic"], partition=wrapper["_kafka_partition"], offset=wrapper["_offset"])
    if wrapper.get("_timestamp_ms") is not None:
        line["timestamp"] = _iso_utc(wrapper["_timestamp_ms"])
    line["dead_lettered_at"] = _iso_utc(now_ms)
    return json.dumps(line, separators=(",", ":"), ensure_ascii=False)


def as_input(record: events.Record, kafka_partition: int, offset: int) -> dict[str, Any]:
    """A valid record as the tracker reads it: what `schema.unpack_record` gives for the same
    record packed by Spark (every input column present, None where it does not apply)."""
    out = dict(_EMPTY)
    for name, value in events.to_dict(record).items():
        if name in _INPUT:
            out[name] = value
    out["_kafka_partition"], out["_offset"] = kafka_partition, offset
    return out


def decide(text: str, now_ms: int, max_future_ms: int) -> tuple[tuple, dict[str, Any] | None, tuple | None]:
    """(the quorum key Spark read, the record for the tracker, None) when valid under that key;
    else (the key, None, (reason, line))."""
    wrapper = json.loads(text)
    quorum = wrapper["_quorum"]
    key = (quorum["cluster_id"], quorum["topic"], quorum["partition"])
    raw = base64.b64decode(wrapper["_raw"]) if wrapper.get("_raw") is not None else b""
    try:
        record = events.decode(raw, now_ms, max_future_ms)
    except events.ContractError as e:
        return key, None, (e.code, dead_letter_line(wrapper, raw, e.code, _field(e), now_ms))
    if (record.cluster_id, record.topic, record.partition) != key:
        return key, None, ("inconsistent", dead_letter_line(wrapper, raw, "inconsistent", "record", now_ms))
    return key, as_input(record, wrapper["_kafka_partition"], wrapper["_offset"]), None
