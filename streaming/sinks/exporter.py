"""Serve /metrics from the driver for Prometheus to scrape (sink.prometheus.mode: exporter).

The registry holds one collector that renders the current snapshot at each scrape, so the
series of a replica or quorum that vanished are simply absent from the next scrape.
"""
from __future__ import annotations

from prometheus_client import CollectorRegistry, start_http_server

from .config import PrometheusSinkConfig
from .monitor import MonitorMetrics
from .prometheus_metrics import HealthCollector
from .snapshot import HealthSnapshot


class ExporterSink:
    def __init__(self, cfg: PrometheusSinkConfig, snapshot: HealthSnapshot, monitor: MonitorMetrics):
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(HealthCollector(snapshot, monitor))
        self.server, self.thread = start_http_server(cfg.exporter_port, addr=cfg.exporter_host,
                                                     registry=self.registry)
        self.port = self.server.server_address[1]  # the bound port (useful with port 0)

    def publish(self, urgent: bool = False) -> None:
        pass  # scrapes read the snapshot directly

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
