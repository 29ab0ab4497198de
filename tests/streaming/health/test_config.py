"""Health thresholds: defaults derived from the quorum's timeouts, errors naming the key."""
from __future__ import annotations

import pytest

from streaming.health.config import ConfigError, HealthConfig


def test_health_thresholds_default_from_the_quorum_timeouts():
    cfg = HealthConfig()
    assert (cfg.unreachable_after_ms, cfg.lagging_after_ms, cfg.hw_stall_after_ms) == (2000, 2000, 2000)
    assert (cfg.leader_claim_window_ms, cfg.recovery_hold_ms, cfg.stall_after_ms) == (3000, 4000, 10_000)
    slow = HealthConfig.from_dict({"fetch_timeout_ms": 5000, "noop_interval_ms": 1000})
    assert (slow.unreachable_after_ms, slow.hw_stall_after_ms, slow.leader_claim_window_ms) == (5000, 4000, 7500)
    assert HealthConfig.from_dict({"fetch_timeout_ms": 5000, "unreachable_after_ms": 3000}).unreachable_after_ms == 3000


@pytest.mark.parametrize("section, message", [
    ({"fetch_timout_ms": 1}, "health.fetch_timout_ms: unknown key"),
    ({"stall_after_ms": "10s"}, "health.stall_after_ms: expected int"),
    ({"stall_after_ms": 0}, "health.stall_after_ms: must be an integer >= 1"),
    ("fast", "health: expected a mapping"),
])
def test_bad_health_config_names_the_key(section, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.", 1)):
        HealthConfig.from_dict(section)
