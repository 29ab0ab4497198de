"""Append records to a quorum through its leader and print their committed offsets.

Uses Kafka's Produce API with kafka-python's producer (acks=all): a node that is not the
leader answers NOT_LEADER_OR_FOLLOWER and the producer follows the leader named in the
refreshed metadata, so any node can be the bootstrap server. An offset is printed only
once the record is committed (below the high watermark).

  quorum append --bootstrap-server 127.0.0.1:9093 hello world
  quorum append --bootstrap-server 127.0.0.1:9093 --count 1000 --batch 100
"""
from __future__ import annotations

import argparse
import sys
import time


def make_producer(bootstrap: str, linger_ms: int = 60_000, timeout_ms: int = 10_000, acks: str | int = "all",
                  retries: int = 10):
    """acks=all: offsets are committed ones; acks=1: on the leader's disk, maybe never committed.
    The long linger is deliberate: callers send a chunk and `flush()`, which sends the whole
    chunk as one request at once (a short linger would split it over several requests,
    each waiting for its own commit with one request in flight)."""
    from kafka import KafkaProducer
    return KafkaProducer(bootstrap_servers=bootstrap, acks=acks, enable_idempotence=False, linger_ms=linger_ms,
                         retries=retries, retry_backoff_ms=100, request_timeout_ms=timeout_ms,
                         max_in_flight_requests_per_connection=1, client_id="quorum-append",
                         batch_size=1 << 20, max_block_ms=timeout_ms)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="any node of the quorum")
    parser.add_argument("--topic", default="__cluster_metadata", help="the quorum topic (default __cluster_metadata)")
    parser.add_argument("values", nargs="*", help="record values to append (default: generated)")
    parser.add_argument("--count", type=int, default=None, help="append this many generated records")
    parser.add_argument("--batch", type=int, default=1, help="records per request (default 1)")
    parser.add_argument("--timeout-ms", type=int, default=10_000)


def run(args: argparse.Namespace) -> int:
    values = [v.encode() for v in args.values]
    if args.count is not None:
        values += [f"record-{i}".encode() for i in range(args.count)]
    if not values:
        print("error: give record values or --count", file=sys.stderr)
        return 2
    try:
        producer = make_producer(args.bootstrap_server, timeout_ms=args.timeout_ms)
    except Exception as e:
        print(f"error: cannot reach {args.bootstrap_server}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    try:
        for start in range(0, len(values), max(args.batch, 1)):
            chunk = values[start:start + max(args.batch, 1)]
            t0 = time.perf_counter()
            futures = [producer.send(args.topic, value=v, partition=0) for v in chunk]
            producer.flush(timeout=args.timeout_ms / 1000)
            ms = (time.perf_counter() - t0) * 1000
            offsets = [f.get(timeout=args.timeout_ms / 1000).offset for f in futures]
            print(f"committed offsets {offsets[0]}..{offsets[-1]} ({len(offsets)} records, {ms:.1f} ms)")
    except Exception as e:
        print(f"error: append failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    finally:
        producer.close(timeout=2)
    return 0
