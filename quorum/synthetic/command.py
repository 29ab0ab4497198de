"""Publish a synthetic quorum's contract records (fetch, metrics, state_change) to a Kafka topic.

N clusters x M voters + K observers behave like running KRaft quorums: followers long-poll the
leader, the leader writes a NoOp every 500 ms when idle and metrics go out every second. Faults
are scripted on a timeline with --fault KIND@START+DURATION[:cluster-N[/REPLICA]], e.g.

  quorum synth --bootstrap-server 127.0.0.1:9092 --fault stall@30s+20s:cluster-0/2
  quorum synth --clusters 200 --voters 3 --observers 2 --rate 100000 --speed 0 --duration 60s --processes 2

Fault kinds: stall, cutoff, leader_partition, hw_stall, election_storm, split_brain (--list-faults
says what each does). The ground-truth timeline (faults, elections, truncations) can be written
as JSON lines with --timeline FILE.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import sys

from quorum.kafka_client import kafka_client_properties
from quorum.local_kafka.kafka_broker import ensure_topic
from quorum.synthetic.faults import FAULT_KINDS, FaultSpecError, demo_faults, parse_duration_ms, parse_fault
from quorum.synthetic.config import SyntheticConfig
from quorum.synthetic.publish import PublishError, publish

DEFAULT_TOPIC = "quorum-events"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", default="127.0.0.1:9092", help="Kafka bootstrap server (default %(default)s)")
    p.add_argument("--topic", default=DEFAULT_TOPIC, help="events topic (default %(default)s)")
    p.add_argument("--partitions", type=int, default=8,
                   help="partitions if the topic has to be created (default %(default)s)")
    p.add_argument("--clusters", type=int, default=1, help="number of quorums (default %(default)s)")
    p.add_argument("--voters", type=int, default=3, help="voters per quorum (default %(default)s)")
    p.add_argument("--observers", type=int, default=1, help="observers per quorum (default %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="random seed; the same seed replays the same run")
    p.add_argument("--fault", action="append", default=[], metavar="SPEC",
                   help="KIND@START+DURATION[:cluster-N[/REPLICA]]; repeatable")
    p.add_argument("--demo-faults", action="store_true", help="one of each fault on cluster-0 in the first 4 minutes")
    p.add_argument("--list-faults", action="store_true", help="describe the fault kinds and exit")
    rate = p.add_mutually_exclusive_group()
    rate.add_argument("--append-interval-ms", type=int, default=None,
                      help="workload: the leader appends a batch this often (default: idle, NoOps only)")
    rate.add_argument("--rate", type=float, default=None, metavar="EVENTS_PER_S",
                      help="aim for this many events per second of synthetic time (sets the append interval)")
    p.add_argument("--speed", type=float, default=1.0,
                   help="synthetic seconds per wall-clock second; 0 = as fast as possible (default %(default)s)")
    p.add_argument("--duration", default=None, help="synthetic time to run, e.g. 10m (default: until Ctrl-C)")
    p.add_argument("--processes", type=int, default=1, help="generator processes, clusters split between them")
    p.add_argument("--timeline", default=None, metavar="FILE", help="write the ground-truth timeline as JSON lines")
    p.add_argument("--producer-config", action="append", default=[], metavar="KEY=VALUE",
                   help="extra librdkafka producer tuning (compression.type=lz4, linger.ms=50); repeatable. "
                        "Security settings go in --command-config, never on the command line")
    p.add_argument("--command-config", metavar="FILE",
                   help="Kafka client properties (security.protocol, sasl.jaas.config, ssl.truststore.*), as "
                        "Kafka's tools take them; the principal needs WRITE on the topic")


def append_interval_for_rate(rate: float, clusters: int, voters: int, observers: int,
                             metrics_interval_ms: int = 1000) -> int:
    """Each workload append makes every follower and observer fetch once."""
    fetchers = clusters * (voters - 1 + observers)
    metrics_rate = clusters * (voters + observers) * 1000 / metrics_interval_ms
    if fetchers == 0 or rate <= metrics_rate:
        raise ValueError(f"--rate {rate:g} is below the metrics rate alone ({metrics_rate:g}/s) or there are "
                         f"no followers to fetch")
    return max(1, round(1000 * fetchers / (rate - metrics_rate)))


def run(args: argparse.Namespace) -> int:
    if args.list_faults:
        for kind, text in FAULT_KINDS.items():
            print(f"{kind:18} {text}")
        return 0
    try:
        faults = [parse_fault(s) for s in args.fault] + (demo_faults(args.voters) if args.demo_faults else [])
        interval = args.append_interval_ms
        if args.rate is not None:
            interval = append_interval_for_rate(args.rate, args.clusters, args.voters, args.observers)
        config = SyntheticConfig(clusters=args.clusters, voters=args.voters, observers=args.observers,
                                 seed=args.seed, append_interval_ms=interval, faults=tuple(faults))
        duration_ms = parse_duration_ms(args.duration) if args.duration else None
        producer_config = dict(kv.split("=", 1) for kv in args.producer_config)
        secret = [k for k in producer_config if k.split(".")[0] in ("sasl", "ssl", "security")]
        if secret:
            raise ValueError(f"--producer-config {secret[0]}: security settings go in --command-config FILE "
                             f"(command lines are visible to every user of the machine)")
        if args.command_config:
            props = kafka_client_properties.load_file(args.command_config)
            producer_config.update(kafka_client_properties.librdkafka_config(
                props, "quorum synth's producer (librdkafka)"))
    except (FaultSpecError, ValueError) as e:
        print(f"quorum synth: {e}", file=sys.stderr)
        return 2
    if args.speed == 0 and duration_ms is None:
        print("quorum synth: --speed 0 needs --duration", file=sys.stderr)
        return 2
    security = {k: v for k, v in producer_config.items() if k.split(".")[0] in ("sasl", "ssl", "security")}
    ensure_topic(args.bootstrap_server, args.topic, args.partitions, client_config=security)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    print(f"synthetic quorum: {config.clusters} cluster(s) x {config.voters} voters + {config.observers} observers, "
          f"~{config.events_per_second():,.0f} events per synthetic second, speed {args.speed:g}, "
          f"{len(faults)} fault(s) -> {args.topic} on {args.bootstrap_server}", file=sys.stderr, flush=True)

    def progress(stats):
        print(f"  {stats.records:,} records, {stats.synthetic_ms / 1000:,.0f} s synthetic, "
              f"{stats.rate:,.0f}/s", file=sys.stderr, flush=True)

    try:
        stats, timeline = publish(config, args.bootstrap_server, args.topic, duration_ms, args.speed,
                                  args.processes, producer_config, progress, should_stop=lambda: bool(stopping))
    except KeyboardInterrupt:
        return 130
    except PublishError as e:
        print(f"quorum synth: {e}", file=sys.stderr)
        return 1
    print(f"published {stats.records:,} records in {stats.wall_s:.1f} s ({stats.rate:,.0f}/s), "
          f"{stats.synthetic_ms / 1000:,.1f} s of synthetic time", file=sys.stderr)
    if args.timeline:
        with open(args.timeline, "w") as f:
            for entry in timeline:
                f.write(json.dumps(dataclasses.asdict(entry)) + "\n")
    return 0
