"""Poll DescribeQuorum of any KRaft cluster and publish `quorum_snapshot` records, so that a
cluster we cannot modify (a real Kafka, say) is watched by the same streaming job as the
quorum nodes of this project.

  quorum collect --bootstrap-server kafka-1:9092 --interval-ms 1000 \\
      --events-bootstrap-server monitor:9092 --events-topic quorum-events

Uses kafka-python's admin client (describe_cluster for the cluster id,
describe_metadata_quorum for the quorum). A failed poll is logged and retried at the next
interval; publishing never blocks polling (bounded buffer, oldest dropped first).
"""
from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from typing import Any

from quorum import events

log = logging.getLogger(__name__)


def snapshot(result: dict[str, Any], cluster_id: str, source: str, now_ms: int,
             topic: str = "__cluster_metadata", partition: int = 0) -> events.QuorumSnapshot:
    """The QuorumSnapshot record of one describe_metadata_quorum() result."""
    from quorum.describe_tool import quorum_info
    info = quorum_info(result, topic, partition)

    def rs(r) -> events.ReplicaState:
        return events.ReplicaState(r.replica_id, r.log_end_offset, r.last_fetch_timestamp, r.last_caught_up_timestamp)
    return events.QuorumSnapshot(cluster_id=cluster_id, topic=topic, partition=partition, time_ms=now_ms,
                                 leader_id=info.leader_id, leader_epoch=max(info.leader_epoch, 0),
                                 high_watermark=info.high_watermark, voters=tuple(rs(v) for v in info.voters),
                                 observers=tuple(rs(o) for o in info.observers), source=source)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT",
                        help="any node or broker of the cluster to watch")
    parser.add_argument("--interval-ms", type=int, default=1000, help="poll interval (default 1000)")
    parser.add_argument("--events-bootstrap-server", required=True, metavar="HOST:PORT",
                        help="Kafka holding the events topic")
    parser.add_argument("--events-topic", default="quorum-events", help="the events topic (default quorum-events)")
    parser.add_argument("--cluster-id", help="cluster id to stamp on records (default: asked from the cluster)")
    parser.add_argument("--command-config", metavar="FILE",
                        help="client properties (security.protocol, sasl.*) for the watched cluster")
    parser.add_argument("--events-command-config", metavar="FILE",
                        help="client properties for the events topic's Kafka")
    parser.add_argument("--count", type=int, default=0, help="stop after this many snapshots (default: run forever)")
    parser.add_argument("--timeout-ms", type=int, default=5000, help="request timeout (default 5000)")


def run(args: argparse.Namespace) -> int:
    from kafka import KafkaAdminClient

    from quorum.describe_tool import DescribeError, admin_config
    from quorum.node.publisher import EventPublisher
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.interval_ms <= 0:
        print("error: --interval-ms must be positive", file=sys.stderr)
        return 2
    try:
        watched_cfg = admin_config(args.command_config)
        events_cfg = admin_config(args.events_command_config)
    except (OSError, DescribeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    publisher = EventPublisher(args.events_bootstrap_server, args.events_topic, client_config=events_cfg,
                               client_id="quorum-collector").start()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    admin = None
    cluster_id = args.cluster_id
    published = 0
    next_poll = time.monotonic()
    try:
        while not stop and (args.count <= 0 or published < args.count):
            time.sleep(max(0.0, next_poll - time.monotonic()))
            next_poll += args.interval_ms / 1000
            try:
                if admin is None:
                    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap_server,
                                             request_timeout_ms=args.timeout_ms, client_id="quorum-collector",
                                             **watched_cfg)
                if not cluster_id:
                    cluster_id = admin.describe_cluster().get("cluster_id") or "unknown"
                result = admin.describe_metadata_quorum()
                record = snapshot(result, cluster_id, args.bootstrap_server, int(time.time() * 1000))
            except Exception as e:  # the cluster is the thing being watched: its failures are data
                log.warning("DescribeQuorum on %s failed: %s: %s", args.bootstrap_server, type(e).__name__, e)
                if admin is not None and not isinstance(e, DescribeError):
                    admin.close()
                    admin = None
                continue
            publisher.publish(record)
            published += 1
    except KeyboardInterrupt:
        pass
    finally:
        if admin is not None:
            admin.close()
        publisher.close()
    if publisher.dropped_total:
        log.warning("%d snapshot(s) could not be published", publisher.dropped_total)
    return 0
