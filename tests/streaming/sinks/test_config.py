"""Sink configuration: documented defaults, nested sections, errors naming the key."""
from __future__ import annotations

import pytest

from streaming.health.config import ConfigError
from streaming.sinks.config import SinkConfig


def test_sink_defaults_and_nested_sections():
    cfg = SinkConfig.from_dict(None)
    assert (cfg.prometheus.mode, cfg.kafka.enabled, cfg.console.enabled) == ("pushgateway", False, False)
    cfg = SinkConfig.from_dict({"prometheus": {"mode": "exporter", "exporter_port": 9999},
                                "kafka": {"enabled": True, "properties": {"security.protocol": "SSL"}}})
    assert (cfg.prometheus.mode, cfg.prometheus.exporter_port) == ("exporter", 9999)
    assert cfg.kafka.producer_settings() == {"security.protocol": "SSL", "ssl.endpoint.identification.algorithm":
                                             "https", "ssl.ca.location": "probe"}


def test_the_start_line_says_where_the_metrics_go():
    describe = lambda prometheus: SinkConfig.from_dict({"prometheus": prometheus}).prometheus.describe()  # noqa: E731
    assert describe({}) == "pushed to http://127.0.0.1:9091 as job=quorum_health (one group)"
    assert describe({"mode": "exporter", "exporter_port": 9999}) == "served on 0.0.0.0:9999/metrics"
    assert describe({"mode": "off"}) == "off"


@pytest.mark.parametrize("section, message", [
    ({"promethus": {}}, r"sink\.promethus: unknown key"),
    ({"prometheus": {"mode": "scrape"}}, r"sink\.prometheus\.mode: must be one of pushgateway, exporter, off"),
    ({"prometheus": {"push_attempts": 0}}, r"sink\.prometheus\.push_attempts"),
    ({"kafka": {"enabled": "yes"}}, r"sink\.kafka\.enabled: expected bool"),
    ({"kafka": {"producer_config": {"sasl.username": "u"}}}, r"sink\.kafka\.producer_config: give the health "
                                                              r"producer's Kafka client properties in Kafka's own names"),
    ({"kafka": {"properties": {"sasl.login.class": "x"}}}, r"sink\.kafka\.properties\.sasl\.login\.class: not "
                                                           r"supported by the job's health topic producer \(librdkafka\)"),
    ({"console": {"colour": True}}, r"sink\.console\.colour: unknown key"),
])
def test_bad_sink_config_names_the_key(section, message):
    with pytest.raises(ConfigError, match=message):
        SinkConfig.from_dict(section)
