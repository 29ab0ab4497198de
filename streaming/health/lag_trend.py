"""The lag trend of a replica that is behind: how far behind the leader's log end, and whether the
gap grows or shrinks, measured against a sample taken a few seconds before (`LagSample`, kept in
the replica's state as `lag_ref`). Pure: the sample to keep next is returned, not written."""
from __future__ import annotations

from .state import LagSample

SAMPLE_TREND_MS = 3000  # the trend is measured over the last 3-6 s
MIN_SPAN_MS = 2000      # a shorter span tells no rate yet


def next_sample(ref: LagSample | None, lag: int, now: int) -> LagSample:
    """The sample to measure against at `now` (leader stamp) with `lag` records behind: a fresh
    one after a gap (or a clock that went back), moved on every SAMPLE_TREND_MS, else `ref`."""
    if ref is None or now - ref.now_ms > 2 * SAMPLE_TREND_MS or now < ref.now_ms:
        return LagSample(now, lag, now, lag)
    if now - ref.now_ms >= SAMPLE_TREND_MS:
        return LagSample(ref.now_ms, ref.now_lag, now, lag)
    return ref


def trend_text(lag: int | None, ref: LagSample | None, now: int) -> str:
    """How far behind, and the trend against `ref` (the sample `next_sample` gave)."""
    if lag is None:
        return "fetching, not at the leader's end"
    text = f"{lag} records behind the leader"
    if ref is not None and now - ref.then_ms >= MIN_SPAN_MS:
        rate = (lag - ref.then_lag) * 1000 / (now - ref.then_ms)
        if rate >= 0.5:
            text += f", the gap growing {rate:.0f} records/s"
        elif rate <= -0.5:
            text += f", the gap closing {-rate:.0f} records/s: caught up in about {lag / -rate:.0f} s at that rate"
        else:
            text += ", the gap steady"
    return text
