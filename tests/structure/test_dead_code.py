"""No dead code in the product: vulture finds nothing unused in quorum/, streaming/ or deploy/.

Tests and benchmarks are scanned as users (code only they call counts as used), and
tests/dead_code_allowed.py names what is used where vulture cannot see it (framework callbacks,
dispatch by name, wire and metrics fields), each with its reason. Something this test reports is
either removed or, when something does use it, added there with the reason.
"""
from __future__ import annotations

from pathlib import Path

import pytest

vulture = pytest.importorskip("vulture")

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("quorum", "streaming", "deploy")
USERS = ("tests", "benchmarks")
WHITELIST = ROOT / "tests" / "dead_code_allowed.py"
MIN_CONFIDENCE = 60


def test_nothing_in_the_product_is_unused():
    v = vulture.Vulture()
    v.scavenge([str(ROOT / p) for p in PRODUCT + USERS] + [str(WHITELIST)])
    product = tuple(str(ROOT / p) + "/" for p in PRODUCT)
    found = [item for item in v.get_unused_code(min_confidence=MIN_CONFIDENCE)
             if str(item.filename).startswith(product)]
    assert not found, "unused (remove it, or name it in tests/dead_code_allowed.py with the reason):\n" + "\n".join(
        f"{Path(item.filename).relative_to(ROOT)}:{item.first_lineno}: {item.message} ({item.confidence}%)"
        for item in found)
