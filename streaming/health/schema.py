"""The rows the health processor emits: one flat schema, one `kind` per row.

Every evaluation of a quorum (on input or on a timer tick) emits its `quorum` row, and a
`replica` row for each replica whose shown values changed. Events ride along: `transition` (a
replica's or the quorum's status changed, with the replica's `cause`), `cause` (a replica's
status stayed but its cause changed, e.g. `unknown` -> `partitioned` as evidence came in; or the
quorum's: `network_partition` while its reason names one, null otherwise), `window` (a caught-up, lagging or
unknown interval of a replica closed: the caught-up windows, one row per interval; the open
intervals stay in state and give `caught_up_ratio`), `truncation` (a replica's log end offset went
backwards), `forget` (the quorum or a replica was dropped from state, so sinks remove its series),
`voter_set` (the voter set in force changed), `incarnation` (the cluster was formatted anew under
the same id), `replaced` (a replica id came back with another directory id) and `rejected` (a
record the state machine refused: `status` is the reason code, e.g. `implausible_epoch`).
Columns that do not apply to a kind are null. `seq` orders one quorum's evaluations; every event
row has its own `event_seq`, consecutive per quorum and kept in the state store, so a batch
replayed after a restart emits its events with the same numbers and a consumer can drop them.
Times are epoch milliseconds on the quorum's clock (its records' event time, extrapolated by
processing time while the quorum is silent); ages are milliseconds.
"""
from __future__ import annotations

import json

from pyspark.sql import types as T

from . import codec

KINDS = ("quorum", "replica", "transition", "cause", "window", "truncation", "forget", "voter_set", "incarnation",
         "replaced", "rejected")
EVENT_KINDS = KINDS[2:]
# Records Spark's fast path did not accept ride to the processor raw (`raw_records`), under their
# quorum key, or under this one, which no quorum can have (the contract forbids an empty cluster
# id), when Spark could read no key from them. The processor decides each with the contract's
# decoder and hands a reject back as a `dead_letter` row: its reason code in `status`, its JSON
# line in `dead_letter`; it keeps no state for a key that sent only rejects. The batch writer
# takes these rows out before anything else sees the batch.
DEAD_LETTER_KIND = "dead_letter"
DEAD_LETTER_KEY = ("", "", -1)

HEALTH_FIELDS: list[tuple[str, T.DataType, str]] = [
    ("kind", T.StringType(), "one of KINDS"),
    ("cluster_id", T.StringType(), "cluster id"),
    ("topic", T.StringType(), "quorum topic"),
    ("partition", T.LongType(), "quorum topic partition"),
    ("seq", T.LongType(), "evaluation counter of this quorum (orders its rows)"),
    ("event_seq", T.LongType(), "event rows: per-quorum sequence number (consecutive; replays repeat it)"),
    ("now_ms", T.LongType(), "the quorum's clock at evaluation"),
    ("proc_ms", T.LongType(), "processing time of the micro-batch that evaluated it"),
    ("last_input_proc_ms", T.LongType(), "processing time of the last batch with input for this quorum"),
    ("silent", T.BooleanType(), "evaluated on a timer with no input for this quorum in this batch"),
    ("replica_id", T.LongType(), "replica (null on quorum rows)"),
    ("role", T.StringType(), "voter | observer (replica rows)"),
    ("status", T.StringType(), "current status (replica, quorum, transition rows)"),
    ("previous_status", T.StringType(), "status before a transition"),
    ("reason", T.StringType(), "why the status or event, in a few words, with the evidence"),
    ("cause", T.StringType(), "replica and transition rows: why it is not caught up (statuses.CAUSES; null when it is)"),
    ("previous_cause", T.StringType(), "cause rows: the cause before (the status stayed, the evidence told more)"),
    # replica
    ("log_end_offset", T.LongType(), "replica's log end offset as the leader last saw it (-1 unknown)"),
    ("lag_records", T.LongType(), "leader log end offset - replica log end offset (null unknown)"),
    ("lag_ms", T.LongType(), "now - last caught-up time (null unknown)"),
    ("last_fetch_ms", T.LongType(), "leader time of the last valid fetch (-1 never)"),
    ("last_fetch_age_ms", T.LongType(), "now - last_fetch_ms (null never)"),
    ("last_caught_up_ms", T.LongType(), "KIP-836 last caught-up time (-1 never)"),
    ("caught_up_ratio", T.DoubleType(), "fraction of the observed horizon spent caught up"),
    ("truncations_total", T.LongType(), "truncation events of this replica"),
    ("truncated_records_total", T.LongType(), "records lost to truncation by this replica"),
    # quorum
    ("leader_id", T.LongType(), "current leader (-1 none)"),
    ("leader_epoch", T.LongType(), "current epoch (confirmed by a voter or a majority)"),
    ("high_watermark", T.LongType(), "highest high watermark seen (-1 unknown)"),
    ("hw_age_ms", T.LongType(), "now - time the high watermark last advanced (null unknown)"),
    ("leader_log_end_offset", T.LongType(), "leader's latest log end offset (-1 unknown)"),
    ("voters", T.LongType(), "voter count"),
    ("voters_caught_up", T.LongType(), "voters caught up (leader included)"),
    ("voters_reachable", T.LongType(), "voters fetching or leading"),
    ("majority_reachable", T.BooleanType(), "voters_reachable > voters / 2"),
    ("fault_tolerance", T.LongType(), "voters that may still fail before the majority is lost: voters_reachable - "
                                      "(voters / 2 + 1), negative once it is lost (null while a voter is unknown)"),
    ("poll_error", T.StringType(), "the collector's error while its DescribeQuorum polls fail (timeout, "
                                   "connection_refused, NOT_LEADER_OR_FOLLOWER, ...); null while they answer"),
    ("poll_failures", T.LongType(), "the collector's failed polls in a row (0 while they answer; null: no collector)"),
    ("elections_total", T.LongType(), "epoch bumps seen (a failover with split votes counts each)"),
    ("epoch_changes_window", T.LongType(), "epoch adoptions within storm_window_ms"),
    ("leader_changes_total", T.LongType(), "new leaders seen (the first one excepted)"),
    ("leader_changes_window", T.LongType(), "new leaders within storm_window_ms (the storm rule)"),
    ("candidate_epoch", T.LongType(), "highest epoch voters campaign for above the current one (-1 none)"),
    ("incarnation", T.LongType(), "times the cluster was seen formatted anew under the same id"),
    ("voter_ids", T.StringType(), "the voter set in force, comma-separated"),
    ("voter_set_changes_total", T.LongType(), "changes of the voter set in force seen"),
    ("network_partition", T.BooleanType(), "voters alive but cut off from the leader (or the leader from all)"),
    ("leader_side_voters", T.StringType(), "voters fetching from the leader, leader included, comma-separated"),
    ("cut_off_voters", T.StringType(), "voters alive but not reaching the leader, comma-separated"),
    ("leaders_claimed", T.LongType(), "nodes claiming leadership of the current epoch"),
    ("zombie_leaders", T.LongType(), "nodes claiming leadership of an older epoch, still talking"),
    # events
    ("records_lost", T.LongType(), "truncation: records cut from the replica's uncommitted tail"),
    ("window_start_ms", T.LongType(), "window: interval start (its `status`: caught_up, lagging or unknown)"),
    ("window_end_ms", T.LongType(), "window: interval end"),
    ("dead_letter", T.StringType(), "dead_letter rows: the rejected record (reason, field, raw bytes, Kafka "
                                    "position) as one JSON line; its reason code is in `status`"),
]

HEALTH_SCHEMA = T.StructType([T.StructField(name, dtype) for name, dtype, _ in HEALTH_FIELDS])
HEALTH_COLUMNS = [name for name, _, _ in HEALTH_FIELDS]

# What leaves the processor's Python worker: each health row as one JSON text, expanded into
# HEALTH_SCHEMA by Spark (from_json). PySpark turns a row-based processor's output into Arrow
# once per key (the schema's Arrow type, a record batch, a struct wrapper: about 900 us a key
# for the 52 columns, 200 us for one, measured), and a job watching 200 quorums pays it 200
# times a batch.
HEALTH_JSON = "health_json"
PACKED_HEALTH_SCHEMA = T.StructType([T.StructField(HEALTH_JSON, T.StringType())])
_HEALTH_SET = frozenset(HEALTH_COLUMNS)

# What the processor reads from the decoded events (a subset of the envelope schema).
INPUT_COLUMNS = ["type", "cluster_id", "topic", "partition", "time_ms", "leader_id", "leader_epoch",
                 "replica_id", "replica_role", "fetch_offset", "leader_log_end_offset", "high_watermark",
                 "outcome", "last_fetch_timestamp_ms", "last_caught_up_timestamp_ms", "node_id", "state", "epoch",
                 "log_end_offset", "voter_set", "from_state", "to_state",
                 "voters", "observers", "poll_interval_ms", "latency_ms", "answered_by", "error_code", "error",
                 "source", "refused_nodes",
                 "_kafka_partition", "_offset"]  # where the record was: one quorum's arrival order
KEY_COLUMNS = ["cluster_id", "topic", "partition"]

# What crosses into the processor's Python worker: the quorum key and the record as one JSON
# text (Spark's to_json, null fields left out). Spark hands a row-based processor its input cell
# by cell, each cell an Arrow scalar made and converted on its own (about 2 us a cell, measured):
# 29 columns cost about 70 us a record, four cost about a tenth of that, and json.loads of one
# record (codec.loads) about one and a half.
RECORD_JSON = "record_json"  # no leading underscore: the pandas flavour renames such columns (_3)
PACKED_COLUMNS = KEY_COLUMNS + [RECORD_JSON]
_REPLICA_FIELDS = ("replica_id", "log_end_offset", "last_fetch_timestamp_ms", "last_caught_up_timestamp_ms",
                   "directory_id")
_EMPTY_RECORD = dict.fromkeys(INPUT_COLUMNS)
_EMPTY_HEALTH_ROW = dict.fromkeys(HEALTH_COLUMNS)


def pack_record(record: dict) -> str:
    """A record's packed form as Spark's to_json writes it (for tests and tools without Spark)."""
    def present(value):
        if isinstance(value, dict):
            return {k: present(v) for k, v in value.items() if v is not None}
        if isinstance(value, list):
            return [present(v) for v in value]
        return value
    return json.dumps({c: present(record[c]) for c in INPUT_COLUMNS if record.get(c) is not None},
                      separators=(",", ":"))


def pack_health_row(row: dict) -> str:
    """A health row as the processor emits it: its schema columns that are not null."""
    return codec.dumps({c: v for c, v in row.items() if v is not None and c in _HEALTH_SET})


def unpack_health_row(text: str) -> dict:
    """A packed health row with every schema column (None when absent), as Spark expands it."""
    return {**_EMPTY_HEALTH_ROW, **codec.loads(text)}


def unpack_record(text: str) -> dict:
    """The record as the tracker reads it: every input column present (None when absent), and
    every replica of a snapshot with all of its fields."""
    record = {**_EMPTY_RECORD, **codec.loads(text)}
    for group in ("voters", "observers"):
        if record[group] is not None:
            record[group] = [{**dict.fromkeys(_REPLICA_FIELDS), **r} for r in record[group]]
    return record
