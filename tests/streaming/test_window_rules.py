"""Caught-up windows (windows.py), one case per rule: a table of (states seen, expected closed
interval and caught-up ratio). Horizon 600 s: buckets of 10 s."""
from __future__ import annotations

import pytest

from streaming.health import windows as W

HORIZON = 600_000

# (id, [(now_ms, state)], closed by the last, ratio at the last)
CASES = [
    ("the first opens", [(0, W.CAUGHT_UP)], None, None),
    ("the same state extends", [(0, W.CAUGHT_UP), (10_000, W.CAUGHT_UP)], None, 1.0),
    ("a new state closes the interval", [(0, W.CAUGHT_UP), (20_000, W.LAGGING)], [0, 20_000, W.CAUGHT_UP], 1.0),
    ("lagging time is observed", [(0, W.CAUGHT_UP), (20_000, W.LAGGING), (40_000, W.LAGGING)], None, 0.5),
    ("unknown time is not", [(0, W.UNKNOWN), (30_000, W.UNKNOWN)], None, None),
    ("the clock never runs back", [(0, W.CAUGHT_UP), (10_000, W.LAGGING), (5000, W.CAUGHT_UP)],
     [10_000, 10_000, W.LAGGING], 1.0),
    ("time past the horizon drops out", [(0, W.LAGGING), (HORIZON, W.CAUGHT_UP), (HORIZON + 60_000, W.CAUGHT_UP)],
     None, 0.1),
]


@pytest.mark.parametrize("seen, closed, ratio", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_extend(seen, closed, ratio):
    w = W.new_windows()
    for now_ms, state in seen:
        last = W.extend(w, now_ms, state, HORIZON)
    assert last == closed
    got = W.caught_up_ratio(w, seen[-1][0], HORIZON)
    assert got == (pytest.approx(ratio) if ratio is not None else None)
