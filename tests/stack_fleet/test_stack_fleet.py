"""The local stack watching a fleet besides its own quorum (`deploy/run-local --fleet N`): N
simulated Kafka clusters served from one process, one fleet collector, the job with a steady
quorum's row every 10 s. Every quorum comes up healthy, a minute passes with no alert at all, and
a follower of the stack's own quorum frozen still pages with its cause, while no cluster of the
fleet pages.

Opt-in (it starts a stack of its own, some minutes on 2 cores): QUORUM_FLEET_STACK=500
deploy/run-tests tests/stack_fleet."""
from __future__ import annotations

import os
import time

import pytest

from deploy.stack_control import StackClient, start_stack, stop_stack
from tests.prometheus_tools import rule, seconds
from tests.stack.conftest import (CLUSTER, START_TIMEOUT_S, alert_summaries, await_value, firing, promql, promql_range,
                                  stack_cli)

FLEET = int(os.environ.get("QUORUM_FLEET_STACK", "0"))
pytestmark = pytest.mark.skipif(not FLEET, reason="set QUORUM_FLEET_STACK=N (e.g. 500) to run the stack with a fleet")


@pytest.fixture(scope="module")
def fleet_stack(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("fleet-stack")
    launcher = start_stack(run_dir, "--fleet", str(FLEET), timeout_s=START_TIMEOUT_S)
    try:
        yield run_dir, StackClient(run_dir).state
    finally:
        stop_stack(launcher, 90)


def healthy_quorums(state) -> int:
    result = promql(state, 'count(quorum_status{status="healthy"} == 1)')
    return int(float(result[0]["value"][1])) if result else 0


def test_a_fleet_comes_up_quiet_and_a_fault_on_the_real_quorum_still_pages_with_its_cause(fleet_stack):
    run_dir, state = fleet_stack
    started = time.monotonic()
    await_value(f"all {FLEET + 1} quorums healthy", lambda: healthy_quorums(state) == FLEET + 1, 300, 5)
    print(f"{FLEET + 1} quorums healthy {time.monotonic() - started:.0f} s after the stack was ready")
    quiet_from = time.time()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert not firing(state), firing(state)
        time.sleep(5)
    assert not promql_range(state, 'ALERTS{alertstate="firing"}', quiet_from, time.time())

    out = stack_cli(run_dir, "chaos", "freeze", "follower")
    assert out.returncode == 0, out.stderr
    follower = int(out.stdout.split("node ", 1)[1].split(":", 1)[0])
    frozen_at = time.monotonic()
    alert = rule("QuorumVoterUnreachable")
    try:
        await_value("QuorumVoterUnreachable firing",
                    lambda: [a for a in firing(state, "QuorumVoterUnreachable")
                             if a["metric"].get("replica") == str(follower)],
                    seconds(alert["for"]) + 10 - (time.monotonic() - frozen_at), 0.5)
        print(f"QuorumVoterUnreachable firing {time.monotonic() - frozen_at:.1f} s after SIGSTOP")
        assert alert_summaries(state, "QuorumVoterUnreachable", follower) == \
            [f"Voter {follower} of cluster {CLUSTER} is unreachable, cause: down"]
        # nothing else meanwhile: no cluster of the fleet, no other replica; of the quorum's own
        # alerts only the warning that is true now (3 voters, one out: one failure from no majority)
        expected = {("QuorumVoterUnreachable", str(follower)), ("QuorumOneFailureFromNoMajority", None)}
        others = [a["metric"] for a in firing(state)
                  if (a["metric"].get("alertname"), a["metric"].get("replica")) not in expected
                  or a["metric"].get("cluster") != CLUSTER]
        assert not others, others
    finally:
        assert stack_cli(run_dir, "chaos", "heal").returncode == 0
    assert healthy_quorums(state) >= FLEET
