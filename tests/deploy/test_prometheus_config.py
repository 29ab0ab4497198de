"""`render_prometheus_config` produces configurations `promtool check config` accepts (rules
included), for every combination the local stack uses, and refuses malformed input clearly."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from deploy.prometheus_config import DEFAULT_RULES, main, render_prometheus_config
from prometheus_tools import alerting_rule_count, assert_tool_succeeds

EXAMPLE = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "prometheus.yml"


@pytest.mark.parametrize("exporter, alertmanager, interval", [
    (None, "127.0.0.1:9093", 5),
    ("127.0.0.1:8000", "127.0.0.1:41234", 1),
    ("localhost:8000", None, "500ms"),
    (None, None, 30),
])
def test_rendered_config_passes_promtool(tmp_path, exporter, alertmanager, interval):
    path = tmp_path / "prometheus.yml"
    path.write_text(render_prometheus_config("127.0.0.1:9091", exporter, alertmanager, DEFAULT_RULES, interval))
    output = assert_tool_succeeds("promtool", "check", "config", str(path))
    assert f"{alerting_rule_count(DEFAULT_RULES)} rules found" in output


def test_pushgateway_is_scraped_with_honor_labels_and_alerts_go_to_alertmanager():
    config = yaml.safe_load(render_prometheus_config("127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "r.yml", 2))
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert jobs["pushgateway"]["honor_labels"] is True
    assert jobs["pushgateway"]["static_configs"] == [{"targets": ["127.0.0.1:1"]}]
    assert jobs["quorum_health"]["static_configs"] == [{"targets": ["127.0.0.1:2"]}]
    assert config["alerting"]["alertmanagers"][0]["static_configs"] == [{"targets": ["127.0.0.1:3"]}]
    assert config["rule_files"] == ["r.yml"]
    assert config["global"] == {"scrape_interval": "2s", "scrape_timeout": "2s", "evaluation_interval": "2s"}


def test_scrape_timeout_never_exceeds_the_interval_nor_10s():
    assert yaml.safe_load(render_prometheus_config("h:1", scrape_interval=60))["global"]["scrape_timeout"] == "10s"
    assert yaml.safe_load(render_prometheus_config("h:1", scrape_interval=0.25))["global"]["scrape_timeout"] == "250ms"


@pytest.mark.parametrize("kwargs, message", [
    ({"pushgateway": "9091"}, "pushgateway address '9091' must be HOST:PORT"),
    ({"pushgateway": "h:1", "alertmanager": "http://"}, "alertmanager address"),
    ({"pushgateway": "h:1", "scrape_interval": 0}, "must be positive"),
    ({"pushgateway": "h:1", "scrape_interval": "5 seconds"}, "not a Prometheus duration"),
])
def test_malformed_input_is_refused_with_a_clear_message(kwargs, message):
    with pytest.raises(ValueError, match=message):
        render_prometheus_config(**kwargs)


def test_committed_example_is_the_rendering_for_default_ports(capsys):
    main(["--pushgateway", "127.0.0.1:9091", "--alertmanager", "127.0.0.1:9093",
          "--rules", "../../alerts/quorum-health.rules.yml"])
    assert capsys.readouterr().out == EXAMPLE.read_text()
    assert f"{alerting_rule_count(DEFAULT_RULES)} rules found" in assert_tool_succeeds("promtool", "check", "config", str(EXAMPLE))
