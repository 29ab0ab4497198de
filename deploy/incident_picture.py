"""Draw a real incident from the local stack, from Prometheus' own data.

Starts the local stack (deploy/local_stack.py, in a run directory of its own), waits for a
healthy quorum, cuts a follower off (`chaos cutoff follower`: its process runs, its traffic is
dropped), keeps it cut off until QuorumVoterUnreachable fires, heals it and waits until the
alert resolves. Then it asks Prometheus for that time range (range queries, one point a second)
and plots what the dashboard's main panels show: the quorum's status, each replica's status
with its cause, the replicas' lag, and the alert's state. One PNG; the stack is stopped.

    .venv/bin/python deploy/incident_picture.py                 # writes docs/incident.png
    .venv/bin/python deploy/incident_picture.py --out /tmp/incident.png --run-dir /tmp/incident
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "deploy"))

from stack_control import LAUNCHER_LOG, StackClient, start_stack, stop_stack  # noqa: E402

CLUSTER = "local-quorum"
ALERT = "QuorumVoterUnreachable"
QUIET_S = 15          # healthy time shown before the fault and after the alert resolves
START_TIMEOUT_S = 360
STEP_TIMEOUT_S = 120
STATUS_COLOURS = {"healthy": "#56a64b", "caught_up": "#56a64b", "degraded": "#f2cc0c", "lagging": "#f2cc0c",
                  "stalled": "#ff9830", "unreachable": "#e02f44", "leaderless": "#e02f44", "no_majority": "#e02f44",
                  "split_brain": "#8f3bb8", "unknown": "#8e8e8e"}
ALERT_COLOURS = {"pending": "#f2cc0c", "firing": "#e02f44"}


def say(text: str) -> None:
    print(f"[incident] {text}", flush=True)


def promql(prometheus: str, query: str) -> list[dict]:
    url = f"{prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())["data"]["result"]


def promql_range(prometheus: str, query: str, start: float, end: float) -> list[dict]:
    params = {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": "1"}
    with urllib.request.urlopen(f"{prometheus}/api/v1/query_range?" + urllib.parse.urlencode(params),
                                timeout=30) as r:
        return json.loads(r.read())["data"]["result"]


def await_condition(what: str, check, timeout_s: float = STEP_TIMEOUT_S):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.5)
    raise RuntimeError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def chaos(run_dir: Path, *args: str) -> str:
    ok, message = StackClient(run_dir).ask(*args)
    if not ok:
        raise RuntimeError(f"chaos {' '.join(args)}: {message}")
    return message


def healthy(prometheus: str) -> bool:
    return bool(promql(prometheus, f'quorum_status{{cluster="{CLUSTER}",status="healthy"}} == 1')) and not \
        promql(prometheus, f'quorum_replica_status{{cluster="{CLUSTER}",status!="caught_up"}} == 1') and not \
        promql(prometheus, 'ALERTS{alertstate="firing"}')


def alert_firing(prometheus: str, replica: int) -> bool:
    return bool(promql(prometheus, f'ALERTS{{alertname="{ALERT}",alertstate="firing",cluster="{CLUSTER}",'
                                    f'replica="{replica}"}}'))


@dataclass
class Incident:
    """What was done when (Unix seconds), and Prometheus' series over it."""
    replica: int
    start: float
    cut: float
    fired: float
    healed: float
    resolved: float
    end: float
    series: dict[str, list[dict]] = field(default_factory=dict)


def run_incident(run_dir: Path, prometheus: str) -> Incident:
    """On a running stack: quiet, cut a follower off until its alert fires, heal, quiet again."""
    await_condition("a healthy quorum with no alert firing", lambda: healthy(prometheus), START_TIMEOUT_S)
    start = time.time()
    await_condition(f"{QUIET_S} s of a healthy quorum", lambda: time.time() - start >= QUIET_S and healthy(prometheus))
    message = chaos(run_dir, "cutoff", "follower")
    cut = time.time()
    replica = int(re.search(r"node (\d+)", message).group(1))
    say(f"{message} ({cut - start:.0f} s in)")
    await_condition(f"{ALERT} firing for node {replica}", lambda: alert_firing(prometheus, replica))
    fired = time.time()
    say(f"{ALERT} firing {fired - cut:.1f} s after the cut")
    await_condition("the alert to have fired a while", lambda: time.time() - fired >= QUIET_S / 3)
    chaos(run_dir, "heal")
    healed = time.time()
    await_condition(f"{ALERT} resolved", lambda: not alert_firing(prometheus, replica))
    resolved = time.time()
    say(f"healed; {ALERT} resolved {resolved - healed:.1f} s later")
    await_condition(f"{QUIET_S} s after the alert resolved", lambda: time.time() - resolved >= QUIET_S)
    incident = Incident(replica, start, cut, fired, healed, resolved, time.time())
    incident.series = {
        "quorum": promql_range(prometheus, f'quorum_status{{cluster="{CLUSTER}"}} == 1', start, incident.end),
        "replica": promql_range(prometheus, f'quorum_replica_status{{cluster="{CLUSTER}"}} == 1', start, incident.end),
        "cause": promql_range(prometheus, f'quorum_replica_cause{{cluster="{CLUSTER}"}} == 1', start, incident.end),
        "lag": promql_range(prometheus, f'quorum_replica_lag_seconds{{cluster="{CLUSTER}"}}', start, incident.end),
        "alert": promql_range(prometheus, f'ALERTS{{alertname="{ALERT}",cluster="{CLUSTER}"}}', start,
                              incident.end),
    }
    return incident


def spans(series: list[dict], label: str, key: str = "replica") -> dict[str, list[tuple[float, float, str]]]:
    """State-set series as (start, end, state) runs per `key` (a replica; "" for the quorum)."""
    points: dict[str, dict[float, str]] = {}
    for s in series:
        for t, _ in s["values"]:
            points.setdefault(s["metric"].get(key, ""), {})[float(t)] = s["metric"][label]
    runs: dict[str, list[tuple[float, float, str]]] = {}
    for who, by_time in points.items():
        for t in sorted(by_time):
            state = by_time[t]
            current = runs.setdefault(who, [])
            if current and current[-1][2] == state and t - current[-1][1] <= 1.5:
                current[-1] = (current[-1][0], t + 1, state)
            else:
                current.append((t, t + 1, state))
    return runs


def plot(incident: Incident, out: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    t0 = incident.start
    fig, axes = plt.subplots(4, 1, figsize=(11, 8.5), sharex=True,
                             gridspec_kw={"height_ratios": [1, 2.4, 2, 1]})
    fig.suptitle(f"A voter cut off and healed: node {incident.replica} of {CLUSTER} "
                 f"(Prometheus range queries, {time.strftime('%Y-%m-%d', time.gmtime(t0))})", fontsize=12)

    def timeline(ax, runs: dict[str, list[tuple[float, float, str]]], rows: list[str], names: list[str],
                 colours: dict[str, str], notes: dict[str, list[tuple[float, float, str]]] | None = None):
        for y, who in enumerate(rows):
            for a, b, state in runs.get(who, []):
                ax.broken_barh([(a - t0, b - a)], (y - 0.4, 0.8), color=colours.get(state, "#8e8e8e"))
                if b - a >= 6:
                    ax.text((a + b) / 2 - t0, y, state.replace("_", " "), ha="center", va="center", fontsize=8)
            for a, b, cause in (notes or {}).get(who, []):
                if b - a >= 3:
                    ax.text((a + b) / 2 - t0, y - 0.28, f"cause: {cause}", ha="center", va="center", fontsize=7,
                            style="italic")
        ax.set_yticks(range(len(rows)), names)
        ax.set_ylim(-0.6, len(rows) - 0.4)

    quorum = spans(incident.series["quorum"], "status", key="cluster")
    timeline(axes[0], quorum, [CLUSTER], ["quorum"], STATUS_COLOURS)
    axes[0].set_title("quorum status", loc="left", fontsize=9)

    replicas = spans(incident.series["replica"], "status")
    causes = spans(incident.series["cause"], "cause")
    ids = sorted(replicas, key=lambda r: int(r) if r.isdigit() else 0)
    roles = {s["metric"].get("replica"): s["metric"].get("role", "") for s in incident.series["replica"]}
    timeline(axes[1], replicas, ids, [f"{roles.get(r, '')} {r}" for r in ids], STATUS_COLOURS, causes)
    axes[1].set_title("replica status and cause", loc="left", fontsize=9)

    for s in incident.series["lag"]:
        values = [(float(t) - t0, float(v)) for t, v in s["values"] if v not in ("NaN", "+Inf", "-Inf")]
        if values:
            axes[2].plot(*zip(*values), label=f"replica {s['metric'].get('replica')}", linewidth=1.4)
    axes[2].set_ylabel("seconds")
    axes[2].set_title("replica lag (leader's clock − last caught up)", loc="left", fontsize=9)
    axes[2].legend(fontsize=8, loc="upper left")

    alert = spans(incident.series["alert"], "alertstate")
    timeline(axes[3], alert, [str(incident.replica)], [f"{ALERT}\nreplica {incident.replica}"], ALERT_COLOURS)
    axes[3].set_title("alert", loc="left", fontsize=9)
    axes[3].set_xlabel("seconds since the start")

    for ax in axes:
        for at, what in ((incident.cut, "cut off"), (incident.healed, "healed")):
            ax.axvline(at - t0, color="black", linestyle="--", linewidth=0.8)
        ax.grid(axis="x", alpha=0.3)
    axes[0].text(incident.cut - t0, 0.62, " cut off", fontsize=8, va="bottom")
    axes[0].text(incident.healed - t0, 0.62, " healed", fontsize=8, va="bottom")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=str(ROOT / "docs" / "incident.png"), help="the PNG (default %(default)s)")
    p.add_argument("--run-dir", default=None, help="the stack's run directory (default: a temporary one)")
    args = p.parse_args(argv)
    run_dir = Path(args.run_dir or tempfile.mkdtemp(prefix="incident-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    say(f"starting the local stack in {run_dir} (log {run_dir / LAUNCHER_LOG})")
    proc = start_stack(run_dir, timeout_s=START_TIMEOUT_S)
    try:
        incident = run_incident(run_dir, StackClient(run_dir).state["urls"]["prometheus"])
    finally:
        stop_stack(proc, 90)
    say(f"wrote {plot(incident, Path(args.out))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
