"""JSON on the health stage's hot paths: every record unpacked, every state value read and
written, every health row packed, in every micro-batch. orjson does these several times faster
than the standard library's `json`: unpacking a fetch record took 5.1 us with `json` and 1.7 us
with orjson, most of the Python work per record (`benchmarks/health_fold.py` prints its share)."""
from __future__ import annotations

from typing import Any

import orjson

from .state import encode_default

loads = orjson.loads


def dumps(value: Any) -> str:
    """Compact JSON text; non-string keys (a replica id) become strings, as `json` makes them;
    the health state's types (state.py) as their fields."""
    return orjson.dumps(value, default=encode_default, option=orjson.OPT_NON_STR_KEYS).decode()
