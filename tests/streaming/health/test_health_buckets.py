"""Quorums sharing a bucket (`streaming.health.buckets`) give the rows each gives under a key of
its own: faults, a quorum that goes silent, is forgotten and comes back, and stretches when the
whole bucket is silent and only its one timer runs."""
from __future__ import annotations

import random
from typing import Any

import pytest

from streaming.health.config import HealthConfig

from .processor_harness import BUCKETED, Harness
from .quorum_script import PARTITION, TOPIC, QuorumScript
from .tracker_harness import seeds

CLUSTERS = ("c1", "c2", "c3")
STEP_MS = 500


def play(seed: int, api: str, cfg: HealthConfig = HealthConfig(quorum_forget_ms=8_000)) -> list[dict[str, Any]]:
    """Three quorums, 80 micro-batches STEP_MS apart: c2 loses a voter for a while, c3 goes
    silent long enough to be forgotten and comes back, and for a stretch none of them sends."""
    rng = random.Random(seed)
    scripts = {(c, TOPIC, PARTITION): QuorumScript(cluster=c) for c in CLUSTERS}
    c2_cut = rng.randrange(5, 20)
    c3_from = rng.randrange(10, 25)
    c3_silent = range(c3_from, c3_from + rng.randrange(20, 30))  # 10 s or more: past the forget horizon
    all_silent = range(rng.randrange(55, 60), rng.randrange(62, 72))
    h = Harness(api, cfg)
    rows: list[dict[str, Any]] = []
    for step in range(80):
        scripts[("c2", TOPIC, PARTITION)].mode[3] = "silent" if c2_cut <= step < c2_cut + 12 else "follow"
        batch = {}
        for key, script in scripts.items():
            records = script.run(STEP_MS)  # a silent quorum's clock still moves on
            if step not in all_silent and not (key[0] == "c3" and step in c3_silent):
                batch[key] = records
        rows += h.spark_batch(h.proc_ms + STEP_MS, batch)
    return rows


def by_quorum(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(r["cluster_id"], []).append(r)
    return out


@pytest.mark.parametrize("api", BUCKETED)
def test_quorums_sharing_a_bucket_give_the_rows_each_gives_under_its_own_key(api):
    for seed in seeds(3):
        alone, shared = by_quorum(play(seed, "row")), by_quorum(play(seed, api))
        assert set(alone) == set(CLUSTERS), seed
        assert any(r["kind"] == "transition" and r["replica_id"] == 3 for r in alone["c2"]), seed
        assert any(r["kind"] == "forget" for r in alone["c3"]), seed
        for cluster in CLUSTERS:
            assert shared[cluster] == alone[cluster], (seed, cluster)


@pytest.mark.parametrize("api", BUCKETED)
def test_a_bucket_whose_quorums_are_all_forgotten_keeps_no_state_and_no_timer(api):
    h = Harness(api, HealthConfig(quorum_forget_ms=5_000))
    scripts = {(c, TOPIC, PARTITION): QuorumScript(cluster=c) for c in CLUSTERS[:2]}
    h.feed_quorums({key: s.run(1000) for key, s in scripts.items()})
    assert all(h.stored(key) is not None for key in scripts)
    rows = h.advance(7_000)
    assert sorted(r["cluster_id"] for r in rows if r["kind"] == "forget") == ["c1", "c2"]
    assert all(h.stored(key) is None for key in scripts)
    assert h.tester.peekValueState("bucket", (7,)) is None
    assert h.advance(3_000) == []  # no timer left behind
