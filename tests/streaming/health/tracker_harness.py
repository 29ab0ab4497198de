"""A tracker fed batch by batch, as the health processor feeds it, keeping every row emitted."""
from __future__ import annotations

import os
import random
from typing import Any, Callable

from quorum import events
from quorum.synthetic import SyntheticConfig, SyntheticQuorum, demo_faults

from streaming.health.config import HealthConfig
from streaming.health.schema import EVENT_KINDS, pack_record, unpack_record
from streaming.health.state import new_state
from streaming.health.tracker import QuorumTracker

from .quorum_script import KEY, T0, QuorumScript


class Monitor:
    """Feeds a tracker batch by batch, as the processor does, and keeps every row it emitted."""

    # Set by the `reduction_differential` fixture: each reducing Monitor made meanwhile also
    # folds every record one by one (its `shadow`), and is listed here to be compared.
    shadowed: list["Monitor"] | None = None

    def __init__(self, cfg: HealthConfig | None = None, reduce: bool = True):
        """`reduce`: fold each replica's fetches reduced per tick, as the processor does."""
        self.cfg = cfg or HealthConfig()
        self.reduce = reduce
        self._state = new_state(*KEY)
        self.rows: list[dict[str, Any]] = []
        self.offset = 0
        self.shadow: Monitor | None = None
        self.state_replaced = False
        if reduce and Monitor.shadowed is not None:
            self.shadow = Monitor(self.cfg, reduce=False)
            Monitor.shadowed.append(self)

    @property
    def state(self) -> dict[str, Any]:
        return self._state

    @state.setter
    def state(self, st: dict[str, Any]) -> None:
        # a test replaying a batch restores the state; its shadow has none to restore
        self._state, self.state_replaced = st, True

    def feed(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Records in the order given, as one Kafka partition would deliver them, each in the
        form the job hands the tracker (only the fields it packs)."""
        if self.shadow is not None:
            self.shadow.feed(records)
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


# What an event is, and when: a differential compares the first exactly, the second within a tick.
EVENT_FIELDS = ("kind", "replica_id", "previous_status", "status", "cause")
EVENT_INSTANTS = ("now_ms", "window_start_ms", "window_end_ms")


def event_differences(every: list[dict[str, Any]], reduced: list[dict[str, Any]], tick_ms: int) -> list[str]:
    """Where the events of a reduced fold differ from those of the record-by-record fold:
    another event (kind, replica, statuses, cause), or one more than a tick apart."""
    want = [r for r in every if r["kind"] in EVENT_KINDS]
    got = [r for r in reduced if r["kind"] in EVENT_KINDS]
    out = []
    for i, (w, g) in enumerate(zip(want, got)):
        if [w.get(f) for f in EVENT_FIELDS] != [g.get(f) for f in EVENT_FIELDS]:
            out.append(f"event {i}: {[w.get(f) for f in EVENT_FIELDS]} one by one, "
                       f"{[g.get(f) for f in EVENT_FIELDS]} reduced")
            continue
        out += [f"event {i} {w['kind']} {f}: {w[f]} one by one, {g[f]} reduced" for f in EVENT_INSTANTS
                if (w.get(f) is None) != (g.get(f) is None) or (w.get(f) is not None and abs(w[f] - g[f]) > tick_ms)]
    if len(want) != len(got):
        out.append(f"{len(want)} events one by one, {len(got)} reduced")
    return out


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
