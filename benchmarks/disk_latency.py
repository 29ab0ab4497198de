"""The disk's fsync latency, the baseline of the commit benchmarks, and the percentile they print."""
from __future__ import annotations

import os
import time
from pathlib import Path


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def fsync_latency_ms(directory: Path, n: int = 200, size: int = 4096) -> list[float]:
    """Append `size` bytes and fsync, `n` times: what one durable log append costs here."""
    path = directory / "fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    out = []
    try:
        block = os.urandom(size)
        for _ in range(n):
            t0 = time.perf_counter()
            os.write(fd, block)
            os.fsync(fd)
            out.append((time.perf_counter() - t0) * 1000)
    finally:
        os.close(fd)
        path.unlink()
    return out
