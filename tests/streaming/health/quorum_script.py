"""A scripted quorum for health tests: records a leader and its nodes would publish, step by step.

Every 100 ms of synthetic time the leader handles one fetch from each follower that is not
silent; every 500 ms it appends a NoOp (its log end offset grows by one) and the high watermark
follows the voters; every second each live node publishes metrics. Followers can be switched
between behaviours mid-script:
  follow  fetch at the leader's log end (caught up)
  stuck   keep fetching at the same offset (fetching, never catching up)
  silent  no fetches at all
Each node's clock can be skewed (`skew[node]` ms): a node stamps its own records, the leader its
fetch records, on its own clock. `snapshot()` is what a collector's DescribeQuorum would publish.
"""
from __future__ import annotations

from typing import Any

from quorum import events as E

T0 = 1_700_000_000_000
CLUSTER, TOPIC, PARTITION = "c1", "__cluster_metadata", 0
KEY = (CLUSTER, TOPIC, PARTITION)


class QuorumScript:
    # the leader's fetch records carry its view of the replica (set by the reduction differential)
    publishes_view = False

    def __init__(self, voters=(1, 2, 3), observers=(), leader=1, epoch=5, t0=T0, cluster=CLUSTER):
        self.cluster, self.voters, self.observers = cluster, tuple(voters), tuple(observers)
        self.leader, self.epoch, self.t = leader, epoch, t0
        self.leader_leo = self.hw = 100
        self.leo = {r: 100 for r in (*voters, *observers)}
        self.mode = {r: "follow" for r in (*voters, *observers) if r != leader}
        self.leader_talks = True     # the leader publishes fetch records and metrics
        self.noops = True            # the leader appends NoOps (the high watermark advances)
        self.skew: dict[int, int] = {}  # node -> ms its clock is ahead (negative: behind)
        self.last_fetch = {r: t0 for r in self.leo}  # leader-clock time of each replica's last fetch
        self.last_caught_up = {r: t0 for r in self.leo}

    def fetch(self, replica: int, offset: int, *, leader=None, epoch=None, outcome="valid",
              view: bool = False) -> dict[str, Any]:
        """`view`: with the leader's KIP-836 state of the replica after this fetch, as the
        project's nodes publish it (a writer before that publishes none)."""
        role = "voter" if replica in self.voters else "observer"
        leader = self.leader if leader is None else leader
        state = ()
        if view:
            skew = self.skew.get(leader, 0)
            state = (offset, self.last_fetch[replica] + skew, self.last_caught_up[replica] + skew)
        return E.to_dict(E.Fetch(self.cluster, TOPIC, PARTITION, self.clock(leader), leader,
                                 self.epoch if epoch is None else epoch, replica, role, offset,
                                 self.epoch, max(self.leader_leo, offset), min(self.hw, self.leader_leo), outcome,
                                 *state))

    def metrics(self, node: int, *, state=None, leo=None, epoch=None, leader=None) -> dict[str, Any]:
        if state is None:
            state = "leader" if node == self.leader else ("follower" if node in self.voters else "observer")
        leo = self.leo[node] if leo is None else leo
        return E.to_dict(E.Metrics(self.cluster, TOPIC, PARTITION, self.clock(node), node, state,
                                   self.leader if leader is None else leader,
                                   self.epoch if epoch is None else epoch, leo, min(self.hw, leo), -1, -1, -1, -1,
                                   self.voters))

    def clock(self, node: int) -> int:
        return self.t + self.skew.get(node, 0)

    def state_change(self, node: int, to_state: str, *, epoch=None, leader=-1, from_state="follower") -> dict[str, Any]:
        return E.to_dict(E.StateChange(self.cluster, TOPIC, PARTITION, self.clock(node), node, from_state, to_state,
                                       self.epoch if epoch is None else epoch, leader, "scripted"))

    def snapshot(self, *, collector_skew: int = 0, interval_ms: int = 1000) -> dict[str, Any]:
        """DescribeQuorum as the leader answers it (KIP-836 timestamps on the leader's clock,
        the leader itself at its now), stamped by a collector whose clock is skewed."""
        lc = self.clock(self.leader)

        def state(r: int) -> dict[str, Any]:
            if r == self.leader:
                return {"replica_id": r, "log_end_offset": self.leader_leo, "last_fetch_timestamp_ms": lc,
                        "last_caught_up_timestamp_ms": lc}
            skew = self.skew.get(self.leader, 0)
            return {"replica_id": r, "log_end_offset": self.leo[r], "last_fetch_timestamp_ms": self.last_fetch[r] + skew,
                    "last_caught_up_timestamp_ms": self.last_caught_up[r] + skew}
        return {"type": "quorum_snapshot", "version": 1, "cluster_id": self.cluster, "topic": TOPIC,
                "partition": PARTITION, "time_ms": self.t + collector_skew, "leader_id": self.leader,
                "leader_epoch": self.epoch, "high_watermark": self.hw,
                "voters": [state(v) for v in self.voters], "observers": [state(o) for o in self.observers],
                "source": "broker:9092", "poll_interval_ms": interval_ms, "latency_ms": 3, "answered_by": self.leader}

    def poll_error(self, *, error="NOT_LEADER_OR_FOLLOWER", code=6, interval_ms=1000,
                   collector_skew: int = 0) -> dict[str, Any]:
        """A failed poll, stamped by the same (skewed) collector clock as its snapshots."""
        return {"type": "quorum_poll_error", "version": 1, "cluster_id": self.cluster, "topic": TOPIC,
                "partition": PARTITION, "time_ms": self.t + collector_skew, "source": "broker:9092", "poll_interval_ms": interval_ms,
                "latency_ms": 5, "error_code": code, "error": error, "answered_by": 2, "leader_id": -1,
                "leader_epoch": -1}

    def step(self) -> list[dict[str, Any]]:
        self.t += 100
        out = []
        if self.noops and self.t % 500 == 0:
            self.leader_leo += 1
        self.leo[self.leader] = self.leader_leo
        for r, mode in self.mode.items():
            if mode == "silent":
                continue
            offset = self.leader_leo if mode == "follow" else self.leo[r]
            self.leo[r] = offset
            self.last_fetch[r] = self.t
            if offset >= self.leader_leo:
                self.last_caught_up[r] = self.t
            if self.leader_talks:
                out.append(self.fetch(r, offset, view=self.publishes_view))
        ends = sorted((self.leo[v] for v in self.voters), reverse=True)
        self.hw = max(self.hw, ends[len(self.voters) // 2])
        if self.t % 1000 == 0:
            for node in (*self.voters, *self.observers):
                if node == self.leader and not self.leader_talks:
                    continue
                if node != self.leader and self.mode.get(node) == "silent":
                    continue
                out.append(self.metrics(node))
        return out

    def run(self, ms: int) -> list[dict[str, Any]]:
        out = []
        for _ in range(ms // 100):
            out.extend(self.step())
        return out
