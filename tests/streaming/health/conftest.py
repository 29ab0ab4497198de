"""The reduction differential, for the modules that ask for it (`pytestmark`)."""
from __future__ import annotations

import pytest

from .quorum_script import QuorumScript
from .tracker_harness import Monitor, event_differences


@pytest.fixture(params=["leader view", "no view"])
def reduction_differential(request):
    """The test runs twice: its quorum's leader publishes its view of each replica in its fetch
    records (as the project's nodes do; then each replica's fetches are reduced per tick), and
    publishes none (a writer before that; nothing is reduced). Every reducing Monitor the test
    makes also folds each record one by one; at the end of the test their events must agree:
    the same events, in order, each within a tick (an evaluation inside a run sees the replica
    as of the run's first record). A Monitor whose state the test replaced (a replayed batch)
    is left out: its shadow was not replayed."""
    Monitor.shadowed = []
    QuorumScript.publishes_view = request.param == "leader view"
    try:
        yield
        for mon in Monitor.shadowed:
            if mon.state_replaced:
                continue
            diff = event_differences(mon.shadow.rows, mon.rows, mon.cfg.tick_ms)
            assert diff == [], "\n".join(diff[:10])
    finally:
        Monitor.shadowed = None
        QuorumScript.publishes_view = False
