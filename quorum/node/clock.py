"""The node's wall clock in milliseconds: the `now` it gives the Raft core, and the time of
what it publishes."""
from __future__ import annotations

import time


def now_ms() -> int:
    return int(time.time() * 1000)
