"""How fast the synthetic quorum publishes, against the raw producer rate of the same broker.

Prints events/s for: the raw confluent-kafka producer with pre-encoded records (the ceiling,
measured in this run), generation alone, and generate+publish with 1 and 2 processes, each
as a ratio of the ceiling. Workload: 200 clusters x 3 voters + 2 observers aiming at
100,000 events per synthetic second, run as fast as possible.

  .venv/bin/python benchmarks/synthetic_rate.py [--seconds 10]
"""
from __future__ import annotations

import argparse
import time

from confluent_kafka import Producer

from quorum.embedded_broker import EmbeddedBroker
from quorum.synthetic import SyntheticConfig, SyntheticQuorum, publish
from quorum.synthetic.command import append_interval_for_rate
from quorum.synthetic.publish import PRODUCER_DEFAULTS


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=10, help="synthetic seconds per measurement")
    args = p.parse_args()
    interval = append_interval_for_rate(100_000, 200, 3, 2)
    cfg = SyntheticConfig(clusters=200, voters=3, observers=2, append_interval_ms=interval, start_ms=1_700_000_000_000)
    duration_ms = int(args.seconds * 1000)

    q = SyntheticQuorum(cfg)
    t0 = time.perf_counter()
    records = list(q.events_until(cfg.start_ms + duration_ms))
    gen_rate = len(records) / (time.perf_counter() - t0)

    with EmbeddedBroker() as broker:
        broker.create_topic("ceiling", 8)
        producer = Producer({**PRODUCER_DEFAULTS, "bootstrap.servers": broker.bootstrap})
        t0 = time.perf_counter()
        for key, value, ts in records:
            while True:
                try:
                    producer.produce("ceiling", value, key, timestamp=ts)
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.flush(60)
        ceiling = len(records) / (time.perf_counter() - t0)
        rows = [("raw producer, pre-encoded (ceiling)", ceiling), ("generation only, 1 process", gen_rate)]
        for procs in (1, 2):
            topic = broker.create_topic(f"synth-{procs}", 8)
            stats, _ = publish(cfg, broker.bootstrap, topic, duration_ms=duration_ms, speed=0, processes=procs)
            rows.append((f"generate + publish, {procs} process(es)", stats.rate))
    print(f"{len(records):,} records per run ({cfg.events_per_second():,.0f} per synthetic second)")
    for name, rate in rows:
        print(f"{name:40} {rate:>10,.0f} events/s  {rate / ceiling:6.2f} x ceiling")


if __name__ == "__main__":
    main()
