"""The quorum's clock (clocks.py), one case per rule: a table of (stamps observed, expected quorum
time of the last, how far ahead it was, how late it came, and the clock's now). Live window
2000 ms: one source alone leads the next by 250 ms at most."""
from __future__ import annotations

import pytest

from streaming.health import clocks as C

WINDOW = 2000

# (id, [(source, stamp, lead)], expected (t, ahead, late) of the last, clock now after it)
CASES = [
    ("the first stamp is now", [("node-1", 1000, None)], (1000, 0, 0), 1000),
    ("a skewed source is anchored at its first stamp", [("node-1", 1000, None), ("node-2", 5000, None)],
     (1000, 0, 0), 1000),
    ("one source alone leads by an eighth of the window",
     [("node-1", 1000, None), ("node-2", 5000, None), ("node-1", 1500, None)], (1250, 500, 0), 1250),
    ("the leader may lead", [("node-1", 1000, None), ("node-2", 5000, None), ("node-1", 1500, "node-1")],
     (1500, 500, 0), 1500),
    ("the leader too far ahead does not", [("node-1", 1000, None), ("node-2", 5000, None),
                                           ("node-1", 3500, "node-1")], (1250, 2500, 0), 1250),
    ("a late record re-anchors its source",
     [("node-1", 1000, None), ("node-2", 5000, None), ("node-1", 1500, None), ("node-2", 4500, None)],
     (1250, 0, 750), 1500),  # and, back in line, it backs node-1's lead
    ("a small delay is kept", [("node-1", 1000, None), ("node-2", 5000, None), ("node-1", 1500, None),
                               ("node-2", 5100, None)], (1100, 0, 0), 1350),  # node-1 leads it by 250
]


@pytest.mark.parametrize("stamps, last, now", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_observe(stamps, last, now):
    clock = C.new_clock()
    for source, stamp, lead in stamps:
        result = C.observe(clock, source, stamp, WINDOW, lead)
    assert result == last
    assert clock["now"] == now


def test_a_source_heard_alone_for_a_whole_window_moves_the_clock():
    clock = C.new_clock()
    C.observe(clock, "node-1", 1000, WINDOW)
    C.observe(clock, "collector", 1000, WINDOW)
    for stamp in range(1500, 4000, 500):
        C.observe(clock, "collector", stamp, WINDOW)
    assert clock["now"] == 3500


@pytest.mark.parametrize("silent_for, now", [(0, 1000), (700, 1700)], ids=["at the input", "in silence"])
def test_processing_time_moves_the_clock_only_in_silence(silent_for, now):
    clock = C.new_clock()
    C.observe(clock, "node-1", 1000, WINDOW)
    C.anchor_processing(clock, 50_000)
    assert C.observe_processing(clock, 50_000 + silent_for) == now


def test_stamps_inside_records_and_forgetting():
    clock = C.new_clock()
    C.observe(clock, "node-1", 1000, WINDOW)
    C.observe(clock, "node-2", 5000, WINDOW)
    assert (C.to_quorum_time(clock, "node-2", 4900), C.to_quorum_time(clock, "node-2", 9000)) == (900, 1000)
    clock["sources"]["node-2"][1] = 500
    C.forget_silent(clock, 400)
    assert set(clock["sources"]) == {"node-1"}
