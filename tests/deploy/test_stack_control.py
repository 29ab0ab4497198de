"""The local stack's control socket (deploy/stack_control.py) and its fault kinds
(deploy/stack_faults.py), without a stack: a request and its reply both ways, the roles query in
its own form and in the older one that rode on chaos, a failure carried back as a reply; and every
kind the chaos command offers or the nemesis schedule draws is one fault object's."""
from __future__ import annotations

import json

from deploy.nemesis.schedule import INSTANT, KINDS
from deploy.stack_control import StackClient, serve
from deploy.stack_faults import BY_KIND, CHOICES, HEAL, KAFKA, KAFKA_ACTIONS, MONITOR, NODE_ACTIONS, PROJECT, find


def test_the_client_and_the_server_speak_one_request_and_one_reply(tmp_path):
    asked = []

    def answer(request):
        asked.append(request)
        if request.get("op") == "roles" or request.get("action") == "roles":
            return json.dumps({"project": {"leader": 1}})
        if request["action"] == "bogus":
            raise ValueError("unknown chaos action 'bogus'")
        return f"{request['action']} on {request['node']} ({request['value']})"

    stopping: list = []
    server = serve(tmp_path, answer, stopping)
    try:
        client = StackClient(tmp_path, timeout_s=10)
        assert client.serving()
        assert client.ask("skew", "follower", -3000) == (True, "skew on follower (-3000)")
        assert client.ask("bogus") == (False, "unknown chaos action 'bogus'")
        assert client.roles() == {"project": {"leader": 1}}
        assert client.request({"action": "roles"}) == (True, json.dumps({"project": {"leader": 1}}))
    finally:
        stopping.append(1)
        server.close()
    assert asked[2] == {"op": "roles"}


def test_every_kind_offered_or_drawn_is_one_fault_object():
    assert CHOICES == ["stall", "slow-disk", "wrong-cluster", "cutoff", "freeze", "kill", "skew", "partition-leader",
                       "job-kill", "events-restart", HEAL]
    for action in CHOICES[:-1]:
        assert find(action, "1").action == action
    for action in KAFKA_ACTIONS:
        assert find(action, "kafka-leader").cluster == KAFKA
    assert find("stall", "kafka-1") is None and find("nothing", 1) is None
    assert set(KINDS) <= set(BY_KIND)
    for kind, (cluster, _, _) in KINDS.items():
        assert BY_KIND[kind].cluster == cluster and BY_KIND[kind].kind == kind
    assert set(INSTANT) == {"job-kill", "events-restart"}
    assert {BY_KIND[k].cluster for k in INSTANT} == {MONITOR}
    assert all(BY_KIND[a].cluster == PROJECT for a in NODE_ACTIONS)


class FakeStack:
    """deploy/stack_launcher.py's Stack with its nodes' processes and control sockets played: what the
    faults do to them is recorded."""

    def __new__(cls, tmp_path):
        from argparse import Namespace

        from deploy.stack_launcher import Stack
        from local_services import NodeSpec
        stack = Stack(tmp_path, Namespace())
        stack.nodes = {i: NodeSpec(i, f"127.0.0.1:{9000 + i}", tmp_path / f"{i}.yaml", i <= 3) for i in (1, 2, 3, 4)}
        stack.did = []
        stack.injected = {}
        stack.leader = lambda: 1
        stack.signal_node = lambda node_id, sig: stack.did.append(("signal", node_id, int(sig)))
        stack.respawn_node = lambda node_id: stack.did.append(("respawn", node_id))
        stack.node_running = lambda node_id: True
        stack.node_fault = lambda node_id, *words: stack.injected.setdefault(node_id, {}).update({words[0]: True})

        def node_control(node_id, command):
            if command["op"] == "clear":
                return stack.injected.pop(node_id, {})
            return {"faults": dict(stack.injected.get(node_id, {}))}
        stack.node_control = node_control
        return stack


def test_chaos_dispatches_each_kind_to_its_node_and_heal_undoes_it_in_order(tmp_path):
    import signal
    stack = FakeStack(tmp_path)
    assert stack.chaos("freeze", "follower") == "node 2: stopped with SIGSTOP"
    assert stack.chaos("kill", "follower") == "node 3: killed"
    assert stack.chaos("cutoff", "4") == "node 4: all traffic in and out dropped"
    assert stack.chaos("skew", 4, -3000) == "node 4: its records are stamped -3000 ms off the true clock"
    assert stack.chaos("partition-leader", None) == "leader 1: cut off from every peer"
    assert stack.did == [("signal", 2, int(signal.SIGSTOP)), ("signal", 3, int(signal.SIGKILL))]
    for action, node, why in (("stall", 1, "acts on a follower, and node 1 is the leader now"),
                              ("skew", 4, "skew needs milliseconds"), ("bogus", 1, "unknown chaos action 'bogus'"),
                              ("freeze", "kafka-leader", "no Kafka quorum runs"),
                              ("stall", "kafka-1", "no Kafka quorum runs"), ("kill", "nobody", "needs a node")):
        try:
            stack.chaos(action, node)
        except ValueError as e:
            assert why in str(e), (action, node, e)
        else:
            raise AssertionError(f"{action} {node} was carried out")
    assert stack.heal(2) == "node 2 continued"
    assert stack.heal(None) == "node 1: pause cleared; node 3 restarted; node 4: pause, skew cleared"
    assert stack.heal(None) == "faults cleared on every node"
    assert stack.did[2:] == [("signal", 2, int(signal.SIGCONT)), ("respawn", 3)]
    assert json.loads(stack.answer({"action": "roles"}))["project"]["leader"] == 1
    assert stack.answer({"op": "roles"}) == stack.answer({"action": "roles"})
