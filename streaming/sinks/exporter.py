"""Serve /metrics from the driver for Prometheus to scrape (sink.prometheus.mode: exporter).

The registry holds one collector that renders the current snapshot at each scrape, so the
series of a replica or quorum that vanished are simply absent from the next scrape. A scrape
serves the collector's kept text (exposition_cache.py): each quorum's lines are formatted
when its rows change, not at every scrape; the bytes are the library's. With
`exporter_web_config` the endpoint takes TLS and basic auth as Prometheus' exporters do
(metrics_server.py).
"""
from __future__ import annotations

from prometheus_client import CollectorRegistry

from .config import PrometheusSinkConfig
from .exposition_http import start_exposition_server
from .metrics_server import start_metrics_server
from .monitor import MonitorMetrics
from .prometheus_metrics import HealthCollector
from .snapshot import HealthSnapshot


class ExporterSink:
    def __init__(self, cfg: PrometheusSinkConfig, snapshot: HealthSnapshot, monitor: MonitorMetrics):
        self.registry = CollectorRegistry(auto_describe=False)
        self.collector = HealthCollector(snapshot, monitor)
        self.registry.register(self.collector)
        web_config = cfg.web_config()
        if web_config is None:
            self.server, self.thread = start_exposition_server(cfg.exporter_host, cfg.exporter_port, self.registry,
                                                               self.collector)
        else:
            self.server, self.thread = start_metrics_server(cfg.exporter_host, cfg.exporter_port, self.registry,
                                                            web_config, self.collector)
        self.port = self.server.server_address[1]  # the bound port (useful with port 0)

    def publish(self, urgent: bool = False) -> None:
        pass  # scrapes read the snapshot directly

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
