"""Print the events topic as a console view: one compact line per record, invalid ones marked.

  quorum tail --bootstrap-server 127.0.0.1:9092 --topic quorum-events [--from-beginning] [--type fetch]
"""
from __future__ import annotations

import argparse
import sys
import time
import uuid

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, KafkaException, TopicPartition

from quorum import events
from quorum.kafka_client import kafka_client_properties, kafka_failures

CLIENT = "quorum tail's consumer (librdkafka)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", default="127.0.0.1:9092", help="Kafka bootstrap server (default %(default)s)")
    p.add_argument("--topic", default="quorum-events", help="events topic (default %(default)s)")
    p.add_argument("--from-beginning", action="store_true", help="start at the earliest record, not the newest")
    p.add_argument("--type", action="append", choices=list(events.RECORD_TYPES), help="only these record types")
    p.add_argument("--max", type=int, default=None, help="stop after this many records")
    p.add_argument("--command-config", metavar="FILE",
                   help="Kafka client properties (security.protocol, sasl.mechanism, sasl.jaas.config, "
                        "ssl.truststore.*, ...), as Kafka's tools take them; the principal needs READ on the topic")


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
    try:
        props = kafka_client_properties.merged(args.command_config, {})
        security = kafka_client_properties.librdkafka_config(props, CLIENT)
    except kafka_client_properties.ClientPropertiesError as e:
        print(f"quorum tail: error: {e}", file=sys.stderr)
        return 2
    failures = kafka_failures.LibrdkafkaErrors()
    consumer = Consumer({"bootstrap.servers": args.bootstrap_server, "group.id": f"quorum-tail-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "error_cb": failures, "log_level": 0, **security})
    # assign rather than subscribe: no group rebalance to wait for before the first line
    try:
        metadata = consumer.list_topics(args.topic, timeout=10).topics.get(args.topic)
    except KafkaException as e:
        metadata, failure = None, e.args[0]
        if kafka_failures.librdkafka_name(failure):
            failures(failure)
    if metadata is None or metadata.error is not None:
        consumer.poll(0.5)  # librdkafka hands its errors (a refused login) to error_cb only from poll
    if metadata is None or metadata.error is not None or failures.last is not None:
        name = failures.last[0] if failures.last else (
            metadata.error.name() if metadata is not None and metadata.error is not None else None)
        principal = kafka_client_properties.principal(props)
        why = f"{name}: {kafka_failures.explain(name, principal, f'READ on the topic {args.topic}')}" if name \
            else "not found"
        print(f"quorum tail: topic {args.topic!r} on {args.bootstrap_server}: {why}", file=sys.stderr)
        consumer.close()
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
                # librdkafka looks up the group's coordinator though the tail reads by assignment and
                # never commits: a principal without READ on the group loses nothing
                if msg.error().code() != KafkaError.GROUP_AUTHORIZATION_FAILED:
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
