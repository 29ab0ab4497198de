"""Health rows for sink tests, produced by the real tracker from scripted quorums."""
from __future__ import annotations

from typing import Any

from health.quorum_script import TOPIC, QuorumScript
from streaming.health.config import HealthConfig
from streaming.health.state import new_state
from streaming.health.tracker import QuorumTracker


class ScriptedQuorum:
    """A scripted quorum and its tracker; `rows()` runs it a while and returns one batch's rows."""

    def __init__(self, cluster: str, observers=(), run_id: int | None = None):
        self.script = QuorumScript(cluster=cluster, observers=observers)
        self.state = new_state(cluster, TOPIC, 0)
        self.cfg = HealthConfig()
        self.wall_ms = 0  # the job's wall clock: moves with the script, so silence can be felt
        self.run_id = run_id  # as the job's processor: a replica's row only when what it shows changed

    def rows(self, ms: int = 1000, proc_ms: int = 1000, silent: bool = False) -> list[dict[str, Any]]:
        tracker = QuorumTracker(self.cfg, self.state, run_id=self.run_id)
        self.wall_ms += ms
        if silent:
            return tracker.evaluate(proc_ms, silent=True, wall_ms=self.wall_ms)
        tracker.apply_all(self.script.run(ms))
        self.state.last_input_proc_ms = proc_ms
        return tracker.evaluate(proc_ms, silent=False, wall_ms=self.wall_ms)


def flagged_cluster(cluster: str = "c1", proc_ms: int = 1000) -> tuple[ScriptedQuorum, list[dict[str, Any]]]:
    """A quorum whose voter 3 has stopped fetching for 4 s: unreachable."""
    q = ScriptedQuorum(cluster)
    q.rows(3000, proc_ms)
    q.script.mode[3] = "silent"
    return q, q.rows(4000, proc_ms)


def with_quorum_columns(rows: list[dict[str, Any]], **columns: Any) -> list[dict[str, Any]]:
    """The batch's rows with these columns of its quorum rows set (schema.HEALTH_FIELDS): the
    state a sink renders, e.g. a collector whose polls fail (`poll_error`, `poll_failures`)."""
    return [{**r, **columns} if r["kind"] == "quorum" else r for r in rows]
