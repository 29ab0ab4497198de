"""A fixed-rate load for the job: a synthetic workload encoded in full before the load starts,
then published at wall-clock pace by the raw confluent-kafka producer, in a process of its own.

Encoding first keeps the generator's cost out of the measured window (publishing pre-encoded
records costs a few microseconds each); the records are stamped with the times they are
published at, so the job sees a live quorum, not a backlog. The child reports its CPU seconds
while publishing and how late it ever was against the schedule, so a benchmark can tell a job
that fell behind from a load that did.
"""
from __future__ import annotations

import multiprocessing
import time
from dataclasses import dataclass

ENCODE_RATE_FLOOR = 50_000  # records/s the encoding is assumed to reach at least, to plan the start


@dataclass
class LoadResult:
    records: int
    encode_s: float
    publish_cpu_s: float
    publish_wall_s: float
    max_late_ms: float       # the most any record was published after its timestamp
    start_late_ms: float     # how late encoding finished against the planned start
    seconds: float           # the load's planned duration

    @property
    def rate(self) -> float:
        return self.records / self.seconds


def _run(config, seconds: float, bootstrap: str, topic: str, conn) -> None:
    from confluent_kafka import Producer

    from quorum.synthetic import SyntheticQuorum
    from quorum.synthetic.publish import PRODUCER_DEFAULTS

    t0 = time.perf_counter()
    records = sorted(SyntheticQuorum(config).events_until(config.start_ms + int(seconds * 1000)),
                     key=lambda r: r[2])
    encode_s = time.perf_counter() - t0
    start_late_ms = max(0.0, time.time() * 1000 - config.start_ms)
    conn.send(("encoded", len(records), encode_s))
    producer = Producer({**PRODUCER_DEFAULTS, "bootstrap.servers": bootstrap})
    produce, poll = producer.produce, producer.poll
    while time.time() * 1000 < config.start_ms:
        time.sleep(0.001)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    i, n, max_late = 0, len(records), 0.0
    while i < n:
        now_ms = time.time() * 1000
        if records[i][2] > now_ms:
            time.sleep(min(0.005, (records[i][2] - now_ms) / 1000))
            continue
        max_late = max(max_late, now_ms - records[i][2])
        while i < n and records[i][2] <= now_ms:
            key, value, ts = records[i]
            try:
                produce(topic, value, key, timestamp=ts)
            except BufferError:
                poll(0.01)
                continue
            i += 1
        poll(0)
    remaining = producer.flush(60)
    conn.send(("done", LoadResult(n - remaining, encode_s, time.process_time() - cpu0,
                                  time.perf_counter() - wall0, max_late, start_late_ms, seconds)))


class PacedLoad:
    """`config` (a SyntheticConfig with `start_ms` unset) published for `seconds` from a start
    planned far enough ahead for the encoding to finish first."""

    def __init__(self, config, seconds: float, bootstrap: str, topic: str):
        import dataclasses
        lead_ms = 3000 + int(1000 * config.events_per_second() * seconds / ENCODE_RATE_FLOOR)
        self.config = dataclasses.replace(config, start_ms=int(time.time() * 1000) + lead_ms)
        self.start_ms = self.config.start_ms
        self.seconds = seconds
        parent, child = multiprocessing.get_context("spawn").Pipe()
        self._conn = parent
        self._process = multiprocessing.get_context("spawn").Process(
            target=_run, args=(self.config, seconds, bootstrap, topic, child), daemon=True)
        self._process.start()
        self.pid = self._process.pid
        self.encoded: int | None = None

    def await_encoded(self, timeout_s: float = 600) -> int:
        if not self._conn.poll(timeout_s):
            raise RuntimeError(f"the load generator did not finish encoding in {timeout_s:.0f} s")
        _, self.encoded, _ = self._conn.recv()
        return self.encoded

    def await_done(self) -> LoadResult:
        timeout_s = max(0.0, self.start_ms / 1000 - time.time()) + self.seconds + 120
        if not self._conn.poll(timeout_s):
            raise RuntimeError("the load generator did not finish publishing")
        _, result = self._conn.recv()
        self._process.join(10)
        return result
