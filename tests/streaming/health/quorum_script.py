"""A scripted quorum for health tests: records a leader and its nodes would publish, step by step.

Every 100 ms of synthetic time the leader handles one fetch from each follower that is not
silent; every 500 ms it appends a NoOp (its log end offset grows by one) and the high watermark
follows the voters; every second each live node publishes metrics. Followers can be switched
between behaviours mid-script:
  follow  fetch at the leader's log end (caught up)
  stuck   keep fetching at the same offset (fetching, never catching up)
  silent  no fetches at all
"""
from __future__ import annotations

from typing import Any

from quorum import events as E

T0 = 1_700_000_000_000
CLUSTER, TOPIC, PARTITION = "c1", "__cluster_metadata", 0
KEY = (CLUSTER, TOPIC, PARTITION)


class QuorumScript:
    def __init__(self, voters=(1, 2, 3), observers=(), leader=1, epoch=5, t0=T0, cluster=CLUSTER):
        self.cluster, self.voters, self.observers = cluster, tuple(voters), tuple(observers)
        self.leader, self.epoch, self.t = leader, epoch, t0
        self.leader_leo = self.hw = 100
        self.leo = {r: 100 for r in (*voters, *observers)}
        self.mode = {r: "follow" for r in (*voters, *observers) if r != leader}
        self.leader_talks = True     # the leader publishes fetch records and metrics
        self.noops = True            # the leader appends NoOps (the high watermark advances)

    def fetch(self, replica: int, offset: int, *, leader=None, epoch=None, outcome="valid") -> dict[str, Any]:
        role = "voter" if replica in self.voters else "observer"
        return E.to_dict(E.Fetch(self.cluster, TOPIC, PARTITION, self.t, self.leader if leader is None else leader,
                                 self.epoch if epoch is None else epoch, replica, role, offset,
                                 self.epoch, max(self.leader_leo, offset), min(self.hw, self.leader_leo), outcome))

    def metrics(self, node: int, *, state=None, leo=None, epoch=None) -> dict[str, Any]:
        if state is None:
            state = "leader" if node == self.leader else ("follower" if node in self.voters else "observer")
        leo = self.leo[node] if leo is None else leo
        return E.to_dict(E.Metrics(self.cluster, TOPIC, PARTITION, self.t, node, state, self.leader,
                                   self.epoch if epoch is None else epoch, leo, min(self.hw, leo), -1, -1, -1, -1,
                                   self.voters))

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
            if self.leader_talks:
                out.append(self.fetch(r, offset))
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
