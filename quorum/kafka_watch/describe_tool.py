"""Print a KRaft quorum's status or replication state, as `kafka-metadata-quorum describe`
prints it. Works against a quorum node of this project or a real Kafka KRaft cluster:
it asks through kafka-python's admin client (DescribeQuorum, and DescribeCluster for the
cluster id), so any node can be the bootstrap server (list several: one that hangs costs about
a second, and another answers), or the controllers themselves
(`--bootstrap-controller`, KIP-919), on a PLAINTEXT, SSL or SASL listener alike.

  quorum describe --bootstrap-server localhost:9093 --status
  quorum describe --bootstrap-server localhost:9093 --replication --human-readable
  quorum describe --bootstrap-controller ctl-1:9093,ctl-2:9093 --command-config client.properties --status

--status: ClusterId, LeaderId, LeaderEpoch, HighWatermark, MaxFollowerLag (leader log end
minus the laggiest voter's), MaxFollowerLagTimeMs (leader's last caught-up time minus the
laggiest voter's; 0 when the laggiest is the leader, -1 when unknown), CurrentVoters and
CurrentObservers as Kafka 4.x prints them:
  [{"id": 1, "directoryId": "...", "endpoints": ["CONTROLLER://host:9093"]}, ...]
(directoryId left out when unknown, endpoints when the answer names none: DescribeQuorum v0/v1).
--replication: one row per replica (leader, then followers, then observers) with its
directory id (DescribeQuorum v2; AAAAAAAAAAAAAAAAAAAAAA when unknown), log end offset, lag,
last fetch and last caught-up timestamps (KIP-836); --human-readable prints them as
"N ms ago".
"""
from __future__ import annotations

import argparse
import logging
import sys
import time
from typing import Any

from quorum.events import UNKNOWN_DIRECTORY_ID
from quorum.kafka_client import kafka_client_properties, kafka_failures
from quorum.kafka_watch.quorum_info import DescribeError, QuorumInfo, Replica

STATUS_LABEL_WIDTH = 24  # labels are padded so values start in one column, as Kafka's tool does


def _leader(info: QuorumInfo) -> Replica | None:
    return next((v for v in info.voters if v.replica_id == info.leader_id), None)


def max_follower_lag(info: QuorumInfo) -> tuple[int, int]:
    """(MaxFollowerLag, MaxFollowerLagTimeMs): the laggiest voter is the one with the lowest
    log end offset."""
    leader = _leader(info)
    if leader is None or not info.voters:
        return -1, -1
    laggiest = min(info.voters, key=lambda v: v.log_end_offset)
    lag = leader.log_end_offset - laggiest.log_end_offset
    if laggiest.replica_id == leader.replica_id:
        return lag, 0
    if leader.last_caught_up_timestamp < 0 or laggiest.last_caught_up_timestamp < 0:
        return lag, -1
    return lag, leader.last_caught_up_timestamp - laggiest.last_caught_up_timestamp


def format_status(cluster_id: str, info: QuorumInfo) -> str:
    lag, lag_ms = max_follower_lag(info)
    rows = [("ClusterId", cluster_id), ("LeaderId", info.leader_id), ("LeaderEpoch", info.leader_epoch),
            ("HighWatermark", info.high_watermark), ("MaxFollowerLag", lag), ("MaxFollowerLagTimeMs", lag_ms),
            ("CurrentVoters", _replica_list(info, info.voters)),
            ("CurrentObservers", _replica_list(info, info.observers))]
    return "\n".join(f"{label + ':':<{STATUS_LABEL_WIDTH}}{value}" for label, value in rows)


def _replica_list(info: QuorumInfo, replicas: tuple[Replica, ...]) -> str:
    """Kafka 4.x's form: `[{"id": 1, "directoryId": "...", "endpoints": ["CONTROLLER://h:p"]}, ...]`."""
    items = []
    for r in replicas:
        parts = [f'"id": {r.replica_id}']
        if r.directory_id != UNKNOWN_DIRECTORY_ID:
            parts.append(f'"directoryId": "{r.directory_id}"')
        endpoints = info.nodes.get(r.replica_id, ())
        if endpoints:
            parts.append('"endpoints": [' + ", ".join(f'"{e}"' for e in endpoints) + "]")
        items.append("{" + ", ".join(parts) + "}")
    return "[" + ", ".join(items) + "]"


def relative_time(timestamp_ms: int, now_ms: int, what: str) -> str:
    if timestamp_ms < 0:
        return "-1"  # as Kafka's tool prints an unknown timestamp
    if timestamp_ms > now_ms:
        raise DescribeError(f"Error while computing relative time, possible drift in system clock.\n"
                            f"Current timestamp is {now_ms}, {what} timestamp is {timestamp_ms}")
    return f"{now_ms - timestamp_ms} ms ago"


REPLICATION_HEADER = ("NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status")


def replication_rows(info: QuorumInfo, human_readable: bool = False, now_ms: int | None = None) -> list[tuple]:
    leader = _leader(info)
    leader_leo = leader.log_end_offset if leader else -1
    ordered = ([(leader, "Leader")] if leader else []) + \
              [(v, "Follower") for v in info.voters if v is not leader] + \
              [(o, "Observer") for o in info.observers]
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    rows = []
    for r, status in ordered:
        fetch, caught_up = r.last_fetch_timestamp, r.last_caught_up_timestamp
        if human_readable:
            fetch = relative_time(fetch, now_ms, "last fetch")
            caught_up = relative_time(caught_up, now_ms, "last caught up")
        lag = leader_leo - r.log_end_offset if leader else -1
        rows.append((r.replica_id, r.directory_id, r.log_end_offset, lag, fetch, caught_up, status))
    return rows


def format_table(header: tuple, rows: list[tuple]) -> str:
    """Columns padded to their widest cell and separated by a tab, like Kafka's tools."""
    cells = [[str(c) for c in header]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "\n".join("\t".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)


def format_replication(info: QuorumInfo, human_readable: bool = False, now_ms: int | None = None) -> str:
    return format_table(REPLICATION_HEADER, replication_rows(info, human_readable, now_ms))


# --- command --------------------------------------------------------------------------------------

def fetch_quorum(bootstrap: str, config: dict[str, Any], timeout_ms: int) -> tuple[str, dict[str, Any]]:
    from kafka import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=timeout_ms,
                             client_id="quorum-describe", **config)
    try:
        cluster = admin.describe_cluster()
        return cluster.get("cluster_id") or "", admin.describe_metadata_quorum()
    finally:
        admin.close()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    path = parser.add_mutually_exclusive_group(required=True)
    path.add_argument("--bootstrap-server", metavar="HOST:PORT",
                      help="any node of the quorum (or any broker of a Kafka cluster); comma-separated for several, "
                           "asked in turn: one that hangs is passed over after a second at most")
    path.add_argument("--bootstrap-controller", metavar="HOST:PORT",
                      help="a Kafka cluster's controllers instead (KIP-919); --command-config applies to their "
                           "listener")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--status", action="store_true", help="print the quorum's summary")
    what.add_argument("--replication", action="store_true", help="print one row per replica")
    parser.add_argument("--human-readable", action="store_true",
                        help="with --replication: print timestamps as 'N ms ago'")
    parser.add_argument("--command-config", metavar="FILE",
                        help="Kafka client properties, the file kafka-metadata-quorum --command-config takes "
                             "(security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.*, ...)")
    parser.add_argument("--timeout-ms", type=int, default=10_000, help="request timeout (default 10000)")


def run(args: argparse.Namespace) -> int:
    from quorum.kafka_watch.collector import make_poller
    if args.human_readable and not args.replication:
        print("error: --human-readable applies to --replication only", file=sys.stderr)
        return 2
    # kafka-python logs every failed connection; the failure is named in the error below
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    client = "quorum describe's client of the controllers" if args.bootstrap_controller else \
        "quorum describe's admin client (kafka-python)"
    try:
        props = kafka_client_properties.merged(args.command_config, {})
        config = kafka_client_properties.kafka_python_config(props, client)
    except kafka_client_properties.ClientPropertiesError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    # the collector's poller: it moves on to another node when one is down, and names the
    # error of a quorum that cannot answer (NOT_LEADER_OR_FOLLOWER while no leader is elected)
    poller = make_poller(args, args.timeout_ms, config, want_cluster_id=args.status)
    try:
        outcome = poller.poll()
    finally:
        poller.close()
    if outcome.info is None:
        code = f" (error code {outcome.error_code})" if outcome.error_code >= 0 else ""
        leader = f", last known leader {outcome.leader_id} in epoch {outcome.leader_epoch}" \
            if outcome.leader_id >= 0 else ""
        explained = kafka_failures.explain(outcome.error, kafka_client_properties.principal(props))
        why = f"{outcome.error}{code}{leader}" + (f": {explained}" if explained != outcome.error else "")
        print(f"error: cannot describe the quorum at {poller.bootstrap}: {why}", file=sys.stderr)
        return 1
    try:
        out = format_status(outcome.cluster_id or "", outcome.info) if args.status else \
            format_replication(outcome.info, args.human_readable)
    except DescribeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(out)
    if args.status and not outcome.cluster_id and getattr(poller, "cluster_id_error", None):
        from quorum.kafka_watch.controller_poller import cluster_id_refusal
        print(f"note: {cluster_id_refusal(poller.cluster_id_error, kafka_client_properties.principal(props))}; "
              f"ClusterId is left empty", file=sys.stderr)
    return 0
