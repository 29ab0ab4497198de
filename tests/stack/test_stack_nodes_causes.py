"""Why a voter is not caught up, on real node processes through the local stack's chaos
commands: each fault must get its cause (`quorum_replica_cause`), and the time from the fault
to the cause is printed. A stalled voter (its replication throttled below the leader's appends)
must also fire QuorumVoterStalled; the leader cut off from everyone must show as a network
partition of the leader (on real nodes the others elect a new leader within the fetch timeout,
before the job sees the old one alone, so it is named as the previous leader cut off from every
voter), then the new leader's side healthy. Each test heals and awaits a
healthy quorum; the node restarted under another cluster id goes last (its records then form a
second, leaderless "cluster" of one node, which is what the monitor should show)."""
from __future__ import annotations

import time

import pytest

from tests.prometheus_tools import rule, seconds

from .conftest import (CLUSTER, alert_summaries, await_healthy, await_value, chaos, firing, health_events, leader_of,
                       promql)

CAUSE_TIMEOUT_S = 45


def a_follower(state) -> int:
    leader = await_value("a leader", lambda: leader_of(state), 60)
    return next(int(n) for n, spec in sorted(state["nodes"].items()) if spec["voter"] and int(n) != leader)


def cause_of(state, replica: int) -> str | None:
    found = promql(state, f'quorum_replica_cause{{cluster="{CLUSTER}",replica="{replica}"}} == 1')
    return found[0]["metric"]["cause"] if found else None


@pytest.mark.parametrize("action, cause", [
    ("cutoff", "partitioned"),
    ("freeze", "down"),
    ("kill", "down"),
    ("slow-disk", "slow"),
    ("stall", "behind"),
    ("wrong-cluster", "rejected"),
])
def test_a_fault_on_a_voter_gets_its_cause(stack, action, cause):
    run_dir, state = stack
    await_healthy(state, 180)
    follower = a_follower(state)
    chaos(run_dir, action, str(follower))
    at = time.monotonic()
    try:
        seen = await_value(f"cause {cause} for node {follower} after chaos {action}",
                           lambda: cause_of(state, follower) == cause, CAUSE_TIMEOUT_S, 0.5)
        print(f"chaos {action} {follower}: cause {cause} after {time.monotonic() - at:.1f} s")
        assert seen
        if action == "stall":
            alert = rule("QuorumVoterStalled")
            await_value("QuorumVoterStalled firing",
                        lambda: [a for a in firing(state, "QuorumVoterStalled")
                                 if a["metric"].get("replica") == str(follower)],
                        seconds(alert["for"]) + 60, 1.0)
            print(f"QuorumVoterStalled firing {time.monotonic() - at:.1f} s after the throttle")
            # the page names the cause the job found
            assert alert_summaries(state, "QuorumVoterStalled", follower) == \
                [f"Voter {follower} of cluster {CLUSTER} fetches but does not catch up, cause: behind"]
    finally:
        chaos(run_dir, "heal")
    if action != "wrong-cluster":  # that node's other "cluster" stays leaderless until the job forgets it
        await_healthy(state, 180)


def test_a_leader_cut_off_from_everyone_is_a_partition_of_the_leader_then_the_new_side_is_healthy(stack):
    run_dir, state = stack
    await_healthy(state, 180)
    old = await_value("a leader", lambda: leader_of(state), 60)
    since_ms = int(time.time() * 1000)
    chaos(run_dir, "partition-leader")
    at = time.monotonic()
    try:
        def partition_named():
            return [e for e in health_events(state, since_ms)
                    if e.get("cluster_id") == CLUSTER and f"leader {old} cut off from every voter" in (e.get("reason") or "")]
        await_value(f"the leader {old} named as cut off", partition_named, CAUSE_TIMEOUT_S, 1.0)
        print(f"leader {old} cut off: named a partition of the leader after {time.monotonic() - at:.1f} s")
        new = await_value("a new leader", lambda: (leader_of(state) or old) != old and leader_of(state),
                          CAUSE_TIMEOUT_S, 0.5)
        await_value(f"the old leader {old} partitioned",
                    lambda: cause_of(state, old) == "partitioned", CAUSE_TIMEOUT_S, 0.5)
        assert promql(state, f'quorum_network_partition{{cluster="{CLUSTER}"}} == 1')
        # the new leader's side: a majority caught up, the quorum answering
        await_value("the new leader's side holding a majority", lambda: promql(
            state, f'quorum_status{{cluster="{CLUSTER}",status=~"healthy|degraded"}} == 1'), CAUSE_TIMEOUT_S, 0.5)
        print(f"leader {new} elected on the majority's side, {old} partitioned, "
              f"{time.monotonic() - at:.1f} s after the cut")
    finally:
        chaos(run_dir, "heal")
    await_healthy(state, 180)
