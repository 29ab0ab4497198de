"""A compact console view for local runs: one line per quorum, one per replica worth a look,
one per event, after each micro-batch."""
from __future__ import annotations

import sys
from typing import Any, TextIO

from .config import ConsoleSinkConfig
from .snapshot import HealthSnapshot


def _fmt(value: Any, unit: str = "") -> str:
    return "-" if value is None else f"{value}{unit}"


def render(snapshot: HealthSnapshot, events: list[dict[str, Any]], batch_id: int, stalled: bool,
           show_healthy: bool = False) -> str:
    lines = [f"-- batch {batch_id}" + ("  INPUT STALLED: holding last verdicts" if stalled else "")]
    for view in snapshot.views():
        q = view.quorum
        # the collector's error only while its polls fail: an unobserved quorum's one piece of evidence
        polls = (f"  collector: {q['poll_error']} ({_fmt(q.get('poll_failures'))} failed polls)"
                 if q.get("poll_error") is not None else "")
        lines.append(f"{q['cluster_id']} {q['topic']}-{q['partition']}  {q['status'].upper():<11} "
                     f"leader {q['leader_id']} epoch {q['leader_epoch']} hw {q['high_watermark']} "
                     f"(age {_fmt(q['hw_age_ms'], 'ms')})  voters {q['voters_caught_up']}/{q['voters']} caught up, "
                     f"{q['voters_reachable']} reachable, fault tolerance {_fmt(q.get('fault_tolerance'))}  "
                     f"elections {q['elections_total']}{polls}")
        for rid, r in sorted(view.replicas.items()):
            if r["status"] == "caught_up" and not show_healthy:
                continue
            ratio = "-" if r["caught_up_ratio"] is None else f"{r['caught_up_ratio']:.0%}"
            cause = f" ({r['cause']})" if r.get("cause") else ""
            lines.append(f"    {r['role']:<8} {rid:>4}  {r['status'] + cause:<23} lag {_fmt(r['lag_records'])} rec "
                         f"{_fmt(r['lag_ms'], 'ms')}  last fetch {_fmt(r['last_fetch_age_ms'], 'ms')} ago  "
                         f"caught up {ratio}  ({r['reason']})")
    for e in events:
        if e["kind"] == "window":
            continue  # one per status change anyway; the transition line says it
        who = "quorum" if e.get("replica_id") is None else f"replica {e['replica_id']}"
        if e["kind"] == "transition":
            what = f"{e['previous_status']} -> {e['status']} ({e['reason']})"
        elif e["kind"] == "cause":
            what = f"{e['status']}: {e.get('previous_cause')} -> {e['cause']} ({e['reason']})"
        elif e["kind"] in ("voter_set", "incarnation", "replaced", "rejected"):
            what = f"{e['kind'].replace('_', ' ')}: {e['reason']}"
        elif e["kind"] == "truncation":
            what = f"truncated, {e['records_lost']} records lost ({e['reason']})"
        else:
            what = f"forgotten ({e['reason']})"
        lines.append(f"  * {e['cluster_id']} {e['topic']}-{e['partition']} {who}: {what}")
    return "\n".join(lines)


class ConsoleSink:
    def __init__(self, cfg: ConsoleSinkConfig, out: TextIO | None = None):
        self.cfg = cfg
        self.out = out or sys.stdout

    def publish(self, snapshot: HealthSnapshot, events: list[dict[str, Any]], batch_id: int, stalled: bool) -> None:
        print(render(snapshot, events, batch_id, stalled, self.cfg.show_healthy), file=self.out, flush=True)

    def close(self) -> None:
        pass
