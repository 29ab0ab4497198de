"""A verdict's rule: a name, the status (or cause) it gives, when it applies, and what it tells;
a table of them is checked in order and the first that applies wins (quorum_verdict.py,
replica_verdicts.py). The evidence a rule reads is gathered before, without changing state."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

from .config import HealthConfig


class Rule(NamedTuple):
    name: str
    gives: str
    applies: Callable[[Any, HealthConfig], bool]
    tells: Callable[[Any, HealthConfig], str]


def first_match(rules: tuple[Rule, ...], e: Any, cfg: HealthConfig) -> Rule:
    """The first rule of `rules` that applies to the evidence `e` (every table ends in one that
    always applies)."""
    for rule in rules:
        if rule.applies(e, cfg):
            return rule
    raise AssertionError("the last rule always applies")
