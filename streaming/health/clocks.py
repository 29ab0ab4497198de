"""The quorum's clock: every record's stamp mapped onto one clock, whatever the emitter's skew.

Records are stamped by the clock of whoever wrote them: fetch records by the leader, metrics and
state changes by each node, snapshots and poll errors by the collector. Real clocks disagree by
seconds, and a single record can be stamped minutes off. Comparing one clock's instant with
another's would turn a skew into a verdict, so this module never does: it compares durations.

Each source (a node, a collector) has an offset, `stamp - quorum time`, fixed when its first
record arrives (that record is taken as "now") and lowered at once when a record arrives later
than its offset predicts by more than a quarter of the live window (it was delayed on the way,
or its clock stepped back: it is judged at its own time, as the job judges a backlog). Small
delays are kept as they are, so offsets do not ratchet on every jitter. A record's quorum time is
`stamp - offset`, never later than the quorum's clock.

The clock itself moves to the highest time proposed by the sources heard within `live_window_ms`,
but never more than an eighth of that window ahead of the second-highest, so one source alone
cannot drag it forward: not a node whose clock runs ahead, not a single record stamped minutes
in the future. The current leader is the exception (its records are the quorum's heartbeat, and
its clock is the one replicas are judged on) unless it runs further ahead of every other source
than any delay explains. With one live source left (a lone leader in a replayed backlog) that
source moves it; and so does a source whose records alone have arrived for a whole live window
of its own time (a collector still polling a cluster whose every node fell silent): without it the
clock would wait for the silent ones forever, and nothing would ever age.

The processing clock (the job's wall clock) only speaks while a quorum sends nothing: at each
input it is re-anchored to the quorum's clock, and a timer evaluation in silence moves the
quorum's clock on by the processing time elapsed since. Records delayed in the pipeline are
therefore never aged by the pipeline's own delay.
"""
from __future__ import annotations

from typing import Any


def new_clock() -> dict[str, Any]:
    # now: quorum time (ms; -1 before the first record); sources: name -> [offset, latest time];
    # proc: offset of the processing clock at the last input (None before one)
    return {"now": -1, "sources": {}, "proc": None}


def observe(clock: dict[str, Any], source: str, stamp: int, live_window_ms: int,
            lead: str | None = None) -> tuple[int, int, int]:
    """Fold one stamp of `source` in. Returns its quorum time (never after the clock), how far
    ahead of every other live source it was (0 when it was not, or no other source is live), and
    how late it came (the re-anchoring; 0 for a record on time): one late record is evidence of
    its own moment, not of now. `lead` names the current leader's source, whose clock may lead
    the others: the leader's records are the quorum's heartbeat."""
    sources = clock["sources"]
    if clock["now"] < 0:
        clock["now"] = stamp
    entry = sources.get(source)
    if entry is None:
        entry = sources[source] = [stamp - clock["now"], clock["now"]]
    late = 0
    if stamp - entry[0] < clock["now"] - live_window_ms // 4:
        late = clock["now"] - (stamp - entry[0])
        entry[0] = stamp - clock["now"]
    t = stamp - entry[0]
    entry[1] = t
    others = _top_others(clock, source, t, live_window_ms)
    ahead = max(0, t - others[0]) if others else 0
    live = sorted(others + [t], reverse=True)
    # The fastest source leads by at most a small margin over the next one (one lying source
    # moves the clock by the margin at most) ...
    proposal = min(live[0], live[1] + live_window_ms // 8) if len(live) >= 2 else live[0]
    # ... except the leader, unless it is further ahead than any delay explains ...
    if source == lead and ahead <= live_window_ms:
        proposal = max(proposal, t)
    # ... and a source heard alone, at its own pace, for a whole live window: the others are
    # silent, not slow. A stamp that jumps further than a window ahead starts a run of its own,
    # so one record stamped minutes off moves nothing.
    solo = clock.get("solo")
    if solo is None or len(solo) < 3 or solo[0] != source or not 0 <= t - solo[2] <= live_window_ms:
        solo = clock["solo"] = [source, t, t]
    else:
        solo[2] = t
        if t - solo[1] > live_window_ms:
            proposal = max(proposal, t)
    if proposal > clock["now"]:
        clock["now"] = proposal
    return min(t, clock["now"]), ahead, late


def _top_others(clock: dict[str, Any], source: str, t: int, live_window_ms: int) -> list[int]:
    """The two highest live times of the sources other than `source`, highest first. The three
    highest are kept (`top`), so a record costs no scan of every source (a quorum with a hundred
    observers has a hundred sources); the scan happens only when one of them went stale."""
    top = [e for e in clock.get("top", []) if e[1] != source]
    floor = clock["now"] - live_window_ms
    if any(p < floor for p, _ in top) or len(top) < min(2, len(clock["sources"]) - 1):
        top = sorted(([p, n] for n, (_, p) in clock["sources"].items() if n != source and p >= floor),
                     reverse=True)[:3]
    clock["top"] = sorted(top + [[t, source]], reverse=True)[:3]
    return [p for p, _ in top[:2]]


def anchor_processing(clock: dict[str, Any], proc_ms: int) -> None:
    """At an evaluation with input: silence from here on is counted in processing time."""
    if clock["now"] >= 0:
        clock["proc"] = proc_ms - clock["now"]


def observe_processing(clock: dict[str, Any], proc_ms: int) -> int:
    """At a timer evaluation with no input: the quorum's clock moves on with processing time."""
    if clock["now"] < 0:
        return -1
    if clock["proc"] is None:
        anchor_processing(clock, proc_ms)
    clock["now"] = max(clock["now"], proc_ms - clock["proc"])
    return clock["now"]


def to_quorum_time(clock: dict[str, Any], source: str, stamp: int) -> int:
    """Quorum time of a stamp of a source already seen (a timestamp inside its record)."""
    entry = clock["sources"].get(source)
    offset = entry[0] if entry is not None else 0
    return min(stamp - offset, clock["now"])


def forget_silent(clock: dict[str, Any], horizon_ms: int) -> None:
    """Drop sources not heard for `horizon_ms` (bounded state; a source back later re-anchors)."""
    now = clock["now"]
    for name in [n for n, (_, t) in clock["sources"].items() if t < now - horizon_ms]:
        del clock["sources"][name]
    clock["top"] = [e for e in clock.get("top", []) if e[1] in clock["sources"]]
