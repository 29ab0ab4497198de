"""Run Apache Kafka on loopback in the foreground until Ctrl-C (one node, broker and
controller, KRaft), creating the events topic. For local runs: with --data-dir its topics
survive a restart, otherwise it keeps them in a temporary directory removed at the stop.

  quorum broker --port 9092 --topic quorum-events --partitions 8
"""
from __future__ import annotations

import argparse
import signal
import sys
import threading

from quorum.jvm import JvmPartsMissing
from quorum.local_kafka.kafka_broker import BrokerError, KafkaBroker


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", type=int, default=9092, help="loopback port (default %(default)s; 0 picks a free one)")
    p.add_argument("--topic", action="append", default=None,
                   help="topic to create (default quorum-events); repeatable")
    p.add_argument("--partitions", type=int, default=8, help="partitions per created topic (default %(default)s)")
    p.add_argument("--data-dir", default=None,
                   help="directory for Kafka's data, configuration and log (default: a temporary one)")
    p.add_argument("--log", default=None, help="file for Kafka's own log (default: kafka.log in the data directory)")


def run(args: argparse.Namespace) -> int:
    broker = KafkaBroker(port=args.port or None, data_dir=args.data_dir, log_path=args.log)
    try:
        broker.start()
        for topic in args.topic or ["quorum-events"]:
            broker.create_topic(topic, args.partitions)
    except (BrokerError, JvmPartsMissing) as e:
        print(f"quorum broker: {e}", file=sys.stderr)
        return 1
    print(f"Kafka ready on {broker.bootstrap} (pid {broker.pid}, log {broker.log_path}); Ctrl-C stops it",
          flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    try:
        done.wait()
    except KeyboardInterrupt:
        pass
    finally:
        broker.stop()
    return 0
