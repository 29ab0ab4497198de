"""The whole local stack, end to end, as `deploy/run-local` starts it: real quorum nodes, the
streaming job, Pushgateway, Prometheus with the alerting rules, Alertmanager.

The stack is shared with the other modules of tests/stack (see conftest.py): first nothing is done for two
minutes and no alert may fire; then a follower-only action named at the leader is refused, a follower (`chaos freeze follower`)
is frozen with SIGSTOP and must be reported
unreachable, with its alert firing within the alert's `for:` plus 10 s, `deploy/run-local status`
answering meanwhile with every node's row, and clear after SIGCONT;
then the leader (`chaos kill leader`) is killed and a new leader must show in the metrics within 10 s.
"""
from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.parse
import urllib.request

from tests.prometheus_tools import rule, seconds

# under quorum describe's 10 s timeout: the frozen node costs no whole timeout (two processes start
# meanwhile, the set-up's checks too: 4 s on a loaded 2-core machine without any node frozen)
STATUS_WITHIN_S = 8.0

from .conftest import ROOT, admin_client, alert_summaries, await_value, firing, leader_of, promql, promql_range, stack_cli


def test_quiet_stack_fires_no_alert_for_a_minute(stack):
    _run_dir, state = stack
    started = time.time()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert not firing(state), firing(state)
        time.sleep(5)
    # every sample of the minute, as Prometheus recorded it, not only the ones looked at
    assert not promql_range(state, 'ALERTS{alertstate="firing"}', started, time.time())
    assert promql(state, 'quorum_status{status="healthy"} == 1'), "the quorum should be healthy"


def test_frozen_follower_is_unreachable_and_alerts_then_clears(stack):
    run_dir, state = stack
    leader = await_value("a leader in the metrics", lambda: leader_of(state), 60)
    followers = sorted(int(n) for n, spec in state["nodes"].items() if spec["voter"] and int(n) != leader)
    # a follower's action named at the leader is refused, with the followers to choose from
    refused = stack_cli(run_dir, "chaos", "stall", str(leader))
    assert refused.returncode == 1
    assert f"node {leader} is the leader now: choose one of the followers {', '.join(map(str, followers))}" \
        in refused.stdout, refused.stdout
    out = stack_cli(run_dir, "chaos", "freeze", "follower")
    assert out.returncode == 0, out.stderr
    follower = int(re.search(r"node (\d+): stopped with SIGSTOP", out.stdout).group(1))
    assert follower == followers[0]
    frozen_at = time.monotonic()
    alert = rule("QuorumVoterUnreachable")
    try:
        # the bound: firing within the alert's for: plus 10 s of the SIGSTOP
        await_value("QuorumVoterUnreachable firing",
                    lambda: [a for a in firing(state, "QuorumVoterUnreachable")
                             if a["metric"].get("replica") == str(follower)],
                    seconds(alert["for"]) + 10 - (time.monotonic() - frozen_at), 0.5)
        print(f"QuorumVoterUnreachable firing {time.monotonic() - frozen_at:.1f} s after SIGSTOP "
              f"(for: {alert['for']})")
        assert promql(state, f'quorum_replica_status{{replica="{follower}",status="unreachable"}} == 1')
        status_answers_alone_with_every_node(run_dir, state, follower)
        # the page names the cause: a stopped process sends nothing at all
        assert alert_summaries(state, "QuorumVoterUnreachable", follower) == \
            [f"Voter {follower} of cluster local-quorum is unreachable, cause: down"]
    finally:  # the stack is shared: the next test needs the follower back whatever failed here
        out = stack_cli(run_dir, "chaos", "heal")
    assert out.returncode == 0, out.stderr
    await_value("the follower caught up again",
                lambda: promql(state, f'quorum_replica_status{{replica="{follower}",status="caught_up"}} == 1'), 30)
    await_value("QuorumVoterUnreachable cleared",
                lambda: not firing(state, "QuorumVoterUnreachable"),
                seconds(alert.get("keep_firing_for", "0s")) + 30)


def status_answers_alone_with_every_node(run_dir, state, frozen: int) -> None:
    """`deploy/run-local status` while a node hangs: every node's row, from the others, and
    nothing else said."""
    started = time.monotonic()
    status = subprocess.run([str(ROOT / "deploy" / "run-local"), "--run-dir", str(run_dir), "status"],
                            capture_output=True, text=True, timeout=60)
    took = time.monotonic() - started
    print(f"deploy/run-local status with node {frozen} frozen: {took:.1f} s")
    assert status.returncode == 0 and not status.stderr, status.stderr
    ours = status.stdout.split("the Kafka quorum (--kafka-quorum):")[0]  # a --kafka-quorum stack's comes after
    rows = [line.split() for line in ours.splitlines() if line.split()[-1:] in (["Leader"], ["Follower"], ["Observer"])]
    assert sorted(int(row[0]) for row in rows) == sorted(int(n) for n in state["nodes"]), status.stdout
    assert took < STATUS_WITHIN_S, status.stdout


def test_killed_leader_is_replaced_within_ten_seconds(stack):
    run_dir, state = stack
    old = await_value("a leader in the metrics", lambda: leader_of(state), 60)
    out = stack_cli(run_dir, "chaos", "kill", "leader")
    assert out.returncode == 0, out.stderr
    assert f"node {old}: killed" in out.stdout, out.stdout
    killed_at = time.monotonic()
    def new_leader():
        leader = leader_of(state)
        return leader if leader is not None and leader >= 0 and leader != old else None
    new = await_value("a new leader in the metrics", new_leader, 10, 0.5)
    assert new != old and time.monotonic() - killed_at <= 10
    print(f"leader {old} killed: leader {new} in the metrics after {time.monotonic() - killed_at:.1f} s")
    assert stack_cli(run_dir, "chaos", "heal").returncode == 0


# Shows a quorum's collector error only while its polls fail: the project's quorum has no collector.
EMPTY_WHILE_POLLS_ANSWER = {"Collector errors"}


def test_every_dashboard_panel_returns_data_from_the_running_stack(stack):
    """Runs after the chaos above, which has produced alerts, elections and a leader change too."""
    from confluent_kafka import Producer

    from deploy.dashboard_queries import panel_queries
    _run_dir, state = stack
    # a few records that break the contract, so the invalid-records panel has something to count
    producer = Producer({"bootstrap.servers": state["urls"]["kafka"], **admin_client(state)})
    for bad in (b"not json", b'{"type": "fetch", "version": 1}', b'{"type": "gossip", "version": 1}'):
        producer.produce("quorum-events", bad)
    assert producer.flush(10) == 0
    await_value("the invalid records counted",
                lambda: promql(state, "rate(quorum_monitor_invalid_records_total[1m])"), 60)
    end = time.time()
    empty = []
    for q in panel_queries(values={"cluster": "local-quorum"}):
        # over the stack's lifetime, instant panels too: "firing alerts" is rightly empty once healed
        params = {"query": q.expr, "start": str(end - 600), "end": str(end), "step": "5"}
        url = f"{state['urls']['prometheus']}/api/v1/query_range?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=20) as r:
            answer = json.loads(r.read())
        assert answer["status"] == "success", (q.panel, q.expr, answer)
        if not answer["data"]["result"] and q.panel not in EMPTY_WHILE_POLLS_ANSWER:
            empty.append(f"{q.panel} [{q.ref_id}]: {q.expr}")
    assert not empty, "panels without data:\n" + "\n".join(empty)
