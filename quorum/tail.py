"""Print the events topic as a console view: one compact line per record, invalid ones marked.

  quorum tail --bootstrap-server 127.0.0.1:9092 --topic quorum-events [--from-beginning] [--type fetch]
"""
from __future__ import annotations

import argparse
import sys
import time
import uuid

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaException, TopicPartition

from quorum import events


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", default="127.0.0.1:9092", help="Kafka bootstrap server (default %(default)s)")
    p.add_argument("--topic", default="quorum-events", help="events topic (default %(default)s)")
    p.add_argument("--from-beginning", action="store_true", help="start at the earliest record, not the newest")
    p.add_argument("--type", action="append", choices=list(events.RECORD_TYPES), help="only these record types")
    p.add_argument("--max", type=int, default=None, help="stop after this many records")


def describe(record: events.Record) -> str:
    """One line a person can scan."""
    t = time.strftime("%H:%M:%S", time.gmtime(record.time_ms / 1000)) + f".{record.time_ms % 1000:03d}"
    where = f"{record.cluster_id}/{record.topic}-{record.partition}"
    if isinstance(record, events.Fetch):
        lag = record.leader_log_end_offset - record.fetch_offset
        return (f"{t} {where} fetch    r{record.replica_id} ({record.replica_role}) -> leader {record.leader_id} "
                f"e{record.leader_epoch}: offset {record.fetch_offset} lag {lag} hw {record.high_watermark} "
                f"{record.outcome}")
    if isinstance(record, events.Metrics):
        return (f"{t} {where} metrics  n{record.node_id} {record.state:10} leader {record.leader_id} e{record.epoch} "
                f"leo {record.log_end_offset} hw {record.high_watermark} lag {record.last_applied_lag_ms} ms")
    if isinstance(record, events.StateChange):
        return (f"{t} {where} state    n{record.node_id} {record.from_state} -> {record.to_state} e{record.epoch} "
                f"leader {record.leader_id}: {record.reason}")
    if isinstance(record, events.QuorumPollError):
        return (f"{t} {where} pollerr  {record.error} (code {record.error_code}) from {record.source} "
                f"by n{record.answered_by} in {record.latency_ms} ms, leader {record.leader_id} e{record.leader_epoch}")
    voters = " ".join(f"{r.replica_id}@{r.log_end_offset}" for r in record.voters)
    return (f"{t} {where} snapshot leader {record.leader_id} e{record.leader_epoch} hw {record.high_watermark} "
            f"voters {voters} by n{record.answered_by} in {record.latency_ms} ms")


def run(args: argparse.Namespace) -> int:
    consumer = Consumer({"bootstrap.servers": args.bootstrap_server, "group.id": f"quorum-tail-{uuid.uuid4().hex}",
                         "enable.auto.commit": False})
    # assign rather than subscribe: no group rebalance to wait for before the first line
    metadata = consumer.list_topics(args.topic, timeout=10).topics.get(args.topic)
    if metadata is None or metadata.error is not None:
        print(f"quorum tail: topic {args.topic!r} not found on {args.bootstrap_server}", file=sys.stderr)
        return 1
    start = OFFSET_BEGINNING if args.from_beginning else OFFSET_END
    consumer.assign([TopicPartition(args.topic, p, start) for p in metadata.partitions])
    shown = 0
    try:
        while args.max is None or shown < args.max:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                print(f"! {msg.error()}", file=sys.stderr)
                continue
            try:
                record = events.decode(msg.value())
            except events.ContractError as e:
                print(f"INVALID p{msg.partition()}@{msg.offset()}: {e}", flush=True)
                shown += 1
                continue
            if args.type and record.TYPE not in args.type:
                continue
            print(describe(record), flush=True)
            shown += 1
    except KeyboardInterrupt:
        pass
    except KafkaException as e:
        print(f"quorum tail: {e}", file=sys.stderr)
        return 1
    finally:
        consumer.close()
    return 0
