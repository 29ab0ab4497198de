"""The health families' exposition text, formatted per quorum and kept until its rows change.

prometheus_client builds a sample object per series and checks every label name at every
render: at 2,000 quorums (158,011 series) one render of /metrics took 2.2 s on the driver,
under the GIL the batch writer also needs. Here each quorum's lines of each family are
formatted once, when the snapshot holds a new row for it (a new quorum row: its quorum
families; a new or forgotten replica row: its replica families), and a render joins the kept
blocks family by family, behind each family's HELP and TYPE lines. When no quorum changed since
the last render, the joined text itself is served again.

The text is the library's byte for byte (tests/streaming/sinks/test_exposition_cache.py): the
families of `health_families` in its order, quorums in the snapshot's order, replicas by id,
labels sorted by name, values as the library's `floatToGoString` writes them, the HELP and
TYPE lines rendered by the library itself. A row is never changed once the snapshot holds it
(a change is a new row), so a kept block is current while its row is the one the view holds.
"""
from __future__ import annotations

import threading
from typing import Any

from prometheus_client.exposition import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.utils import floatToGoString

from streaming.health.statuses import CAUSES, QUORUM_STATUSES, REPLICA_STATUSES

from .health_families import QUORUM_COUNTERS, QUORUM_GAUGES, REPLICA_COUNTERS, REPLICA_GAUGES, health_families
from .snapshot import QuorumView


def _num(value: Any, scale: float = 1.0) -> str:
    return "NaN" if value is None else floatToGoString(float(value) * scale)


def _escape(value: str) -> str:
    # label values, as both text formats escape them
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


class FamilyList:
    """The library's collector protocol over families already built (for its encoders)."""

    def __init__(self, families: list) -> None:
        self.families = families

    def collect(self) -> list:
        return self.families


def _headers(openmetrics: bool) -> list[str]:
    """Each health family's HELP and TYPE lines, as the library renders a family with no sample."""
    if openmetrics:
        return [generate_openmetrics(FamilyList([f])).decode().removesuffix("# EOF\n") for f in health_families([])]
    return [generate_latest(FamilyList([f])).decode() for f in health_families([])]


class _Blocks:
    """One quorum's lines, per family, and the rows they were formatted from."""
    __slots__ = ("quorum_row", "quorum", "replica_rows", "replica")

    def __init__(self) -> None:
        self.quorum_row: dict[str, Any] | None = None
        self.quorum: list[str] = []
        self.replica_rows: list[tuple[int, dict[str, Any]]] | None = None  # None: not formatted yet
        self.replica: list[str] = []


class HealthExposition:
    """The health families' text for a snapshot's views, in the text format or OpenMetrics
    (without its `# EOF`). Safe to call from concurrent scrapes."""

    def __init__(self) -> None:
        self.quorum_gauges, self.quorum_counters = QUORUM_GAUGES, QUORUM_COUNTERS
        self.replica_gauges, self.replica_counters = REPLICA_GAUGES, REPLICA_COUNTERS
        self.headers = {False: _headers(False), True: _headers(True)}
        self.replica_families = len(REPLICA_GAUGES) + len(REPLICA_COUNTERS) + 2  # + status, cause
        self._lock = threading.Lock()
        self._blocks: dict[tuple[str, str, int], _Blocks] = {}
        self._order: list[tuple[str, str, int]] = []  # the quorums of the last render, in order
        self._bodies: dict[bool, bytes] = {}  # the last render's text per format, until a quorum changes

    def render(self, views: list[QuorumView], openmetrics: bool = False) -> bytes:
        with self._lock:
            order, changed = [], False
            blocks: dict[tuple[str, str, int], _Blocks] = {}
            for view in views:
                qr = view.quorum
                key = (qr["cluster_id"], qr["topic"], int(qr["partition"]))
                kept = self._blocks.get(key) or _Blocks()
                changed |= self._refresh(kept, view)
                blocks[key] = kept
                order.append(key)
            if changed or order != self._order:
                self._blocks, self._order, self._bodies = blocks, order, {}
            body = self._bodies.get(openmetrics)
            if body is None:
                body = self._bodies[openmetrics] = self._join(openmetrics)
            return body

    def _join(self, openmetrics: bool) -> bytes:
        kept = [self._blocks[key] for key in self._order]
        parts = []
        for i, header in enumerate(self.headers[openmetrics]):
            parts.append(header)
            if i < self.replica_families:
                parts.extend(b.replica[i] for b in kept)
            else:
                parts.extend(b.quorum[i - self.replica_families] for b in kept)
        return "".join(parts).encode()

    def _refresh(self, kept: _Blocks, view: QuorumView) -> bool:
        """Format what changed in `view` since `kept` was formatted; True if anything did."""
        qr = view.quorum
        replica_rows = sorted(view.replicas.items())
        quorum_changed = kept.quorum_row is not qr
        # the labels come from the quorum's key, the same for the block's life: a new quorum row
        # leaves its replicas' lines as they are
        replicas_changed = kept.replica_rows is None or len(replica_rows) != len(kept.replica_rows) or any(
            rid != old_rid or row is not old_row
            for (rid, row), (old_rid, old_row) in zip(replica_rows, kept.replica_rows))
        if not quorum_changed and not replicas_changed:
            return False
        cluster, partition = _escape(qr["cluster_id"]), _escape(f"{qr['topic']}-{qr['partition']}")
        if quorum_changed:
            kept.quorum_row, kept.quorum = qr, self._quorum_lines(qr, cluster, partition)
        if replicas_changed:
            kept.replica_rows, kept.replica = replica_rows, self._replica_lines(replica_rows, cluster, partition)
        return True

    def _quorum_lines(self, qr: dict[str, Any], cluster: str, partition: str) -> list[str]:
        labels = f'{{cluster="{cluster}",partition="{partition}"}}'
        lines = [f"{name}{labels} {_num(value(qr))}\n" for name, _, value in self.quorum_gauges]
        lines += [f"{name}_total{labels} {_num(qr[column])}\n" for name, _, column in self.quorum_counters]
        status = qr["status"]
        # labels sorted by name, as the library writes them: status after partition, error between
        lines.append("".join(
            f'quorum_status{{cluster="{cluster}",partition="{partition}",status="{s}"}} '
            f'{"1.0" if status == s else "0.0"}\n' for s in QUORUM_STATUSES))
        error = qr.get("poll_error")
        lines.append("" if error is None else
                     f'quorum_collector_poll_error{{cluster="{cluster}",error="{_escape(error)}",'
                     f'partition="{partition}"}} 1.0\n')
        return lines

    def _replica_lines(self, replica_rows: list[tuple[int, dict[str, Any]]], cluster: str, partition: str
                       ) -> list[str]:
        per_family: list[list[str]] = [[] for _ in range(self.replica_families)]
        for rid, rr in replica_rows:
            base = f'cluster="{cluster}",partition="{partition}",replica="{_escape(str(rid))}",' \
                   f'role="{_escape(rr["role"])}"'
            i = 0
            for name, _, column, scale in self.replica_gauges:
                per_family[i].append(f"{name}{{{base}}} {_num(rr[column], scale)}\n")
                i += 1
            for name, _, column in self.replica_counters:
                per_family[i].append(f"{name}_total{{{base}}} {_num(rr[column])}\n")
                i += 1
            status, cause = rr["status"], rr.get("cause")
            per_family[i].extend(f'quorum_replica_status{{{base},status="{s}"}} {"1.0" if status == s else "0.0"}\n'
                                 for s in REPLICA_STATUSES)
            # `cause` sorts before `cluster`
            per_family[i + 1].extend(f'quorum_replica_cause{{cause="{c}",{base}}} {"1.0" if cause == c else "0.0"}\n'
                                     for c in CAUSES)
        return ["".join(lines) for lines in per_family]
