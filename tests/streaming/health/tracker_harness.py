"""A tracker fed batch by batch, as the health processor feeds it, keeping every row emitted."""
from __future__ import annotations

import os
import random
from typing import Any, Callable

from quorum import events
from quorum.synthetic import SyntheticConfig, SyntheticQuorum, demo_faults

from streaming.health.config import HealthConfig
from streaming.health.schema import pack_record, unpack_record
from streaming.health.tracker import QuorumTracker, new_state

from .quorum_script import KEY, T0, QuorumScript


class Monitor:
    """Feeds a tracker batch by batch, as the processor does, and keeps every row it emitted."""

    def __init__(self, cfg: HealthConfig | None = None, reduce: bool = True):
        """`reduce`: fold each replica's fetches reduced per tick, as the processor does."""
        self.cfg = cfg or HealthConfig()
        self.reduce = reduce
        self.state = new_state(*KEY)
        self.rows: list[dict[str, Any]] = []
        self.offset = 0

    def feed(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Records in the order given, as one Kafka partition would deliver them, each in the
        form the job hands the tracker (only the fields it packs)."""
        tracker = QuorumTracker(self.cfg, self.state)
        records = [unpack_record(pack_record(r)) for r in records]
        for r in records:
            r["_offset"], self.offset = self.offset, self.offset + 1
        tracker.apply_all(records, reduce=self.reduce)
        rows = tracker.evaluate(None, silent=False)
        self.rows += rows
        return rows

    def run(self, script: QuorumScript, ms: int, batch_ms: int = 500) -> None:
        for _ in range(ms // batch_ms):
            self.feed(script.run(batch_ms))

    def replica(self, rid: int) -> dict[str, Any]:
        return [r for r in self.rows if r["kind"] == "replica" and r["replica_id"] == rid][-1]

    def quorum(self) -> dict[str, Any]:
        return [r for r in self.rows if r["kind"] == "quorum"][-1]

    def transitions(self, rid: int | None = None) -> list[tuple[int, str, str]]:
        """(ms since T0, previous, new) of one replica's (or the quorum's, rid None) transitions."""
        return [(r["now_ms"] - T0, r["previous_status"], r["status"]) for r in self.rows
                if r["kind"] == "transition" and r.get("replica_id") == rid]

    def events(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["kind"] == kind]


DEMO_START = 1_700_000_000_000
DEMO_MS = 260_000


def seeds(n: int) -> range:
    """`n` random seeds, printed; `SYNTH_SEED` replays them."""
    base = int(os.environ.get("SYNTH_SEED", random.randrange(1 << 30)))
    print(f"seeds {base}..{base + n - 1} (replay with SYNTH_SEED={base})")
    return range(base, base + n)


def demo_timeline(seed: int, append_ms: int | None = None):
    """The synthetic quorum's demo timeline (one fault of every kind, 3 voters + 2 observers):
    its records as (time read, record) and the faults it played."""
    q = SyntheticQuorum(SyntheticConfig(clusters=1, voters=3, observers=2, seed=seed, start_ms=DEMO_START,
                                        append_interval_ms=append_ms, faults=tuple(demo_faults(3))))
    records = [(t, events.to_dict(events.decode(value))) for _key, value, t in q.events_until(DEMO_START + DEMO_MS)]
    return records, q.timeline


def fold_in_batches(records: list[tuple[int, dict]], batch_ms: Callable[[], int], cfg: HealthConfig,
                    reduce: bool = True) -> list[dict[str, Any]]:
    """Every row the tracker emits for `demo_timeline`'s records, fed `batch_ms()` of them at a
    time as the processor feeds it."""
    mon, i, end = Monitor(cfg, reduce=reduce), 0, DEMO_START
    while i < len(records):
        end += batch_ms()
        first = i
        while i < len(records) and records[i][0] < end:
            i += 1
        mon.feed([r for _t, r in records[first:i]])
    return mon.rows
