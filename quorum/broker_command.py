"""Run the embedded Kafka-compatible broker (Tansu, in memory) in the foreground until Ctrl-C,
creating the events topic. For local runs only: nothing it holds survives a stop.

  quorum broker --port 9092 --topic quorum-events --partitions 8
"""
from __future__ import annotations

import argparse
import signal
import sys
import threading

from quorum.embedded_broker import BrokerError, EmbeddedBroker


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", type=int, default=9092, help="loopback port (default %(default)s; 0 picks a free one)")
    p.add_argument("--topic", action="append", default=None,
                   help="topic to create (default quorum-events); repeatable")
    p.add_argument("--partitions", type=int, default=8, help="partitions per created topic (default %(default)s)")
    p.add_argument("--log", default=None, help="file for the broker's own log")


def run(args: argparse.Namespace) -> int:
    broker = EmbeddedBroker(port=args.port or None, log_path=args.log)
    try:
        broker.start()
        for topic in args.topic or ["quorum-events"]:
            broker.create_topic(topic, args.partitions)
    except BrokerError as e:
        print(f"quorum broker: {e}", file=sys.stderr)
        return 1
    print(f"broker ready on {broker.bootstrap} (pid {broker.pid}); Ctrl-C stops it", flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    try:
        done.wait()
    except KeyboardInterrupt:
        pass
    finally:
        broker.stop()
    return 0
