"""Caught-up windows: the intervals a replica spends caught up, lagging or unknown, and the
fraction of a horizon it spent caught up, in a fixed amount of memory.

A replica's windows are a dict (JSON-friendly, it lives in the processor's state):
`open` is the current interval `[start_ms, end_ms, state]`; when the state changes that interval
closes (and is emitted as a `window` event) and the next one opens where it ended, so the
observed time is covered exactly once. For the ratio, time is also added to `BUCKETS` buckets
of `horizon / BUCKETS` each (`[bucket_start_ms, caught_up_ms, observed_ms]`, unknown time not
observed): a replica flapping every second costs the same memory as a steady one.
"""
from __future__ import annotations

from typing import Any

CAUGHT_UP = "caught_up"
LAGGING = "lagging"
UNKNOWN = "unknown"
BUCKETS = 60


def new_windows() -> dict[str, Any]:
    return {"open": None, "buckets": []}


def extend(w: dict[str, Any], now_ms: int, state: str, horizon_ms: int) -> list | None:
    """Record that the replica is in `state` at `now_ms`; return the interval this closed, if any."""
    closed = None
    current = w["open"]
    if current is None:
        w["open"] = [now_ms, now_ms, state]
        return None
    now_ms = max(now_ms, current[1])  # the clock never runs backwards inside the windows
    _account(w, current[1], now_ms, current[2], horizon_ms)
    if current[2] == state:
        current[1] = now_ms
    else:
        current[1] = now_ms
        closed = list(current)
        w["open"] = [now_ms, now_ms, state]
    return closed


def _account(w: dict[str, Any], start_ms: int, end_ms: int, state: str, horizon_ms: int) -> None:
    """Add [start, end) spent in `state` to the buckets, and drop buckets past the horizon."""
    width = max(1, horizon_ms // BUCKETS)
    buckets = w["buckets"]
    t = start_ms
    while t < end_ms:
        bucket_start = t - t % width
        span = min(end_ms, bucket_start + width) - t
        if not buckets or buckets[-1][0] < bucket_start:
            buckets.append([bucket_start, 0, 0])
        b = buckets[-1]
        if state != UNKNOWN:
            b[2] += span
            if state == CAUGHT_UP:
                b[1] += span
        t += span
    while buckets and buckets[0][0] + width <= end_ms - horizon_ms:
        buckets.pop(0)


def caught_up_ratio(w: dict[str, Any], now_ms: int | None = None, horizon_ms: int | None = None) -> float | None:
    """Time caught up / time observed over the horizon (unknown time is not observed); the oldest
    bucket counts for the part of it still inside the horizon. None before any."""
    observed = caught = 0.0
    buckets = w["buckets"]
    width = max(1, horizon_ms // BUCKETS) if horizon_ms else None
    for i, (start, c, o) in enumerate(buckets):
        share = 1.0
        if i == 0 and width and now_ms is not None and horizon_ms is not None:
            inside = start + width - (now_ms - horizon_ms)
            share = min(1.0, max(0.0, inside / width))
        observed += o * share
        caught += c * share
    if observed <= 0:
        return None
    return caught / observed
