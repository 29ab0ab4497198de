"""The event contract: every record that goes on the events topic, defined once.

The quorum nodes, the synthetic quorum, the collector and the streaming job all
import this module. Each record type is a frozen dataclass; its fields carry the
constraints (minimum, allowed values) that validation checks, and the streaming job
derives its Spark schema from the same dataclasses (`field_specs`, `envelope_fields`;
streaming/event_schema.py), so nothing is written twice. No Spark code here: every
node imports this module, and a node runs without Spark.
`docs/events.md` describes the contract for people.

Wire format: one compact JSON object per Kafka record, with `type` and
`version`; the Kafka key is `cluster/topic-partition` (`quorum_key`), one key per
quorum, so that every record about one quorum lands in one Kafka partition in the
order each producer published it (`docs/events.md` says why not per replica).
Fields added in a later version are ignored by older readers; a record whose
`version` is newer than this module knows is rejected.
"""
from __future__ import annotations

import dataclasses
import json
import typing
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, ClassVar

VERSION = 1
SUPPORTED_VERSIONS = frozenset({1})

ROLES = ("voter", "observer")
NODE_STATES = ("leader", "follower", "candidate", "prospective", "voted", "unattached", "resigned", "observer")
# What the leader did with a Fetch: `valid` ones move the KIP-836 timestamps.
FETCH_OUTCOMES = (
    "valid",                    # offset and epoch consistent with the leader's log
    "diverging",                # answered with DivergingEpoch: the follower must truncate
    "fenced",                   # request epoch older than the leader's (FENCED_LEADER_EPOCH)
    "unknown_leader_epoch",     # request epoch newer than the leader's
    "offset_out_of_range",      # fetch offset beyond the leader's log end or before its start
    "inconsistent_cluster_id",  # request from another cluster
    "not_leader",               # reached a node that is not the leader
)
# DescribeQuorum v2's ReplicaDirectoryId as Kafka prints a Uuid (base64url, no padding, 22
# characters); the zero Uuid means "unknown", as in Kafka (v0/v1 answers, static voters).
UNKNOWN_DIRECTORY_ID = "AAAAAAAAAAAAAAAAAAAAAA"

# Far-future guard: a record stamped more than this ahead of the reader's clock is rejected
# when the reader passes its clock to `validate`.
DEFAULT_MAX_FUTURE_MS = 5 * 60 * 1000


class ContractError(ValueError):
    """A record that breaks the contract; `field` names the offending field."""

    # `code` is a short, low-cardinality label for counting rejects by reason.
    CODES = ("invalid_json", "not_an_object", "unknown_type", "unsupported_version", "missing_field",
             "wrong_type", "out_of_range", "bad_value", "inconsistent", "future_timestamp")

    def __init__(self, record_type: str, field_name: str, code: str, reason: str):
        assert code in self.CODES, code
        self.record_type = record_type
        self.field = field_name
        self.code = code
        self.reason = reason
        super().__init__(f"{record_type}.{field_name}: {reason}")


def spec(*, minimum: int | None = None, choices: tuple[str, ...] | None = None,
         default: Any = dataclasses.MISSING, doc: str = "") -> Any:
    """Declare a field's constraints next to its type."""
    meta = {"minimum": minimum, "choices": choices, "doc": doc}
    if default is dataclasses.MISSING:
        return field(metadata=meta)
    return field(default=default, metadata=meta)


# --- nested ---------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class SnapshotReplica:
    """One replica in a `quorum_snapshot` record's voters or observers, as DescribeQuorum reports
    it (KIP-836); -1 means unknown."""
    replica_id: int = spec(minimum=0, doc="node id")
    log_end_offset: int = spec(minimum=-1, doc="replica's log end offset as the leader knows it")
    last_fetch_timestamp_ms: int = spec(minimum=-1, doc="leader time of the replica's last valid fetch")
    last_caught_up_timestamp_ms: int = spec(minimum=-1, doc="leader time the replica was last caught up")
    directory_id: str = spec(default=UNKNOWN_DIRECTORY_ID,
                             doc="ReplicaDirectoryId (DescribeQuorum v2) as Kafka prints it, base64url of the "
                                 "UUID; AAAAAAAAAAAAAAAAAAAAAA (the zero UUID) when unknown")


# --- records --------------------------------------------------------------------------------
# Every record begins with the same location fields; `time_ms` is the emitter's wall clock.

@dataclass(frozen=True, slots=True)
class Fetch:
    """Emitted by a leader for each Fetch it handles."""
    TYPE: ClassVar[str] = "fetch"
    cluster_id: str = spec(doc="cluster id of the quorum")
    topic: str = spec(doc="quorum topic, e.g. __cluster_metadata")
    partition: int = spec(minimum=0, doc="quorum topic partition")
    time_ms: int = spec(minimum=0, doc="leader wall-clock time when it handled the fetch")
    leader_id: int = spec(minimum=0, doc="the leader handling the fetch")
    leader_epoch: int = spec(minimum=0, doc="the leader's epoch")
    replica_id: int = spec(minimum=0, doc="the fetching replica")
    replica_role: str = spec(choices=ROLES, doc="voter or observer")
    fetch_offset: int = spec(minimum=0, doc="FetchOffset of the request")
    fetch_epoch: int = spec(minimum=0, doc="LastFetchedEpoch of the request")
    leader_log_end_offset: int = spec(minimum=0, doc="leader's log end offset when the fetch arrived")
    high_watermark: int = spec(minimum=-1, doc="leader's high watermark after handling it (-1 unknown)")
    outcome: str = spec(choices=FETCH_OUTCOMES, doc="what the leader answered")
    # The leader's KIP-836 view of the replica once it has handled this fetch, so that a
    # replica's newest record carries its state and a reader needs no earlier record to know it.
    replica_log_end_offset: int = spec(minimum=-1, default=-1,
                                       doc="the replica's log end offset as the leader knows it after this fetch "
                                           "(-1 unknown: no valid fetch this epoch, or not the leader)")
    last_fetch_timestamp_ms: int = spec(minimum=-1, default=-1,
                                        doc="leader time of the replica's last valid fetch, this one included "
                                            "(-1 unknown)")
    last_caught_up_timestamp_ms: int = spec(minimum=-1, default=-1,
                                            doc="leader time the replica was last caught up, by KIP-836's rule "
                                                "(-1 unknown)")

    def check(self) -> None:
        if self.replica_log_end_offset > self.leader_log_end_offset:
            raise ContractError(self.TYPE, "replica_log_end_offset", "inconsistent",
                                f"above the leader's log end offset {self.leader_log_end_offset}")
        if self.last_caught_up_timestamp_ms > self.last_fetch_timestamp_ms:
            raise ContractError(self.TYPE, "last_caught_up_timestamp_ms", "inconsistent",
                                f"after the last fetch {self.last_fetch_timestamp_ms}")
        if self.outcome == "valid" and self.fetch_offset > self.leader_log_end_offset:
            raise ContractError(self.TYPE, "fetch_offset", "inconsistent",
                                f"valid fetch beyond the leader's log end offset {self.leader_log_end_offset}")
        if self.high_watermark > self.leader_log_end_offset:
            raise ContractError(self.TYPE, "high_watermark", "inconsistent",
                                f"above the leader's log end offset {self.leader_log_end_offset}")


@dataclass(frozen=True, slots=True)
class Metrics:
    """Emitted by every node every metrics interval (raft-metrics and KIP-835)."""
    TYPE: ClassVar[str] = "metrics"
    cluster_id: str = spec(doc="cluster id of the quorum")
    topic: str = spec(doc="quorum topic")
    partition: int = spec(minimum=0, doc="quorum topic partition")
    time_ms: int = spec(minimum=0, doc="node wall-clock time")
    node_id: int = spec(minimum=0, doc="the reporting node")
    state: str = spec(choices=NODE_STATES, doc="current-state")
    leader_id: int = spec(minimum=-1, doc="current-leader (-1 unknown)")
    epoch: int = spec(minimum=0, doc="current-epoch")
    log_end_offset: int = spec(minimum=0, doc="log-end-offset")
    high_watermark: int = spec(minimum=-1, doc="high-watermark (-1 unknown)")
    last_applied_offset: int = spec(minimum=-1, doc="LastAppliedRecordOffset (-1 none)")
    last_applied_timestamp_ms: int = spec(minimum=-1, doc="LastAppliedRecordTimestamp: append time of that record")
    last_committed_offset: int = spec(minimum=-1, doc="LastCommittedRecordOffset (-1 none)")
    last_applied_lag_ms: int = spec(minimum=-1, doc="LastAppliedRecordLagMs = now - last applied timestamp (-1 none)")
    voter_set: tuple[int, ...] = spec(doc="the voter ids this node knows")
    dropped_events_total: int = spec(minimum=0, default=0,
                                     doc="events this node dropped because the events topic was unreachable")

    def check(self) -> None:
        if self.last_committed_offset >= 0 and self.last_applied_offset > self.last_committed_offset:
            raise ContractError(self.TYPE, "last_applied_offset", "inconsistent",
                                f"above last_committed_offset {self.last_committed_offset}")


@dataclass(frozen=True, slots=True)
class StateChange:
    """A node's transition between Raft states."""
    TYPE: ClassVar[str] = "state_change"
    cluster_id: str = spec(doc="cluster id of the quorum")
    topic: str = spec(doc="quorum topic")
    partition: int = spec(minimum=0, doc="quorum topic partition")
    time_ms: int = spec(minimum=0, doc="node wall-clock time of the transition")
    node_id: int = spec(minimum=0, doc="the node changing state")
    from_state: str = spec(choices=NODE_STATES, doc="state before")
    to_state: str = spec(choices=NODE_STATES, doc="state after")
    epoch: int = spec(minimum=0, doc="epoch after the transition")
    leader_id: int = spec(minimum=-1, doc="leader after the transition (-1 unknown)")
    reason: str = spec(doc="why, in a few words")


@dataclass(frozen=True, slots=True)
class QuorumSnapshot:
    """A DescribeQuorum result, for clusters observed from outside (`quorum collect`)."""
    TYPE: ClassVar[str] = "quorum_snapshot"
    cluster_id: str = spec(doc="cluster id of the quorum")
    topic: str = spec(doc="quorum topic")
    partition: int = spec(minimum=0, doc="quorum topic partition")
    time_ms: int = spec(minimum=0, doc="collector wall-clock time of the answer")
    leader_id: int = spec(minimum=-1, doc="leader (-1 unknown)")
    leader_epoch: int = spec(minimum=0, doc="leader epoch")
    high_watermark: int = spec(minimum=-1, doc="high watermark (-1 unknown)")
    voters: tuple[SnapshotReplica, ...] = spec(doc="voters with their KIP-836 state")
    observers: tuple[SnapshotReplica, ...] = spec(doc="observers with their KIP-836 state")
    source: str = spec(doc="the bootstrap server that answered")
    poll_interval_ms: int = spec(minimum=-1, default=-1, doc="the collector's poll interval (-1 unknown)")
    latency_ms: int = spec(minimum=-1, default=-1, doc="how long DescribeQuorum took (-1 unknown)")
    answered_by: int = spec(minimum=-1, default=-1,
                            doc="node id that answered the collector (it forwards to the leader; -1 unknown)")
    refused_nodes: tuple[int, ...] = spec(default=(), doc="nodes whose metrics endpoint (--node-metrics) refused "
                                                          "the collector's connection during this poll: gone")


@dataclass(frozen=True, slots=True)
class QuorumPollError:
    """A DescribeQuorum poll that gave no quorum state (`quorum collect`): what a leaderless or
    unreachable quorum looks like from outside. One per failed poll, as a snapshot is one per
    successful poll, so a poller's silence always means the poller itself is gone."""
    TYPE: ClassVar[str] = "quorum_poll_error"
    cluster_id: str = spec(doc="cluster id of the quorum")
    topic: str = spec(doc="quorum topic")
    partition: int = spec(minimum=0, doc="quorum topic partition")
    time_ms: int = spec(minimum=0, doc="collector wall-clock time when the poll ended")
    source: str = spec(doc="the bootstrap server asked")
    poll_interval_ms: int = spec(minimum=1, doc="the collector's poll interval")
    latency_ms: int = spec(minimum=0, doc="how long the poll took until it failed")
    error_code: int = spec(minimum=-1, doc="Kafka error code of the answer (6 NOT_LEADER_OR_FOLLOWER); -1 no answer")
    error: str = spec(doc="Kafka's error name (NOT_LEADER_OR_FOLLOWER) or the client failure (timeout, "
                          "connection_refused, ...)")
    answered_by: int = spec(minimum=-1, doc="node id that answered with the error (-1 none or unknown)")
    leader_id: int = spec(minimum=-1, doc="leader the error answer names, as the answering node last knew it "
                                                 "(it may be gone); -1 none or unknown")
    leader_epoch: int = spec(minimum=-1, doc="epoch named by the error answer (-1 unknown)")
    refused_nodes: tuple[int, ...] = spec(default=(), doc="nodes whose metrics endpoint (--node-metrics) refused "
                                                          "the collector's connection during this poll: gone")


RECORD_TYPES: dict[str, type] = {c.TYPE: c for c in (Fetch, Metrics, StateChange, QuorumSnapshot, QuorumPollError)}
Record = Fetch | Metrics | StateChange | QuorumSnapshot | QuorumPollError


# --- field introspection (shared by validation, encoders and the job's Spark schema) -----------

@dataclass(frozen=True, slots=True)
class FieldSpec:
    name: str
    kind: str  # string | long | long_list | replica_list
    minimum: int | None
    choices: tuple[str, ...] | None
    required: bool
    default: Any
    doc: str


_KINDS = {str: "string", int: "long", tuple[int, ...]: "long_list",
          tuple[SnapshotReplica, ...]: "replica_list"}


@lru_cache(maxsize=None)
def field_specs(cls: type) -> tuple[FieldSpec, ...]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        required = f.default is dataclasses.MISSING
        out.append(FieldSpec(f.name, _KINDS[hints[f.name]], f.metadata.get("minimum"),
                             f.metadata.get("choices"), required,
                             None if required else f.default, f.metadata.get("doc", "")))
    return tuple(out)


def _check_value(record_type: str, fs: FieldSpec, value: Any) -> Any:
    def bad(reason: str, code: str = "wrong_type") -> ContractError:
        return ContractError(record_type, fs.name, code, reason)

    if fs.kind == "string":
        if not isinstance(value, str):
            raise bad(f"expected string, got {_json_type(value)}")
        if not value and fs.choices is None:
            raise bad("empty string", "bad_value")
        if fs.choices is not None and value not in fs.choices:
            raise bad(f"not one of {', '.join(fs.choices)} (got {value!r})", "bad_value")
        return value
    if fs.kind == "long":
        if not isinstance(value, int) or isinstance(value, bool):
            raise bad(f"expected integer, got {_json_type(value)}")
        if fs.minimum is not None and value < fs.minimum:
            raise bad(f"below minimum {fs.minimum} (got {value})", "out_of_range")
        if value >= 2 ** 63:
            raise bad(f"does not fit in 64 bits (got {value})", "out_of_range")
        return value
    if fs.kind == "long_list":
        if not isinstance(value, list):
            raise bad(f"expected array of integers, got {_json_type(value)}")
        for v in value:
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise bad(f"expected non-negative integers, got {v!r}", "bad_value")
        return tuple(value)
    if fs.kind == "replica_list":
        if not isinstance(value, list):
            raise bad(f"expected array of replica objects, got {_json_type(value)}")
        return tuple(_from_mapping(SnapshotReplica, v, f"{record_type}.{fs.name}[]") for v in value)
    raise AssertionError(fs.kind)


def _json_type(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
            dict: "object", type(None): "null"}.get(type(value), type(value).__name__)


def _from_mapping(cls: type, obj: Any, record_type: str) -> Any:
    if not isinstance(obj, dict):
        raise ContractError(record_type, "record", "not_an_object", f"expected object, got {_json_type(obj)}")
    values = {}
    for fs in field_specs(cls):
        if fs.name not in obj:
            if fs.required:
                raise ContractError(record_type, fs.name, "missing_field", "missing")
            values[fs.name] = fs.default
            continue
        values[fs.name] = _check_value(record_type, fs, obj[fs.name])
    return cls(**values)


# --- decoding and validation ------------------------------------------------------------------

def from_dict(obj: Any, now_ms: int | None = None,
              max_future_ms: int = DEFAULT_MAX_FUTURE_MS) -> Record:
    """Validate a parsed JSON object and build its record; raises ContractError naming the field."""
    if not isinstance(obj, dict):
        raise ContractError("record", "record", "not_an_object", f"expected JSON object, got {_json_type(obj)}")
    rtype = obj.get("type")
    if not isinstance(rtype, str):
        raise ContractError("record", "type", "missing_field" if rtype is None else "wrong_type",
                            "missing" if rtype is None else f"expected string, got {_json_type(rtype)}")
    cls = RECORD_TYPES.get(rtype)
    if cls is None:
        raise ContractError("record", "type", "unknown_type",
                            f"unknown record type (got {rtype!r}, expected one of {', '.join(RECORD_TYPES)})")
    version = obj.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise ContractError(rtype, "version", "missing_field" if version is None else "wrong_type",
                            "missing" if version is None else f"expected integer, got {_json_type(version)}")
    if version not in SUPPORTED_VERSIONS:
        raise ContractError(rtype, "version", "unsupported_version", f"unsupported version (got {version})")
    record = _from_mapping(cls, obj, rtype)
    if hasattr(record, "check"):
        record.check()
    if now_ms is not None and record.time_ms > now_ms + max_future_ms:
        raise ContractError(rtype, "time_ms", "future_timestamp",
                            f"in the future ({record.time_ms - now_ms} ms ahead of the reader's clock)")
    return record


def decode(raw: bytes | str, now_ms: int | None = None,
           max_future_ms: int = DEFAULT_MAX_FUTURE_MS) -> Record:
    """Parse and validate one record's bytes."""
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise ContractError("record", "record", "invalid_json", f"not valid JSON: {e}") from None
    return from_dict(obj, now_ms, max_future_ms)


def validate(record: Record, now_ms: int | None = None) -> Record:
    """Check a record built in code (the emitters call this in tests and debug paths)."""
    return from_dict(to_dict(record), now_ms)


# --- encoding -----------------------------------------------------------------------------------

def to_dict(record: Record) -> dict[str, Any]:
    out: dict[str, Any] = {"type": record.TYPE, "version": VERSION}
    for fs in field_specs(type(record)):
        value = getattr(record, fs.name)
        if fs.kind == "replica_list":  # what dataclasses.asdict gives, without its deep copies
            value = [{name: getattr(r, name) for name in _REPLICA_FIELDS} for r in value]
        elif fs.kind == "long_list":
            value = list(value)
        out[fs.name] = value
    return out


_REPLICA_FIELDS = tuple(f.name for f in dataclasses.fields(SnapshotReplica))


def encode(record: Record) -> bytes:
    """The record's JSON: its fields in declaration order after `type` and `version`, with no
    spaces. Formatted from a template of its type (a collector of a fleet encodes thousands a
    second); a value the template cannot format as json would (a long that is not an int) goes
    through the json module."""
    encoder = _RECORD_ENCODERS.get(type(record))
    if encoder is None:
        encoder = _RECORD_ENCODERS[type(record)] = _record_encoder(type(record))
    return encoder(record)


def _json_encode(record: Record) -> bytes:
    return json.dumps(to_dict(record), separators=(",", ":")).encode()


_RECORD_ENCODERS: dict[type, Callable[[Record], bytes]] = {}
_REPLICA_KINDS = tuple((f.name, str if f.type in (str, "str") else int) for f in dataclasses.fields(SnapshotReplica))
_REPLICA_TEMPLATE = "{" + ",".join('"%s":%s' % (name, "%s" if kind is str else "%d") for name, kind in _REPLICA_KINDS) + "}"


def _replicas_json(replicas: Any) -> str | None:
    """A replica list as json writes it; None when a value is not of its field's type."""
    parts = []
    for r in replicas:
        if type(r) is not SnapshotReplica:
            return None
        values = []
        for name, kind in _REPLICA_KINDS:
            value = getattr(r, name)
            if type(value) is not kind:
                return None
            values.append(_json_str(value) if kind is str else value)
        parts.append(_REPLICA_TEMPLATE % tuple(values))
    return "[" + ",".join(parts) + "]"


def _record_encoder(cls: type) -> Callable[[Record], bytes]:
    specs = field_specs(cls)
    template = '{"type":%s,"version":%d' % (_json_str(cls.TYPE), VERSION) + "".join(
        ',"%s":%s' % (fs.name, "%d" if fs.kind == "long" else "%s") for fs in specs) + "}"
    fields = tuple((fs.name, fs.kind) for fs in specs)

    def encode_record(record: Record) -> bytes:
        values: list[Any] = []
        for name, kind in fields:
            value = getattr(record, name)
            if kind == "long":
                if type(value) is not int:
                    return _json_encode(record)
            elif kind == "string":
                value = _json_str(value) if type(value) is str else json.dumps(value)
            elif kind == "long_list":
                if not all(type(v) is int for v in value):
                    return _json_encode(record)
                value = "[" + ",".join(map(str, value)) + "]"
            else:  # replica_list
                value = _replicas_json(value)
                if value is None:
                    return _json_encode(record)
            values.append(value)
        return (template % tuple(values)).encode()
    return encode_record


def quorum_key(cluster_id: str, topic: str, partition: int) -> bytes:
    """The events topic's Kafka key of every record about one quorum: `cluster/topic-partition`."""
    return f"{cluster_id}/{topic}-{partition}".encode()


def record_key(record: Record) -> bytes:
    return quorum_key(record.cluster_id, record.topic, record.partition)


def key_of(cluster_id: str, topic: str, partition: int, replica: int | str) -> bytes:
    """`cluster/topic-partition/replica`: the per-replica key of the health topic's rows (and of
    events topics written before the per-quorum key; readers group by the values, not the key)."""
    return f"{cluster_id}/{topic}-{partition}/{replica}".encode()


@lru_cache(maxsize=4096)
def _json_str(s: str) -> str:
    return json.dumps(s)


def make_encoder(cls: type, **fixed: Any) -> Callable[..., bytes]:
    """A fast encoder for high-volume emitters. Fields given in `fixed` (e.g. cluster_id, topic)
    are encoded once into the template; the returned function takes the remaining fields'
    values in declaration order (plain Python values, lists for list fields) and returns the
    same bytes as `encode` would for the whole record."""
    specs = field_specs(cls)
    unknown = set(fixed) - {fs.name for fs in specs}
    if unknown:
        raise TypeError(f"{cls.TYPE} has no field(s) {', '.join(sorted(unknown))}")
    list_conv = {"long_list": lambda v: "[" + ",".join(map(str, v)) + "]",
                 "replica_list": lambda v: json.dumps([r if isinstance(r, dict) else dataclasses.asdict(r)
                                                       for r in v], separators=(",", ":")),
                 "string": _json_str}
    parts = ['{"type":%s,"version":%d' % (_json_str(cls.TYPE), VERSION)]
    convert: list[tuple[int, Callable[[Any], str]]] = []  # integers need none: %d formats them
    free = [fs for fs in specs if fs.name not in fixed]
    for fs in specs:
        if fs.name in fixed:
            value = fixed[fs.name]
            text = str(value) if fs.kind == "long" else list_conv[fs.kind](value)
            parts.append(',"%s":%s' % (fs.name, text.replace("%", "%%")))
        else:
            parts.append(',"%s":%s' % (fs.name, "%d" if fs.kind == "long" else "%s"))
    for i, fs in enumerate(free):
        if fs.kind != "long":
            convert.append((i, list_conv[fs.kind]))
    template = "".join(parts) + "}"
    n = len(free)

    def encode_values(*values: Any) -> bytes:
        if len(values) != n:
            raise TypeError(f"{cls.TYPE} encoder takes {n} values, got {len(values)}")
        if not convert:
            return (template % values).encode()
        args = list(values)
        for i, conv in convert:
            args[i] = conv(args[i])
        return (template % tuple(args)).encode()

    return encode_values


# --- the envelope: every record type's fields in one ------------------------------------------

def envelope_fields() -> dict[str, FieldSpec]:
    """Every field of every record type, by name (one name has one kind across all types).
    Where a field is optional in one type and required in another, the optional spec is kept,
    so readers of the envelope fill its default wherever it may be missing."""
    out: dict[str, FieldSpec] = {}
    for cls in RECORD_TYPES.values():
        for fs in field_specs(cls):
            seen = out.get(fs.name)
            if seen is None:
                out[fs.name] = fs
                continue
            if seen.kind != fs.kind:
                raise AssertionError(f"field {fs.name} has two kinds: {seen.kind} and {fs.kind}")
            if not fs.required and not seen.required and fs.default != seen.default:
                raise AssertionError(f"field {fs.name} has two defaults: {seen.default!r} and {fs.default!r}")
            if seen.required and not fs.required:
                out[fs.name] = fs
    return out


envelope_fields()  # fail at import if two record types disagree on a field's kind
