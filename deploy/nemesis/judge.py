"""The monitor's verdicts (Prometheus' series, as an operator's dashboards and Alertmanager get
them, and Alertmanager's notifications, as the operator gets them) held against the model:
detections and their latency per fault, false pages (an alert firing with no fault behind it, or
a notification of an alert Prometheus never fired), missed pages (a fault the model says must
page, without the page, or a page that never reached the operator), wrong causes, and seconds of
a paging quorum status no fault explains. Pure: the runner fetches the series."""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from .model import BOUND_S, GRACE_S, UNREACHABLE_AFTER_S, Done, Model

PAGING_STATUSES = ("no_majority", "leaderless", "stalled", "unobserved")
EPISODE_GAP_S = 3.0       # firing samples closer than this are one episode
NODE_FAULTS = ("freeze", "kill", "cutoff", "kafka-freeze", "kafka-kill", "kafka-cutoff")
LAGGING_AFTER_S = 2.0
# From an alert's firing to its notification at the latest: Alertmanager's group_interval (1m in
# alerts/alertmanager.example.yml: an alert joining a group already notified waits for the
# group's next flush), the local stack's group_wait (2 s), and a margin
NOTIFY_WITHIN_S = 60 + 2 + 15
MATCHED_LABELS = ("cluster", "partition", "replica")


@dataclass
class Episode:
    alert: str
    labels: dict[str, str]
    start: float
    end: float


@dataclass(frozen=True)
class Notification:
    """One alert of one of Alertmanager's notifications, as the stack's receiver kept it."""
    received: float
    status: str            # firing | resolved
    labels: dict[str, str]
    starts_at: float       # when Prometheus had it fire (Alertmanager's startsAt)


@dataclass
class Series:
    """What Prometheus held over the run, each as (unix seconds, value) samples of `== 1` series."""
    alerts: list[tuple[dict[str, str], list[float]]]                  # ALERTS{alertstate="firing"}: labels, times
    replica_status: dict[tuple[str, int], list[tuple[float, str]]]    # (cluster, replica) -> (t, status)
    replica_cause: dict[tuple[str, int], list[tuple[float, str]]]     # (cluster, replica) -> (t, cause)
    quorum_status: dict[str, list[tuple[float, str]]]                 # cluster -> (t, status)
    job_restarts: list[tuple[float, float]]                           # (t, quorum_monitor_job_restarts_total)
    notifications: list[Notification] | None = None                   # None: none recorded, nothing judged
    notifications_read: float = math.inf                              # when they were read


@dataclass
class Verdict:
    detections: list[tuple[Done, float | None, bool]] = field(default_factory=list)  # fault, latency, expected
    false_pages: list[tuple[Episode, str]] = field(default_factory=list)
    missed_pages: list[str] = field(default_factory=list)
    wrong_causes: list[str] = field(default_factory=list)
    wrong_status_s: dict[str, int] = field(default_factory=dict)

    @property
    def detected(self) -> list[float]:
        return [lat for _, lat, _ in self.detections if lat is not None]


def episodes(alerts: list[tuple[dict[str, str], list[float]]]) -> list[Episode]:
    found = []
    for labels, times in alerts:
        name = labels.get("alertname", "?")
        rest = {k: v for k, v in labels.items() if k not in ("alertname", "alertstate", "__name__")}
        start = prev = None
        for t in sorted(times):
            if start is None:
                start = prev = t
            elif t - prev > EPISODE_GAP_S:
                found.append(Episode(name, rest, start, prev))
                start = t
            prev = t
        if start is not None:
            found.append(Episode(name, rest, start, prev))
    return sorted(found, key=lambda e: e.start)


def judge(model: Model, series: Series, for_s: dict[str, float], end: float) -> Verdict:
    verdict = Verdict()
    eps = episodes(series.alerts)
    for ep in eps:
        pending = ep.start - for_s.get(ep.alert, 0)
        if not model.justified(ep.alert, ep.labels, pending, ep.start):
            verdict.false_pages.append((ep, _nearby(model, ep)))
        elif ep.alert == "QuorumVoterUnreachable":
            _check_cause(model, series, ep, verdict)
    for alerts, cluster, replica, a, b in model.required_pages(for_s, end):
        names = alerts.split("|")
        who = f"voter {replica}" if replica is not None else "a majority"
        paged = [ep for ep in eps if ep.alert in names and ep.labels.get("cluster") == cluster
                 and (replica is None or ep.labels.get("replica") == str(replica)) and ep.start <= b and ep.end >= a]
        if not paged:
            verdict.missed_pages.append(f"{alerts} for {who} of {cluster}: out from {a:.0f}, no page by {b:.0f} "
                                        f"(+{b - a:.0f} s)")
        elif series.notifications is not None and not _notified(series, paged):
            verdict.missed_pages.append(f"{paged[0].alert} for {who} of {cluster}: firing in Prometheus from "
                                        f"{paged[0].start:.0f}, no notification from Alertmanager within "
                                        f"{NOTIFY_WITHIN_S} s")
    for n in series.notifications or []:
        if n.status == "firing" and not _episode_of(eps, n):
            name = n.labels.get("alertname", "?")
            rest = {k: v for k, v in n.labels.items() if k != "alertname"}
            verdict.false_pages.append((Episode(name, rest, n.starts_at, n.received),
                                        "notified by Alertmanager, never firing in Prometheus"))
    for d in model.done:
        verdict.detections.append((d, *_detection(d, series)))
    for cluster, samples in series.quorum_status.items():
        wrong = {int(t) for t, status in samples if status in PAGING_STATUSES
                 and not any(len(model.voters_out(cluster, t - dt)) >= 2 or model.electing(cluster, t - dt)
                             for dt in range(int(GRACE_S) + 1))
                 and not model.monitor_disturbed(t - GRACE_S, t)}
        verdict.wrong_status_s[cluster] = len(wrong)
    return verdict


def _same_alert(labels: dict[str, str], ep: Episode) -> bool:
    return labels.get("alertname") == ep.alert and all(labels.get(k) == ep.labels.get(k) for k in MATCHED_LABELS)


def _episode_of(eps: list[Episode], n: Notification) -> Episode | None:
    """The firing episode in Prometheus a notification tells of."""
    return next((ep for ep in eps if _same_alert(n.labels, ep)
                 and ep.start - EPISODE_GAP_S - 2 <= n.starts_at <= ep.end + EPISODE_GAP_S + 2), None)


def _notified(series: Series, paged: list[Episode]) -> bool:
    """Whether Alertmanager notified one of these episodes, firing or already resolved (an alert
    joining a group waits for its next flush). True when its window closed after the
    notifications were read: not judged."""
    for ep in paged:
        until = ep.start + NOTIFY_WITHIN_S
        if until > series.notifications_read:
            return True
        if any(_same_alert(n.labels, ep) and ep.start - 2 <= n.received <= until for n in series.notifications):
            return True
    return False


def _first(samples: list[tuple[float, str]], a: float, b: float, ok) -> float | None:
    return next((t for t, v in samples if a <= t <= b and ok(v)), None)


def _detection(d: Done, series: Series) -> tuple[float | None, bool]:
    """(seconds from the fault to the verdict that shows it, or None; whether one is expected:
    a fault that lasted its threshold + BOUND_S)."""
    kind, lasted = d.kind, d.healed - d.start
    until = d.healed + 5
    if kind == "job-kill":
        before = max((v for t, v in series.job_restarts if t <= d.start), default=0)
        at = next((t for t, v in series.job_restarts if t > d.start and v > before), None)
        return (None if at is None else at - d.start), True
    if d.cluster_id is None or kind == "skew":
        return None, False
    if kind == "slow-disk":
        samples = series.replica_status.get((d.cluster_id, d.nodes[0]), [])
        at = _first(samples, d.start, until, lambda s: s != "caught_up")
        return (None if at is None else at - d.start), lasted >= LAGGING_AFTER_S + BOUND_S
    if len(d.nodes) >= 2:
        samples = series.quorum_status.get(d.cluster_id, [])
        at = _first(samples, d.start, until, lambda s: s in PAGING_STATUSES)
    else:
        samples = series.replica_status.get((d.cluster_id, d.nodes[0]), [])
        at = _first(samples, d.start, until, lambda s: s == "unreachable")
        if d.roles == ("leader",):
            # With another voter out no successor can win: without a live leader no replica is
            # judged (the old leader `unknown`, cause `down`) and the quorum's status is the verdict
            quorum = _first(series.quorum_status.get(d.cluster_id, []), d.start, until,
                            lambda s: s in PAGING_STATUSES)
            at = min((x for x in (at, quorum) if x is not None), default=None)
    return (None if at is None else at - d.start), lasted >= UNREACHABLE_AFTER_S + BOUND_S


def _check_cause(model: Model, series: Series, ep: Episode, verdict: Verdict) -> None:
    cluster, replica = ep.labels.get("cluster"), int(ep.labels.get("replica", -1))
    expected = model.expected_cause(cluster, replica, ep.start)
    if expected is None:
        return
    causes = [c for t, c in series.replica_cause.get((cluster, replica), []) if ep.start - 2 <= t <= ep.start + 2]
    if causes and expected not in causes:
        verdict.wrong_causes.append(f"{ep.alert} {cluster} voter {replica} at {ep.start:.0f}: cause "
                                    f"{'/'.join(sorted(set(causes)))}, the fault says {expected}")


def _nearby(model: Model, ep: Episode) -> str:
    near = [d for d in model.done if d.start - 60 <= ep.start <= d.recovered() + 60]
    return "; ".join(f"#{d.planned.index} {d.kind} {d.cluster_id or 'monitor'} {list(d.nodes)} "
                     f"{d.start - ep.start:+.0f}..{d.healed - ep.start:+.0f} s" for d in near) or "no fault within 60 s"


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def report(verdict: Verdict, seed: int, minutes: float) -> list[str]:
    """The table per fault kind, the findings, and the last line."""
    rows: dict[str, list] = defaultdict(list)
    for d, latency, expected in verdict.detections:
        rows[d.kind].append((latency, expected))
    lines = [f"{'fault':16} {'injected':>8} {'expected':>8} {'detected':>8} {'p50 s':>6} {'p99 s':>6} {'max s':>6}"]
    for kind in sorted(rows):
        got = [lat for lat, _ in rows[kind] if lat is not None]
        fmt = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
        lines.append(f"{kind:16} {len(rows[kind]):8} {sum(e for _, e in rows[kind]):8} {len(got):8} "
                     f"{fmt(percentile(got, .5)):>6} {fmt(percentile(got, .99)):>6} {fmt(max(got, default=None)):>6}")
    for d, latency, expected in verdict.detections:
        if expected and latency is None:
            lines.append(f"undetected: #{d.planned.index} {d.kind} {d.cluster_id} {list(d.nodes)} for "
                         f"{d.healed - d.start:.0f} s")
    for ep, near in verdict.false_pages:
        lines.append(f"FALSE PAGE: {ep.alert} {ep.labels} firing {ep.start:.0f}..{ep.end:.0f} "
                     f"({ep.end - ep.start:.0f} s); faults near: {near}")
    lines += [f"MISSED PAGE: {m}" for m in verdict.missed_pages]
    lines += [f"wrong cause: {w}" for w in verdict.wrong_causes]
    for cluster, seconds in verdict.wrong_status_s.items():
        if seconds:
            lines.append(f"wrong paging status: {cluster} showed {'/'.join(PAGING_STATUSES)} for {seconds} s "
                         f"with fewer than two voters out and no election after a leader fault")
    p99 = percentile(verdict.detected, .99)
    lines.append(f"nemesis: {len(verdict.detections)} faults, {len(verdict.detected)} detected, "
                 f"{len(verdict.false_pages)} false pages, {len(verdict.missed_pages)} missed pages, detection p99 "
                 f"{'-' if p99 is None else f'{p99:.1f}'} s (seed {seed}, {minutes:g} min)")
    return lines
