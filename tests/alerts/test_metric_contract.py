"""The names the streaming job really exports are the ones the rules and the dashboard use
(tests/quorum_metric_names.py): a rename on either side fails here, not in production."""
from __future__ import annotations

import re

from prometheus_client import CollectorRegistry, generate_latest

from quorum_metric_names import ALL_METRICS


def test_the_jobs_exposition_has_exactly_the_contract_names():
    from streaming.health.config import HealthConfig
    from streaming.sinks.monitor import MonitorMetrics
    from streaming.sinks.prometheus_metrics import HealthCollector
    from streaming.sinks.snapshot import HealthSnapshot

    registry = CollectorRegistry()
    registry.register(HealthCollector(HealthSnapshot(), MonitorMetrics(HealthConfig())))
    exposition = generate_latest(registry).decode()
    # the text format names a counter's family with its _total suffix
    exported = set(re.findall(r"^# TYPE (\S+) \S+$", exposition, flags=re.M))
    assert exported == ALL_METRICS
