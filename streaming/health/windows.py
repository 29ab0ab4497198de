"""Caught-up windows: the intervals a replica spent caught up, lagging or unknown, over a horizon.

Intervals are `[start_ms, end_ms, state]` lists (JSON-friendly, they live in the processor's
state). They are contiguous: each evaluation extends the last interval or opens a new one
where the previous ended, so the whole observed horizon is covered exactly once.
"""
from __future__ import annotations

CAUGHT_UP = "caught_up"
LAGGING = "lagging"
UNKNOWN = "unknown"


def extend(windows: list[list], now_ms: int, state: str, horizon_ms: int,
           max_windows: int) -> list[list] | None:
    """Record that the replica is in `state` at `now_ms`; return the interval this closed, if any."""
    closed = None
    if windows and now_ms < windows[-1][1]:
        now_ms = windows[-1][1]  # the clock never runs backwards inside the windows
    if not windows:
        windows.append([now_ms, now_ms, state])
    elif windows[-1][2] == state:
        windows[-1][1] = now_ms
    else:
        closed = list(windows[-1])
        windows.append([windows[-1][1], now_ms, state])
    prune(windows, now_ms - horizon_ms, max_windows)
    return closed


def prune(windows: list[list], horizon_start_ms: int, max_windows: int) -> None:
    while windows and windows[0][1] < horizon_start_ms:
        windows.pop(0)
    if windows and windows[0][0] < horizon_start_ms:
        windows[0][0] = horizon_start_ms
    del windows[:max(0, len(windows) - max_windows)]


def caught_up_ratio(windows: list[list]) -> float | None:
    """Time caught up / time observed (unknown intervals are not observed); None before any."""
    observed = caught = 0
    for start, end, state in windows:
        if state == UNKNOWN:
            continue
        observed += end - start
        if state == CAUGHT_UP:
            caught += end - start
    if observed <= 0:
        return None
    return caught / observed
