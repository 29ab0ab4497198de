"""`deploy/run-local nemesis`: the seeded fault schedule on a running local stack, its verdicts
read back from Prometheus and judged (deploy/nemesis/model.py says by which rules)."""
from __future__ import annotations

import argparse
import json
import math
import random
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import yaml

from .judge import NOTIFY_WITHIN_S, Notification, Series, judge, report
from .model import Done, Model
from .schedule import INSTANT, QUIET_END_S, Planned, draw
from stack_control import LAUNCHER_LOG, StackClient, stop_stack  # deploy/ is on the path: __init__
from stack_control import start_stack as start_launcher
from stack_faults import BY_KIND, HEAL, MONITOR, PROJECT, request_node

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "alerts" / "quorum-health.rules.yml"
START_TIMEOUT_S = 420
CALM_TIMEOUT_S = 300
CALM_FOR_S = 10
PROJECT_CLUSTER = "local-quorum"
RANGE_CHUNK_S = 3600  # a range query returns at most 11,000 points a series: 1 s steps, an hour a query


def say(text: str) -> None:
    print(f"\033[1m[nemesis]\033[0m {text}", flush=True)


class StackControl(StackClient):
    """The running stack, through RUN_DIR/control.sock and RUN_DIR/stack.json, and its Prometheus."""

    def promql_range(self, query: str, start: float, end: float) -> list[dict]:
        results: dict[str, dict] = {}
        t = start
        while t < end:
            until = min(end, t + RANGE_CHUNK_S)
            params = {"query": query, "start": f"{t:.0f}", "end": f"{until:.0f}", "step": "1"}
            url = f"{self.state['urls']['prometheus']}/api/v1/query_range?{urllib.parse.urlencode(params)}"
            with urllib.request.urlopen(url, timeout=60) as r:
                for series in json.loads(r.read())["data"]["result"]:
                    key = json.dumps(series["metric"], sort_keys=True)
                    results.setdefault(key, {"metric": series["metric"], "values": []})["values"] += series["values"]
            t = until + 1
        return list(results.values())

    def promql(self, query: str) -> list[dict]:
        url = f"{self.state['urls']['prometheus']}/api/v1/query?{urllib.parse.urlencode({'query': query})}"
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.loads(r.read())["data"]["result"]


def rule_seconds() -> dict[str, float]:
    """Each alert's `for:` in seconds (the longest, for a name several rules share)."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    found: dict[str, float] = {}
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            text = str(rule.get("for", "0s"))
            unit = next(u for u in ("ms", "s", "m", "h") if text.endswith(u))
            found[rule["alert"]] = max(found.get(rule["alert"], 0), float(text[:-len(unit)]) * units[unit])
    return found


class Nemesis:
    def __init__(self, stack: StackControl, seed: int, minutes: float):
        self.stack = stack
        self.seed = seed
        self.minutes = minutes
        self.done: list[Done] = []
        self.open: dict[int, Done] = {}   # started, not yet healed: index -> fault
        self.t0 = 0.0

    def busy(self, cluster_id: str | None) -> set[int]:
        return {n for d in self.open.values() if d.cluster_id == cluster_id for n in d.nodes}

    def run(self) -> None:
        roles = self.stack.roles()
        plan = draw(self.seed, self.minutes, kafka_cutoff=roles["kafka_cutoff"])
        say(f"seed {self.seed}, {self.minutes:g} min: {len(plan)} faults planned"
            + ("" if roles["kafka_cutoff"] else " (no Kafka cutoffs: packet filter needs root)"))
        steps = sorted([(p.start_s, 1, p) for p in plan] + [(p.end_s, 0, p) for p in plan if p.kind not in INSTANT],
                       key=lambda s: (s[0], s[1], s[2].index))
        self.t0 = time.time()
        for at_s, starting, planned in steps:
            wait = self.t0 + at_s - time.time()
            if wait > 0:
                time.sleep(wait)  # the schedule's clock, not a condition to await
            if starting:
                self.start(planned)
            elif planned.index in self.open:
                self.heal(self.open.pop(planned.index))
        for d in list(self.open.values()):
            self.heal(d)
        self.open.clear()
        rest = self.t0 + self.minutes * 60 - time.time()
        say(f"every fault healed; the stack watched {max(0, rest):.0f} s more for its recovery")
        if rest > 0:
            time.sleep(rest)

    def _targets(self, p: Planned, roles: dict) -> tuple[str | None, list[int], list[str]] | str:
        """(cluster id, nodes, their roles) for a fault, or why it cannot land now."""
        rng = random.Random(f"{self.seed}:{p.index}")
        if p.cluster == MONITOR:
            return None, [], []
        side = roles["project"] if p.cluster == PROJECT else roles["kafka"]
        cluster_id = side["cluster_id"]
        busy = self.busy(cluster_id)
        leader, voters, observers = side["leader"], set(side["voters"]), set(side["observers"])
        role = p.target.removeprefix("kafka-")
        if leader is None and role in ("leader", "follower", "majority"):
            return f"{cluster_id} has no leader to tell its followers by ({side.get('no_leader') or 'none answers'})"
        if role == "leader":
            pool, count = {leader} - busy, 1
        elif role == "follower":
            pool, count = voters - {leader} - busy, 1
        elif role == "majority":
            pool, count = voters - busy, 2
        elif role == "observer":
            pool, count = observers - busy, 1
        else:  # collector: the node `quorum collect` holds its connection to
            pool, count = set(side["collector"]) - busy, 1
        if len(pool) < count:
            return f"no {role} free in {cluster_id} (busy {sorted(busy)}, leader {leader})"
        nodes = sorted(rng.sample(sorted(pool), count))
        return cluster_id, nodes, ["leader" if n == leader else "observer" if n in observers else "follower"
                                   for n in nodes]

    def start(self, p: Planned) -> None:
        late = time.time() - self.t0 - p.start_s  # the steps before took this long beyond their slot
        at = f"+{time.time() - self.t0:.0f} s" + (f" ({late:.0f} s late)" if late >= 2 else "")
        try:
            roles = self.stack.roles()
        except RuntimeError as e:  # the stack could not say who leads now: this fault does not land
            say(f"{at} #{p.index} {p.kind} {p.target}: skipped, no roles from the stack ({e})")
            return
        target = self._targets(p, roles)
        if isinstance(target, str):
            say(f"{at} #{p.index} {p.kind} {p.target}: skipped, {target}")
            return
        cluster_id, nodes, node_roles = target
        began = time.time()
        messages = []
        fault = BY_KIND[p.kind]
        for node in nodes or [None]:
            value = p.value if p.kind == "skew" else None
            ok, message = self.stack.ask(fault.action, request_node(p.cluster, node), value)
            messages.append(message)
            if not ok:
                say(f"{at} #{p.index} {p.kind} {p.target}: the stack refused ({message}); skipped")
                for healed in nodes[:len(messages) - 1]:
                    self.stack.ask(HEAL, request_node(p.cluster, healed))
                return
        done = Done(p, cluster_id, tuple(nodes), tuple(node_roles), began, time.time(), "; ".join(messages))
        self.done.append(done)
        if p.kind not in INSTANT:
            self.open[p.index] = done
        say(f"{at} #{p.index} {p.kind} {p.target} {list(nodes) or ''}: {done.message}")

    def heal(self, d: Done) -> None:
        for node in d.nodes:
            ok, message = self.stack.ask(HEAL, request_node(d.planned.cluster, node))
            if not ok:
                say(f"heal of #{d.planned.index} on {node} failed: {message}")
        d.healed = time.time()
        say(f"+{d.healed - self.t0:.0f} s #{d.planned.index} {d.kind} {list(d.nodes)} healed after "
            f"{d.healed - d.start:.0f} s")

    def series(self, end: float) -> Series:
        def samples(query: str):
            return self.stack.promql_range(query, self.t0, end)
        alerts = [(s["metric"], [float(t) for t, _ in s["values"]]) for s in samples('ALERTS{alertstate="firing"}')]
        replica_status: dict = {}
        for s in samples("quorum_replica_status == 1"):
            m = s["metric"]
            replica_status.setdefault((m["cluster"], int(m["replica"])), []).extend(
                (float(t), m["status"]) for t, _ in s["values"])
        replica_cause: dict = {}
        for s in samples("quorum_replica_cause == 1"):
            m = s["metric"]
            replica_cause.setdefault((m["cluster"], int(m["replica"])), []).extend(
                (float(t), m["cause"]) for t, _ in s["values"])
        quorum_status: dict = {}
        for s in samples("quorum_status == 1"):
            quorum_status.setdefault(s["metric"]["cluster"], []).extend(
                (float(t), s["metric"]["status"]) for t, _ in s["values"])
        restarts = [(float(t), float(v)) for s in samples("max(quorum_monitor_job_restarts_total)") for t, v in s["values"]]
        batches = [(float(t), float(v)) for s in samples("max(quorum_monitor_last_batch_timestamp_seconds)")
                   for t, v in s["values"]]
        for table in (replica_status, replica_cause, quorum_status):
            for key in table:
                table[key].sort()
        return Series(alerts, replica_status, replica_cause, quorum_status, sorted(restarts), sorted(batches))


def rfc3339_seconds(text: str | None) -> float:
    """Alertmanager's `startsAt` (RFC 3339, nanoseconds) as unix seconds; NaN when absent."""
    from datetime import datetime
    if not text:
        return math.nan
    head, _, fraction = text.rstrip("Z").partition(".")
    fraction = "".join(c for c in fraction if c.isdigit())
    whole = datetime.fromisoformat(head + "+00:00").timestamp()
    return whole + (float("0." + fraction) if fraction else 0.0)


def read_notifications(path: Path, since: float) -> list[Notification]:
    """The alerts Alertmanager notified since `since` (none yet: no file)."""
    if not path.exists():
        return []
    found = []
    for line in path.read_text().splitlines():
        n = json.loads(line)
        if n["received"] >= since:
            found.append(Notification(n["received"], n["status"], n["labels"], rfc3339_seconds(n.get("startsAt"))))
    return found


def await_calm(stack: StackControl, clusters: list[str]) -> None:
    """Both quorums healthy, every replica caught up and no alert firing, CALM_FOR_S in a row."""
    deadline, calm_since = time.monotonic() + CALM_TIMEOUT_S, None
    last = "nothing asked yet"
    while time.monotonic() < deadline:
        try:
            healthy = {r["metric"]["cluster"] for r in stack.promql('quorum_status{status="healthy"} == 1')}
            behind = stack.promql('quorum_replica_status{status!="caught_up"} == 1')
            alerts = stack.promql('ALERTS{alertstate="firing"}')
            last = (f"healthy {sorted(healthy)}, not caught up {[r['metric'].get('replica') for r in behind]}, "
                    f"firing {[r['metric'].get('alertname') for r in alerts]}")
            calm = set(clusters) <= healthy and not behind and not alerts
        except OSError as e:
            calm, last = False, str(e)
        calm_since = (calm_since or time.monotonic()) if calm else None
        if calm_since and time.monotonic() - calm_since >= CALM_FOR_S:
            return
        time.sleep(1)
    raise RuntimeError(f"the stack did not come calm within {CALM_TIMEOUT_S} s: {last}")


def start_stack(run_dir: Path) -> subprocess.Popen:
    say(f"starting the stack with --kafka-quorum (log {run_dir / LAUNCHER_LOG})")
    return start_launcher(run_dir, "--kafka-quorum", timeout_s=START_TIMEOUT_S)


def run_and_judge(stack: StackControl, seed: int, minutes: float, report_to: str | None) -> int:
    """The schedule run on the calm stack, then judged: the report printed (and written to
    `report_to`); 1 on any failure, 2 on a stack with no Kafka quorum."""
    state = stack.state
    if not state.get("kafka_quorum"):
        say("the stack runs no Kafka quorum: start it with --kafka-quorum")
        return 2
    clusters = [PROJECT_CLUSTER, state["kafka_quorum"]["cluster_id"]]
    say("waiting for both quorums healthy and no alert firing")
    await_calm(stack, clusters)
    nemesis = Nemesis(stack, seed, minutes)
    nemesis.run()
    end = time.time()
    time.sleep(5)  # the last second's samples scraped
    roles = stack.roles()
    model = Model(nemesis.done, {PROJECT_CLUSTER: set(roles["project"]["voters"]),
                                 clusters[1]: set(roles["kafka"]["voters"])},
                  {PROJECT_CLUSTER: set(roles["project"]["observers"]),
                   clusters[1]: set(roles["kafka"]["observers"])})
    for_s = rule_seconds()
    # the last page the schedule demands gets Alertmanager's time to notify it
    last = max((b for *_, b in model.required_pages(for_s, end)), default=end)
    time.sleep(max(0.0, min(NOTIFY_WITHIN_S, last + NOTIFY_WITHIN_S - time.time())))
    series = nemesis.series(end)
    kept = stack.state.get("notifications")  # where the stack's Alertmanager receiver keeps them
    series.notifications = read_notifications(Path(kept), nemesis.t0) if kept else None
    series.notifications_read = time.time()
    if series.notifications is None:
        say("the stack keeps no record of Alertmanager's notifications: they are not judged")
    else:
        say(f"{sum(n.status == 'firing' for n in series.notifications)} firing notifications from Alertmanager")
    verdict = judge(model, series, for_s, end)
    lines = report(verdict, seed, minutes)
    for line in lines:
        print(line, flush=True)
    if report_to:
        Path(report_to).write_text(json.dumps({
            "seed": seed, "minutes": minutes, "start": nemesis.t0, "end": end,
            "faults": [{"index": d.planned.index, "kind": d.kind, "target": d.planned.target,
                        "cluster": d.cluster_id, "nodes": list(d.nodes), "roles": list(d.roles),
                        "start": d.start, "healed": d.healed, "message": d.message} for d in nemesis.done],
            "report": lines}, indent=2))
    return 1 if verdict.failed else 0


def main(argv: list[str] | None = None, run_dir: str | None = None) -> int:
    p = argparse.ArgumentParser(prog="deploy/run-local nemesis", description=(
        "Start the local stack with a real Kafka KRaft quorum (--kafka-quorum), wait until it is calm, then run "
        "a schedule of overlapping faults drawn from the seed: freeze, kill and restart, network cut, slow disk "
        "and clock skew on the project's nodes; freeze, kill and packet-filter cut on Kafka's (followers, leaders, "
        "a majority, the node the collector polls through); the streaming job killed; the events Kafka "
        "restarted. Each fault is printed as it starts and heals. At the end every alert Prometheus fired and every "
        "verdict it holds is judged against the schedule (rules in deploy/nemesis/model.py, docs/reliability.md): "
        "a table per fault kind, a `job back:` line per job kill (seconds from the kill to the first verdict after "
        "it), each failure, then `nemesis: F faults, D detected, X false pages, Y missed pages, "
        "U undetected or late, C wrong causes (S s beyond grace), W wrong paging statuses (S s beyond grace), "
        "detection p99 T s`. Exits 1 on any of those failures. The same seed and minutes replay the same "
        "schedule."))
    p.add_argument("--seed", type=int, default=None, help="the schedule's seed (default: a new one, printed)")
    p.add_argument("--minutes", type=float, default=5.0, help="length of the run (default %(default)s)")
    p.add_argument("--attach", action="store_true",
                   help="run on the stack already running in --run-dir (started with --kafka-quorum) instead of "
                        "starting one")
    p.add_argument("--dry-run", action="store_true", help="print the schedule and stop")
    p.add_argument("--report", metavar="FILE", help="also write the faults and findings as JSON here")
    args = p.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1_000_000)
    if args.minutes * 60 <= QUIET_END_S + 30:
        p.error(f"--minutes must leave room for faults and the {QUIET_END_S:.0f} s of recovery at the end")
    if args.dry_run:
        for planned in draw(seed, args.minutes):
            print(planned.describe())
        return 0
    directory = Path(run_dir or ROOT / "run" / "nemesis").resolve()
    launcher = None if args.attach else start_stack(directory)
    try:
        return run_and_judge(StackControl(directory), seed, args.minutes, args.report)
    finally:
        if launcher is not None:
            stop_stack(launcher, 120)
