"""Where the health results go (YAML section `sink`): Prometheus, a Kafka topic, the console."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, TypeVar

from quorum.config_file import ConfigFileError
from quorum.http_client_config import NO_CLIENT_CONFIG, HttpClientConfig, load_http_client_config
from streaming.health.config import ConfigError, checked_section, config_from_dict

from .web_config import WebConfig, load_web_config

T = TypeVar("T")

PROMETHEUS_MODES = ("pushgateway", "exporter", "off")


@dataclass(frozen=True)
class PrometheusSinkConfig:
    """`sink.prometheus`. `pushgateway`: PUT the job's one group to a Pushgateway (for drivers
    Prometheus cannot scrape). `exporter`: serve /metrics from the driver (advised for a
    long-running job). `off`: no Prometheus output."""
    mode: str = "pushgateway"
    pushgateway_url: str = "http://127.0.0.1:9091"
    job: str = "quorum_health"           # the Pushgateway group's `job`: one name per job
    push_timeout_s: float = 2.0          # per HTTP request
    push_attempts: int = 3               # tries per round before counting a failure
    retry_backoff_s: float = 0.2         # doubled after each failed try
    # Least time between push rounds. A changed status or cause is pushed at once; values that
    # only moved wait for the next round. Prometheus reads the gateway when it scrapes (every 5 s
    # in deploy/prometheus), so pushing more often is work for nobody: for the gateway, each PUT
    # is checked against every series it holds. 0: a round after every batch.
    push_interval_ms: int = 5000
    exporter_host: str = "0.0.0.0"
    exporter_port: int = 9464
    # Files in Prometheus' own formats, read at start: the exporter's exporter-toolkit web config
    # (TLS, basic auth users), the Pushgateway client's HTTP client config (CA, basic auth).
    exporter_web_config: str | None = None
    pushgateway_client_config: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in PROMETHEUS_MODES:
            raise ConfigError(f"mode: must be one of {', '.join(PROMETHEUS_MODES)} (got {self.mode!r})")
        if self.push_interval_ms < 0:
            raise ConfigError(f"push_interval_ms: must be >= 0 (got {self.push_interval_ms})")
        if self.push_attempts < 1:
            raise ConfigError(f"push_attempts: must be >= 1 (got {self.push_attempts})")
        if not 0 <= self.exporter_port <= 65535:
            raise ConfigError(f"exporter_port: must be a TCP port (got {self.exporter_port})")
        if self.push_timeout_s <= 0 or self.retry_backoff_s < 0:
            raise ConfigError("push_timeout_s must be > 0 and retry_backoff_s >= 0")

    def check_files(self) -> None:
        """Read the files it names (streaming check-config and run do, before starting): an
        unusable one is a configuration error at start. Kept out of loading, so that a config
        can be checked for its own sake on another machine."""
        self.web_config()
        self.pushgateway_client()

    def web_config(self) -> WebConfig | None:
        """The exporter's web config file, read (None: plain HTTP, no authentication)."""
        return _read_file("exporter_web_config", self.exporter_web_config, load_web_config)

    def pushgateway_client(self) -> HttpClientConfig:
        """The Pushgateway client's config file, read (none: plain requests, no credentials)."""
        return _read_file("pushgateway_client_config", self.pushgateway_client_config,
                          load_http_client_config) or NO_CLIENT_CONFIG

    def describe(self) -> str:
        """Where the metrics go, for the job's start line."""
        if self.mode == "pushgateway":
            return f"pushed to {self.pushgateway_url} as job={self.job} (one group)"
        if self.mode == "exporter":
            served = f"served on {self.exporter_host}:{self.exporter_port}/metrics"
            web_config = self.web_config()
            return f"{served} ({web_config.describe()}, {web_config.source})" if web_config else served
        return "off"


def _read_file(key: str, path: str | None, load: Callable[[str], T]) -> T | None:
    if not path:
        return None
    try:
        return load(path)
    except ConfigFileError as e:
        raise ConfigError(f"{key}: {e}") from None


@dataclass(frozen=True)
class KafkaSinkConfig:
    """`sink.kafka`: health events as JSON, one record each, keyed by quorum (so one quorum's
    events stay in order), each with the quorum's event `seq` and the `batch_id` (see
    kafka_events.py). Undelivered events wait in a bounded buffer spooled next to the checkpoint."""
    enabled: bool = False
    bootstrap_servers: str = "127.0.0.1:9092"
    topic: str = "quorum-health"
    # Kafka client properties in Kafka's own names (security.protocol, sasl.jaas.config,
    # ssl.truststore.*: kafka_client_properties.py), inline and/or from a properties file
    # (`command_config`, as Kafka's tools take it); inline keys win.
    properties: dict = field(default_factory=dict)
    command_config: str | None = None
    flush_timeout_s: float = 10.0        # a batch waits this long for deliveries while the topic answers
    delivery_timeout_s: float = 30.0     # an event not delivered by then is retried at a later batch
    buffer_events: int = 100_000         # undelivered events kept at most (the oldest dropped, counted)

    def __post_init__(self) -> None:
        if self.buffer_events < 1:
            raise ConfigError(f"buffer_events: must be >= 1 (got {self.buffer_events})")
        self.producer_settings()  # an unusable property is a configuration error at start
        if self.flush_timeout_s < 0 or self.delivery_timeout_s <= 0:
            raise ConfigError("flush_timeout_s must be >= 0 and delivery_timeout_s > 0")


    def producer_settings(self) -> dict[str, Any]:
        """librdkafka's settings for the properties (the health producer is confluent-kafka's)."""
        from quorum.kafka_client import kafka_client_properties as kcp
        try:
            return kcp.librdkafka_config(self.client_properties(), HEALTH_PRODUCER)
        except kcp.ClientPropertiesError as e:
            raise ConfigError(f"properties.{e}") from None

    def client_properties(self) -> dict[str, str]:
        from quorum.kafka_client import kafka_client_properties as kcp
        try:
            return kcp.merged(self.command_config, self.properties)
        except kcp.ClientPropertiesError as e:
            raise ConfigError(f"command_config: {e}") from None


HEALTH_PRODUCER = "the job's health topic producer (librdkafka)"


@dataclass(frozen=True)
class ConsoleSinkConfig:
    """`sink.console`: a compact table per micro-batch on stdout, for local runs."""
    enabled: bool = False
    show_healthy: bool = False           # also list replicas that are caught up


@dataclass(frozen=True)
class SinkConfig:
    prometheus: PrometheusSinkConfig = field(default_factory=PrometheusSinkConfig)
    kafka: KafkaSinkConfig = field(default_factory=KafkaSinkConfig)
    console: ConsoleSinkConfig = field(default_factory=ConsoleSinkConfig)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None, section: str = "sink") -> "SinkConfig":
        d = checked_section(cls, d, section)
        types = {"prometheus": PrometheusSinkConfig, "kafka": KafkaSinkConfig, "console": ConsoleSinkConfig}
        if isinstance(d.get("kafka"), Mapping) and "producer_config" in d["kafka"]:
            raise ConfigError(f"{section}.kafka.producer_config: give the health producer's Kafka client properties "
                              f"in Kafka's own names under {section}.kafka.properties (security.protocol, "
                              f"sasl.mechanism, sasl.jaas.config, ssl.truststore.location, ...), or a properties "
                              f"file as {section}.kafka.command_config")
        return cls(**{name: config_from_dict(types[name], value, f"{section}.{name}") for name, value in d.items()})
