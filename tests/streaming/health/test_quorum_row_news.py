"""A bucket's quorum rows with `quorum_row_refresh_ms` (`buckets.news`): a quorum row that shows
nothing new is left out until the refresh is due, and nothing else is: every transition, window,
replica and forget row is the same, and the driver's picture of each quorum (its latest quorum
row) shows at every batch what the unfiltered rows show."""
from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from streaming.health.config import HealthConfig
from streaming.health.rows import quorum_signature

from .processor_harness import BUCKETED, Harness
from .quorum_script import PARTITION, TOPIC, QuorumScript
from .test_health_buckets import STEP_MS, by_quorum, play
from .tracker_harness import seeds

EVERY = HealthConfig(quorum_forget_ms=8_000)
REFRESH_MS = 5_000
SPARSE = dataclasses.replace(EVERY, quorum_row_refresh_ms=REFRESH_MS)


def by_batch(rows: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(r["proc_ms"], []).append(r)
    return out


def shown(row: dict[str, Any]) -> list:
    return quorum_signature(row, EVERY.hw_stall_after_ms)


@pytest.mark.parametrize("api", BUCKETED)
def test_only_quorum_rows_that_show_nothing_new_are_left_out(api):
    for seed in seeds(3):
        every, sparse = by_quorum(play(seed, api, EVERY)), by_quorum(play(seed, api, SPARSE))
        left_out = 0
        for cluster, rows in every.items():
            kept = sparse[cluster]
            assert [r for r in kept if r["kind"] != "quorum"] == [r for r in rows if r["kind"] != "quorum"], seed
            assert all(r in rows for r in kept), seed
            left_out += len(rows) - len(kept)
            picture = None  # the quorum row the driver holds
            kept_batches = by_batch(kept)
            for proc_ms, batch in sorted(by_batch(rows).items()):
                quorum_rows = [r for r in batch if r["kind"] == "quorum"]
                picture = next((r for r in reversed(kept_batches.get(proc_ms, [])) if r["kind"] == "quorum"), picture)
                if quorum_rows:
                    assert shown(picture) == shown(quorum_rows[-1]), (seed, cluster, proc_ms)
                    assert proc_ms - picture["proc_ms"] < REFRESH_MS, (seed, cluster, proc_ms)
        assert left_out > 0, seed


@pytest.mark.parametrize("api", BUCKETED)
def test_a_bucket_with_input_shows_one_quorum_row_whatever_it_shows(api):
    """The driver holds a silent quorum's verdict while no input came after its last (snapshot.py):
    it learns that input came from the rows' `last_input_proc_ms`, so a batch with input brings
    one, and the quorums take turns."""
    scripts = {(c, TOPIC, PARTITION): QuorumScript(cluster=c) for c in ("c1", "c2", "c3", "c4")}
    h = Harness(api, SPARSE)
    refreshed: dict[str, list[int]] = {}
    for _ in range(40):
        proc_ms = h.proc_ms + STEP_MS
        rows = h.spark_batch(proc_ms, {key: s.run(STEP_MS) for key, s in scripts.items()})
        quorum_rows = [r for r in rows if r["kind"] == "quorum"]
        assert any(r["last_input_proc_ms"] == proc_ms for r in quorum_rows), proc_ms
        for r in quorum_rows:
            refreshed.setdefault(r["cluster_id"], []).append(proc_ms)
    assert len(refreshed) == 4
    for times in refreshed.values():
        assert len(times) < 40  # steady: most batches leave its row out
        assert all(b - a <= REFRESH_MS for a, b in zip(times, times[1:]))
