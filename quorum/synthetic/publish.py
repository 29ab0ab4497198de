"""Publish a synthetic quorum's records to Kafka with confluent-kafka (librdkafka), paced
against the wall clock (`speed` synthetic seconds per second; 0 = as fast as possible)."""
from __future__ import annotations

import dataclasses
import multiprocessing
import time
from dataclasses import dataclass
from typing import Callable

from confluent_kafka import Producer

from quorum.synthetic.config import SyntheticConfig
from quorum.synthetic.model import SyntheticQuorum

# Same partitioner as Kafka's Java client and kafka-python (murmur2), so a quorum's key lands
# in the same partition whichever client published it (tests/contract/test_events.py proves it).
PRODUCER_DEFAULTS = {
    "partitioner": "murmur2_random",
    "linger.ms": 20,
    "batch.num.messages": 10000,
    "queue.buffering.max.messages": 500000,
    "queue.buffering.max.kbytes": 1048576,
    "delivery.report.only.error": True,
    # idempotence keeps each key's records in order and single through the producer's retries,
    # which a loaded machine does trigger; the job's ground truth assumes both
    "enable.idempotence": True,
}
STEP_MS = 50  # synthetic time generated per step when paced


class PublishError(RuntimeError):
    pass


@dataclass
class PublishStats:
    records: int = 0
    failed: int = 0
    synthetic_ms: int = 0
    wall_s: float = 0.0

    @property
    def rate(self) -> float:
        return self.records / self.wall_s if self.wall_s > 0 else 0.0

    def merge(self, other: "PublishStats") -> "PublishStats":
        return PublishStats(self.records + other.records, self.failed + other.failed,
                            max(self.synthetic_ms, other.synthetic_ms), max(self.wall_s, other.wall_s))


def _publish_one(quorum: SyntheticQuorum, bootstrap: str, topic: str, duration_ms: int | None, speed: float,
                 producer_config: dict | None, progress: Callable[[PublishStats], None] | None,
                 should_stop: Callable[[], bool]) -> PublishStats:
    errors: list[str] = []

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(str(err))

    producer = Producer({**PRODUCER_DEFAULTS, "bootstrap.servers": bootstrap, **(producer_config or {})})
    produce, poll = producer.produce, producer.poll
    stats = PublishStats()
    start_wall = time.monotonic()
    start = quorum.start_ms
    end = start + duration_ms if duration_ms is not None else None
    synthetic = start
    last_progress = start_wall
    while (end is None or synthetic < end) and not should_stop():
        if speed > 0:
            target = start + int((time.monotonic() - start_wall) * 1000 * speed)
            if target <= synthetic:
                time.sleep(min(STEP_MS / 1000, (synthetic - target + 1) / 1000 / speed))
                continue
        else:
            target = synthetic + 1000
        if end is not None:
            target = min(target, end)
        for key, value, t in quorum.events_until(target):
            while True:
                try:
                    produce(topic, value, key, timestamp=t, on_delivery=on_delivery)
                    break
                except BufferError:
                    poll(0.05)
            stats.records += 1
        poll(0)
        synthetic = target
        now = time.monotonic()
        if progress and now - last_progress >= 5:
            stats.synthetic_ms, stats.wall_s = synthetic - start, now - start_wall
            progress(stats)
            last_progress = now
    remaining = producer.flush(60)
    stats.failed = len(errors) + remaining
    stats.synthetic_ms, stats.wall_s = synthetic - start, time.monotonic() - start_wall
    if stats.failed:
        raise PublishError(f"{stats.failed} of {stats.records} records were not delivered to {topic} on "
                           f"{bootstrap}: {errors[:3]}")
    return stats


def publish(config: SyntheticConfig, bootstrap: str, topic: str, duration_ms: int | None = None,
            speed: float = 1.0, processes: int = 1, producer_config: dict | None = None,
            progress: Callable[[PublishStats], None] | None = None,
            should_stop: Callable[[], bool] = lambda: False) -> tuple[PublishStats, list]:
    """Generate and publish; returns the stats and the ground-truth timeline. With `processes` > 1
    the clusters are split between processes (each its own generator and producer), for rates
    above what one Python process produces."""
    if config.start_ms is None:
        config = dataclasses.replace(config, start_ms=int(time.time() * 1000))
    if processes <= 1 or config.clusters < 2:
        quorum = SyntheticQuorum(config)
        stats = _publish_one(quorum, bootstrap, topic, duration_ms, speed, producer_config, progress, should_stop)
        return stats, quorum.timeline
    shards = _shard(config, min(processes, config.clusters))
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(len(shards)) as pool:
        results = pool.starmap(_publish_shard, [(s, bootstrap, topic, duration_ms, speed, producer_config)
                                                for s in shards])
    stats, timeline = PublishStats(), []
    for shard_stats, shard_timeline in results:
        stats = stats.merge(shard_stats)
        timeline.extend(shard_timeline)
    return stats, sorted(timeline, key=lambda e: e.start_ms)


def _publish_shard(config, bootstrap, topic, duration_ms, speed, producer_config):
    quorum = SyntheticQuorum(config)
    stats = _publish_one(quorum, bootstrap, topic, duration_ms, speed, producer_config, None, lambda: False)
    return stats, quorum.timeline


def _shard(config: SyntheticConfig, n: int) -> list[SyntheticConfig]:
    shards, first = [], 0
    for i in range(n):
        count = config.clusters // n + (1 if i < config.clusters % n else 0)
        faults = tuple(dataclasses.replace(f, cluster=f.cluster - first) for f in config.faults
                       if first <= f.cluster < first + count)
        shards.append(dataclasses.replace(config, clusters=count, first_cluster=config.first_cluster + first,
                                          faults=faults, seed=config.seed * 1000 + i))
        first += count
    return shards
