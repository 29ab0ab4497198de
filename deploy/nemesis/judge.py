"""The monitor's verdicts (Prometheus' series, as an operator's dashboards and Alertmanager get
them, and Alertmanager's notifications, as the operator gets them) held against the model:
detections and their latency per fault, false pages (an alert firing with no fault behind it, or
a notification of an alert Prometheus never fired), missed pages (a fault the model says must
page, without the page, or a page that never reached the operator), faults undetected or
detected late, wrong causes held beyond their grace, and paging quorum statuses no fault
explains held beyond theirs. Each of these fails the run. Pure: the runner fetches the series."""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from .model import CAUSE_GRACE_S, JOB_BACK_WITHIN_S, PAGING_STATUSES, STATUS_GRACE_S, Done, Model

EPISODE_GAP_S = 3.0       # firing samples closer than this are one episode
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
    job_batches: list[tuple[float, float]] = field(default_factory=list)  # (t, quorum_monitor_last_batch_timestamp_seconds)
    notifications: list[Notification] | None = None                   # None: none recorded, nothing judged
    notifications_read: float = math.inf                              # when they were read


@dataclass
class Verdict:
    detections: list[tuple[Done, float | None, bool]] = field(default_factory=list)  # fault, latency, expected
    job_back: list[tuple[Done, float | None]] = field(default_factory=list)  # a job kill, seconds to its first verdict
    false_pages: list[tuple[Episode, str]] = field(default_factory=list)
    missed_pages: list[str] = field(default_factory=list)
    undetected: list[str] = field(default_factory=list)       # expected, and never or late
    not_expected: list[str] = field(default_factory=list)     # faults the model demands no verdict of, and why
    wrong_causes: list[str] = field(default_factory=list)     # held beyond CAUSE_GRACE_S
    wrong_cause_s: float = 0.0                                # their seconds beyond it
    wrong_statuses: list[str] = field(default_factory=list)   # held beyond STATUS_GRACE_S
    wrong_status_s: dict[str, float] = field(default_factory=dict)  # cluster -> seconds beyond it

    @property
    def detected(self) -> list[float]:
        return [lat for _, lat, _ in self.detections if lat is not None]

    @property
    def failed(self) -> bool:
        return bool(self.false_pages or self.missed_pages or self.undetected or self.wrong_causes
                    or self.wrong_statuses)


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
        _judge_detection(model, series, d, verdict)
    _judge_causes(model, series, verdict)
    _judge_statuses(model, series, verdict)
    return verdict


def _what(d: Done) -> str:
    return f"#{d.planned.index} {d.kind} {d.cluster_id or 'monitor'} {list(d.nodes)}"


def _judge_detection(model: Model, series: Series, d: Done, verdict: Verdict) -> None:
    latency = _detection(d, series, model)
    why = model.not_expected(d)
    verdict.detections.append((d, latency, why is None))
    if why is not None:
        verdict.not_expected.append(f"{_what(d)} for {d.healed - d.start:.0f} s: {why}")
        return
    bound = model.detection_bound(d)
    if d.kind == "job-kill":
        _judge_job_back(series, d, verdict)
    if latency is None:
        verdict.undetected.append(f"{_what(d)} for {d.healed - d.start:.0f} s: no verdict showed it "
                                  f"(bound {bound:g} s)")
    elif latency > bound:
        verdict.undetected.append(f"{_what(d)} for {d.healed - d.start:.0f} s: shown only after "
                                  f"{latency:.1f} s (bound {bound:g} s)")


def _judge_job_back(series: Series, d: Done, verdict: Verdict) -> None:
    """A killed job's time back: from the kill to the first sample of a batch it completed
    after the kill (the Pushgateway serves the dead job's last push until then)."""
    back = next((t - d.start for t, v in series.job_batches if t > d.start and v > d.start), None)
    verdict.job_back.append((d, back))
    if back is None:
        verdict.undetected.append(f"{_what(d)}: no verdict after its restart (bound {JOB_BACK_WITHIN_S:g} s)")
    elif back > JOB_BACK_WITHIN_S:
        verdict.undetected.append(f"{_what(d)}: back with a verdict only after {back:.1f} s "
                                  f"(bound {JOB_BACK_WITHIN_S:g} s)")


def runs(times: list[float]) -> list[tuple[float, float]]:
    """(first, last) of each run of sample times no further apart than EPISODE_GAP_S (a scrape
    missed does not split one)."""
    found: list[tuple[float, float]] = []
    for t in sorted(times):
        if found and t - found[-1][1] <= EPISODE_GAP_S:
            found[-1] = (found[-1][0], t)
        else:
            found.append((t, t))
    return found


def _judge_causes(model: Model, series: Series, verdict: Verdict) -> None:
    """Per fault that has a replica `unreachable`: the seconds it showed another cause than the
    fault's, each run of them held longer than CAUSE_GRACE_S a failure."""
    for (cluster, replica), samples in sorted(series.replica_cause.items()):
        unreachable = {t for t, s in series.replica_status.get((cluster, replica), []) if s == "unreachable"}
        wrong: dict[int, list[tuple[float, str]]] = defaultdict(list)
        faults: dict[int, tuple[str, Done]] = {}
        for t, cause in samples:
            due = model.cause_due(cluster, replica, t) if t in unreachable else None
            if due is not None and cause != due[0]:
                wrong[due[1].planned.index].append((t, cause))
                faults[due[1].planned.index] = due
        for index, seen in sorted(wrong.items()):
            expected, d = faults[index]
            for a, b in runs([t for t, _ in seen]):
                held = b - a + 1  # 1 s samples
                if held > CAUSE_GRACE_S:
                    shown = sorted({c for t, c in seen if a <= t <= b})
                    verdict.wrong_cause_s += held - CAUSE_GRACE_S
                    verdict.wrong_causes.append(
                        f"{cluster} replica {replica} unreachable with cause {'/'.join(shown)} for {held:.0f} s "
                        f"from {a:.0f} (grace {CAUSE_GRACE_S:g} s); {_what(d)} says {expected}")


def _judge_statuses(model: Model, series: Series, verdict: Verdict) -> None:
    """Each run of a paging quorum status no fault allows, the monitor in, held longer than
    STATUS_GRACE_S a failure."""
    for cluster, samples in sorted(series.quorum_status.items()):
        wrong = [(t, s) for t, s in samples if not model.status_allowed(cluster, s, t)
                 and not model.monitor_disturbed(t, t)]
        beyond = 0.0
        for a, b in runs([t for t, _ in wrong]):
            held = b - a + 1  # 1 s samples
            if held > STATUS_GRACE_S:
                shown = sorted({s for t, s in wrong if a <= t <= b})
                out = sorted(model.voters_out(cluster, a))
                beyond += held - STATUS_GRACE_S
                verdict.wrong_statuses.append(
                    f"{cluster} {'/'.join(shown)} for {held:.0f} s from {a:.0f} (grace {STATUS_GRACE_S:g} s) with "
                    f"voters out {out} and no election after a leader fault; {_nearby_at(model, a)}")
        verdict.wrong_status_s[cluster] = beyond


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


def _detection(d: Done, series: Series, model: Model) -> float | None:
    """Seconds from the fault to the verdict that shows it, or None."""
    kind = d.kind
    until = d.healed + 5
    if kind == "job-kill":
        before = max((v for t, v in series.job_restarts if t <= d.start), default=0)
        at = next((t for t, v in series.job_restarts if t > d.start and v > before), None)
        return None if at is None else at - d.start
    if d.cluster_id is None or kind == "skew":
        return None
    if kind == "slow-disk":
        samples = series.replica_status.get((d.cluster_id, d.nodes[0]), [])
        at = _first(samples, d.start, until, lambda s: s != "caught_up")
        return None if at is None else at - d.start
    if len(d.nodes) >= 2:
        samples = series.quorum_status.get(d.cluster_id, [])
        at = _first(samples, d.start, until, lambda s: s in PAGING_STATUSES)
    else:
        samples = series.replica_status.get((d.cluster_id, d.nodes[0]), [])
        at = _first(samples, d.start, until, lambda s: s == "unreachable")
        quorum = series.quorum_status.get(d.cluster_id, [])
        if d.roles == ("leader",):
            # With another voter out no successor can win: without a live leader no replica is
            # judged (the old leader `unknown`, cause `down`) and the quorum's status is the verdict
            by_quorum = _first(quorum, d.start, until, lambda s: s in PAGING_STATUSES)
        else:
            # A follower out while another voter is too: the quorum keeps no leader, its
            # replicas are `unknown`, and the quorum's status is the verdict on both
            by_quorum = next((t for t, s in quorum if d.start <= t <= until and s in PAGING_STATUSES
                              and d.nodes[0] in model.voters_out(d.cluster_id, t)
                              and len(model.voters_out(d.cluster_id, t)) >= 2), None)
        at = min((x for x in (at, by_quorum) if x is not None), default=None)
    return None if at is None else at - d.start


def _nearby(model: Model, ep: Episode) -> str:
    return _nearby_at(model, ep.start)


def _nearby_at(model: Model, at: float) -> str:
    near = [d for d in model.done if d.start - 60 <= at <= d.recovered() + 60]
    return "faults near: " + ("; ".join(f"{_what(d)} {d.start - at:+.0f}..{d.healed - at:+.0f} s" for d in near)
                              or "none within 60 s")


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def report(verdict: Verdict, seed: int, minutes: float) -> list[str]:
    """The table per fault kind, the faults no verdict was demanded of, each failure, and the
    last line with the counts."""
    rows: dict[str, list] = defaultdict(list)
    for d, latency, expected in verdict.detections:
        rows[d.kind].append((latency, expected))
    lines = [f"{'fault':16} {'injected':>8} {'expected':>8} {'detected':>8} {'p50 s':>6} {'p99 s':>6} {'max s':>6}"]
    for kind in sorted(rows):
        got = [lat for lat, _ in rows[kind] if lat is not None]
        fmt = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
        lines.append(f"{kind:16} {len(rows[kind]):8} {sum(e for _, e in rows[kind]):8} {len(got):8} "
                     f"{fmt(percentile(got, .5)):>6} {fmt(percentile(got, .99)):>6} {fmt(max(got, default=None)):>6}")
    lines += [f"job back: {_what(d)}: first verdict after "
              f"{'-' if back is None else f'{back:.1f}'} s (bound {JOB_BACK_WITHIN_S:g} s)"
              for d, back in verdict.job_back]
    lines += [f"not expected: {n}" for n in verdict.not_expected]
    lines += [f"UNDETECTED: {u}" for u in verdict.undetected]
    for ep, near in verdict.false_pages:
        lines.append(f"FALSE PAGE: {ep.alert} {ep.labels} firing {ep.start:.0f}..{ep.end:.0f} "
                     f"({ep.end - ep.start:.0f} s); {near}")
    lines += [f"MISSED PAGE: {m}" for m in verdict.missed_pages]
    lines += [f"WRONG CAUSE: {w}" for w in verdict.wrong_causes]
    lines += [f"WRONG PAGING STATUS: {w}" for w in verdict.wrong_statuses]
    p99 = percentile(verdict.detected, .99)
    lines.append(f"nemesis: {len(verdict.detections)} faults, {len(verdict.detected)} detected, "
                 f"{len(verdict.false_pages)} false pages, {len(verdict.missed_pages)} missed pages, "
                 f"{len(verdict.undetected)} undetected or late, {len(verdict.wrong_causes)} wrong causes "
                 f"({verdict.wrong_cause_s:.0f} s beyond grace), {len(verdict.wrong_statuses)} wrong paging statuses "
                 f"({sum(verdict.wrong_status_s.values()):.0f} s beyond grace), detection p99 "
                 f"{'-' if p99 is None else f'{p99:.1f}'} s (seed {seed}, {minutes:g} min)")
    return lines
