"""The driver's picture of every quorum: the latest health snapshot per quorum, fed by batches.

The processor emits each quorum's row on every evaluation and a replica's row when what it shows
changed; this store keeps the latest of each per (cluster, topic, partition), so the Prometheus
sinks render exactly the replicas that exist now (a forgotten replica or quorum simply is not
there any more).

Holding verdicts while the whole input is stalled: a quorum evaluated on a timer with no input
(`silent`) gets its verdict from silence. That is evidence only if other input arrived after this
quorum's last input; if nothing at all arrived since (broker down, topic idle), every quorum
looks silent and none of those verdicts mean anything. Such rows are held: the store keeps the
last verdict and their events are not published. Comparing the batch timestamps of the last
input (`last_input_proc_ms`) needs no clock of the driver's own.

"Since" allows for each quorum's own cadence: a collector polling every 2 s lands a snapshot
every second or third micro-batch, so when every publisher stops at once its last snapshot can
be a batch or two older than the others' last records. A silent quorum is held while nothing
arrived later than its last input plus the longest of its recent gaps between inputs (in batch
time, as the store saw them), plus one batch interval (the longest of the recent ones), at most
`max_cadence_ms` in all (an outage of the quorum's own input is no cadence). The batch interval is
there because the quorums' Kafka partitions are read at slightly different moments, so records
sent at the same instant can land a batch apart, and batches are not spaced exactly a trigger
apart. Once other input outlasts that, the quorum's silence is evidence. The replica rows a held
quorum produced are kept and applied with its first rows that are not held: a replica row comes
only when what it shows changed, so a verdict reached during the hold would otherwise never show.

The events of a held quorum are not dropped: they wait here (at most `MAX_HELD_EVENTS` per
quorum, the oldest dropped and counted) and are published, flagged `held: true`, in order, as
soon as the quorum is no longer held, so a consumer of the health topic sees every transition
and every closed window.
"""
from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterable

from streaming.health.schema import EVENT_KINDS

MAX_HELD_EVENTS = 10_000
RECENT_GAPS = 8  # gaps between a quorum's inputs kept to judge its cadence


@dataclass
class QuorumView:
    quorum: dict[str, Any]
    replicas: dict[int, dict[str, Any]]


@dataclass
class Applied:
    """What one batch brought: events to publish, quorums held back."""
    events: list[dict[str, Any]] = field(default_factory=list)
    held_quorums: int = 0
    held_events_dropped: int = 0
    newest_event_ms: int | None = None  # newest quorum clock among quorums that had input


# Twice the default unreachable_after_ms: a collector may poll every half of it, and a batch's
# timing adds up to a trigger either side.
DEFAULT_MAX_CADENCE_MS = 4000


class HealthSnapshot:
    def __init__(self, max_cadence_ms: int = DEFAULT_MAX_CADENCE_MS) -> None:
        self.max_cadence_ms = max_cadence_ms
        self.quorums: dict[tuple[str, str, int], QuorumView] = {}
        self.last_input_proc_ms = -1  # the latest batch timestamp in which any quorum had input
        self.held_events: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
        self.last_input_of: dict[tuple[str, str, int], int] = {}  # each quorum's newest last_input_proc_ms
        self.input_gaps: dict[tuple[str, str, int], deque[int]] = {}  # its recent gaps between inputs
        self.batch_gaps: deque[int] = deque(maxlen=RECENT_GAPS)  # recent gaps between batches with any input
        # replica and forget rows of a held quorum, the newest per (kind, replica), applied once it is not
        self.held_rows: dict[tuple[str, str, int], dict[tuple[str, Any], dict[str, Any]]] = {}
        self._lock = threading.Lock()  # the exporter's HTTP thread reads while a batch writes

    def apply(self, rows: Iterable[dict[str, Any]]) -> Applied:
        rows = list(rows)
        with self._lock:
            return self._apply(rows)

    def _apply(self, rows: list[dict[str, Any]]) -> Applied:
        # the slack is judged on the batches before this one: this batch's own gap may be the silence
        slack = max(self.batch_gaps, default=0)
        newest = max((r["last_input_proc_ms"] for r in rows if r.get("last_input_proc_ms") is not None), default=-1)
        if newest > self.last_input_proc_ms:
            if self.last_input_proc_ms >= 0:
                self.batch_gaps.append(newest - self.last_input_proc_ms)
            self.last_input_proc_ms = newest
        by_quorum: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
        for r in rows:
            by_quorum.setdefault((r["cluster_id"], r["topic"], int(r["partition"])), []).append(r)
        out = Applied()
        for key, qrows in by_quorum.items():
            qrows.sort(key=lambda r: (r["seq"], r["now_ms"] or 0))
            self._note_input(key, qrows)
            events = [r for r in qrows if r["kind"] in EVENT_KINDS]
            if self._held(key, qrows, slack):
                self._keep_held_rows(key, qrows)
                out.held_quorums += 1
                held = self.held_events.setdefault(key, [])
                held.extend({**e, "held": True} for e in events)
                if len(held) > MAX_HELD_EVENTS:
                    out.held_events_dropped += len(held) - MAX_HELD_EVENTS
                    del held[:len(held) - MAX_HELD_EVENTS]
                continue
            out.events.extend(self.held_events.pop(key, []))
            out.events.extend(events)
            kept = sorted(self.held_rows.pop(key, {}).values(), key=lambda r: r["seq"])
            self._apply_quorum(key, kept + qrows)
            for r in qrows:
                if r["kind"] == "quorum" and not r["silent"]:
                    out.newest_event_ms = max(out.newest_event_ms or 0, r["now_ms"])
        return out

    def _note_input(self, key: tuple[str, str, int], qrows: list[dict[str, Any]]) -> None:
        newest = max((r["last_input_proc_ms"] for r in qrows if r.get("last_input_proc_ms") is not None), default=None)
        previous = self.last_input_of.get(key)
        if newest is None or (previous is not None and newest <= previous):
            return
        if previous is not None and previous >= 0:
            self.input_gaps.setdefault(key, deque(maxlen=RECENT_GAPS)).append(newest - previous)
        self.last_input_of[key] = newest

    def _keep_held_rows(self, key: tuple[str, str, int], qrows: list[dict[str, Any]]) -> None:
        kept = self.held_rows.setdefault(key, {})
        for r in qrows:
            if r["kind"] == "forget":
                rid = r.get("replica_id")
                for k in [k for k in kept if k[0] == "replica" and (rid is None or k[1] == rid)]:
                    del kept[k]
                kept[("forget", rid)] = r
            elif r["kind"] == "replica":
                kept[("replica", r["replica_id"])] = r

    def _held(self, key: tuple[str, str, int], qrows: list[dict[str, Any]], slack: int) -> bool:
        last = qrows[-1]
        cadence = min(max(self.input_gaps.get(key) or (0,)) + slack, self.max_cadence_ms)
        return bool(last["silent"]) and last["last_input_proc_ms"] + cadence >= self.last_input_proc_ms

    def _apply_quorum(self, key: tuple[str, str, int], qrows: list[dict[str, Any]]) -> None:
        for r in qrows:
            if r["kind"] == "forget":
                view = self.quorums.get(key)
                if r.get("replica_id") is None:
                    self.quorums.pop(key, None)
                    self.last_input_of.pop(key, None)
                    self.input_gaps.pop(key, None)
                elif view is not None:
                    view.replicas.pop(int(r["replica_id"]), None)
        snapshot_seq = max((r["seq"] for r in qrows if r["kind"] == "quorum"), default=None)
        if snapshot_seq is not None:
            # Replica rows come when what they show changed: merged into what the view holds.
            view = self.quorums.get(key)
            replicas = dict(view.replicas) if view is not None else {}
            replicas.update({int(r["replica_id"]): r for r in qrows if r["kind"] == "replica"})
            quorum = next(r for r in qrows if r["kind"] == "quorum" and r["seq"] == snapshot_seq)
            self.quorums[key] = QuorumView(quorum, replicas)

    def clusters(self) -> list[str]:
        with self._lock:
            return sorted({k[0] for k in self.quorums})

    def views(self, cluster: str | None = None) -> list[QuorumView]:
        with self._lock:
            return [v for k, v in sorted(self.quorums.items()) if cluster is None or k[0] == cluster]
