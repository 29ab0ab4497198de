"""The node's configuration file (YAML, flat keys named as Kafka names them), loaded once
into a typed `NodeConfig`, with every default written down here.

  node.id: 1
  cluster.id: demo-cluster
  controller.quorum.voters: 1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095
  listener: 127.0.0.1:9093
  data.dir: /var/lib/quorum/node-1
  events.bootstrap.servers: 127.0.0.1:9092     # omit to run without publishing
  events.topic: quorum-events

A node whose id is not in the voters is an observer. Errors name the key and say why.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from quorum.kafka_client import kafka_client_properties
from quorum.raft.config import DEFAULT_TOPIC, RaftConfig


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


_RAFT = RaftConfig()  # the Raft timeouts' defaults live there (Kafka's values)

# key -> (attribute, type, default, help). Kafka's names where Kafka has the setting.
SETTINGS: dict[str, tuple[str, type, Any, str]] = {
    "node.id": ("node_id", int, None, "this node's id"),
    "cluster.id": ("cluster_id", str, None, "the cluster id every request must carry"),
    "controller.quorum.voters": ("voters", str, None, "voters as id@host:port, comma separated"),
    "listener": ("listener", str, None, "host:port this node listens on"),
    "data.dir": ("data_dir", str, None, "directory for the log and the quorum state"),
    "quorum.topic": ("topic", str, DEFAULT_TOPIC, "name of the quorum's topic"),
    "controller.quorum.election.timeout.ms": ("election_timeout_ms", int, _RAFT.election_timeout_ms, "election timeout (+ jitter)"),
    "controller.quorum.fetch.timeout.ms": ("fetch_timeout_ms", int, _RAFT.fetch_timeout_ms, "follower fetch timeout; x1.5 check quorum"),
    "controller.quorum.election.backoff.max.ms": ("election_backoff_max_ms", int, _RAFT.election_backoff_max_ms, "max backoff after a lost election"),
    "controller.quorum.request.timeout.ms": ("request_timeout_ms", int, _RAFT.request_timeout_ms, "outbound request timeout"),
    "controller.quorum.retry.backoff.ms": ("retry_backoff_ms", int, _RAFT.retry_backoff_ms, "base retry backoff"),
    "controller.quorum.append.linger.ms": ("append_linger_ms", int, _RAFT.append_linger_ms, "leader gathers appends this long"),
    "metadata.max.idle.interval.ms": ("max_idle_interval_ms", int, _RAFT.max_idle_interval_ms, "NoOpRecord after this idle time (0: off)"),
    "fetch.max.wait.ms": ("fetch_max_wait_ms", int, _RAFT.fetch_max_wait_ms, "long poll of a fetch with nothing new"),
    "controller.quorum.pre.vote": ("pre_vote", bool, _RAFT.pre_vote, "KIP-996 pre-vote before bumping the epoch"),
    "socket.request.max.bytes": ("max_frame_bytes", int, 100 * 1024 * 1024, "largest request frame accepted"),
    "log.segment.bytes": ("segment_bytes", int, 64 * 1024 * 1024, "segment file size before rolling"),
    "log.fsync": ("fsync", bool, True, "fsync appends before acknowledging (false only for experiments)"),
    "events.bootstrap.servers": ("events_bootstrap", str, None, "Kafka for the events topic (absent: no publishing)"),
    "events.topic": ("events_topic", str, "quorum-events", "the events topic"),
    "events.metrics.interval.ms": ("metrics_interval_ms", int, 1000, "how often a metrics record is published"),
    "events.buffer.records": ("events_buffer_records", int, 10_000, "records buffered while the broker is away"),
    "control.socket": ("control_socket", str, None, "fault-injection socket (default: DATA_DIR/control.sock)"),
}
# The events producer's Kafka client properties, in Kafka's own names after `events.`
# (events.security.protocol, events.sasl.jaas.config, events.ssl.truststore.location, ...), or
# a properties file of them (events.command.config), as Kafka's tools take them.
EVENTS_CLIENT_KEYS = tuple(sorted(kafka_client_properties.PYTHON_KEYS))
EVENTS_CLIENT = "the node's events producer (kafka-python)"
REQUIRED = ("node.id", "cluster.id", "controller.quorum.voters", "listener", "data.dir")


@dataclass(frozen=True)
class NodeConfig:
    """Built by `from_mapping`, which fills every field (defaults: `SETTINGS`)."""
    node_id: int
    cluster_id: str
    voters: dict[int, Endpoint]
    listener: Endpoint
    data_dir: Path
    topic: str
    election_timeout_ms: int
    fetch_timeout_ms: int
    election_backoff_max_ms: int
    request_timeout_ms: int
    retry_backoff_ms: int
    append_linger_ms: int
    max_idle_interval_ms: int
    fetch_max_wait_ms: int
    pre_vote: bool
    max_frame_bytes: int
    segment_bytes: int
    fsync: bool
    events_bootstrap: str | None
    events_topic: str
    metrics_interval_ms: int
    events_buffer_records: int
    control_socket: Path | None
    events_client: dict[str, Any] = field(default_factory=dict, repr=False)  # kafka-python's arguments
    events_principal: str | None = None

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voters

    @property
    def control_path(self) -> Path:
        return self.control_socket or self.data_dir / "control.sock"

    def raft_config(self) -> RaftConfig:
        return RaftConfig(election_timeout_ms=self.election_timeout_ms, fetch_timeout_ms=self.fetch_timeout_ms,
                          election_backoff_max_ms=self.election_backoff_max_ms,
                          request_timeout_ms=self.request_timeout_ms, retry_backoff_ms=self.retry_backoff_ms,
                          append_linger_ms=self.append_linger_ms, max_idle_interval_ms=self.max_idle_interval_ms,
                          fetch_max_wait_ms=self.fetch_max_wait_ms, pre_vote=self.pre_vote)


def parse_endpoint(key: str, text: str) -> Endpoint:
    host, sep, port = str(text).strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"{key}: expected host:port, got {text!r}")
    return Endpoint(host.strip("[]"), int(port))


def parse_voters(key: str, value: Any) -> dict[int, Endpoint]:
    items = value if isinstance(value, list) else str(value).split(",")
    voters: dict[int, Endpoint] = {}
    for item in items:
        item = str(item).strip()
        node, sep, addr = item.partition("@")
        if not sep or not node.strip().isdigit():
            raise ConfigError(f"{key}: expected id@host:port, got {item!r}")
        nid = int(node)
        if nid in voters:
            raise ConfigError(f"{key}: voter {nid} is listed twice")
        voters[nid] = parse_endpoint(f"{key} (voter {nid})", addr)
    if not voters:
        raise ConfigError(f"{key}: no voters")
    return voters


def _coerce(key: str, typ: type, value: Any) -> Any:
    if typ is bool:
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("true", "false"):
            return str(value).lower() == "true"
        raise ConfigError(f"{key}: expected true or false, got {value!r}")
    if typ is int:
        if isinstance(value, bool) or not (isinstance(value, int) or str(value).lstrip("-").isdigit()):
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        return int(value)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise ConfigError(f"{key}: must not be empty")
    return str(value)


def from_mapping(raw: dict[str, Any], source: str = "config") -> NodeConfig:
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: expected a mapping of keys to values")
    values: dict[str, Any] = {}
    client: dict[str, str] = {}
    command_config: str | None = None
    for key, value in raw.items():
        key = str(key)
        if key in SETTINGS:
            attr, typ, _, _ = SETTINGS[key]
            values[key] = _coerce(key, typ, value) if key != "controller.quorum.voters" else value
        elif key.startswith("events.") and key[len("events."):] in EVENTS_CLIENT_KEYS:
            client[key[len("events."):]] = str(value)
        elif key == "events.command.config":
            command_config = str(value)
        else:
            known = list(SETTINGS) + ["events." + k for k in EVENTS_CLIENT_KEYS] + ["events.command.config"]
            hint = difflib.get_close_matches(key, known, n=1)
            raise ConfigError(f"{source}: unknown key {key!r}" + (f" (did you mean {hint[0]!r}?)" if hint else ""))
    missing = [k for k in REQUIRED if k not in values]
    if missing:
        raise ConfigError(f"{source}: missing required key(s): {', '.join(missing)}")
    kw: dict[str, Any] = {attr: values.get(key, default) for key, (attr, _, default, _) in SETTINGS.items()}
    kw["voters"] = parse_voters("controller.quorum.voters", values["controller.quorum.voters"])
    kw["listener"] = parse_endpoint("listener", values["listener"])
    kw["data_dir"] = Path(values["data.dir"])
    kw["control_socket"] = Path(values["control.socket"]) if "control.socket" in values else None
    try:
        if command_config is not None:
            if client:
                raise ConfigError(f"events.command.config: give the events producer's properties either in that file "
                                  f"or as events.* keys, not both (found events.{sorted(client)[0]})")
            client = kafka_client_properties.load_file(command_config)
        kw["events_client"] = kafka_client_properties.kafka_python_config(client, EVENTS_CLIENT)
    except kafka_client_properties.ClientPropertiesError as e:
        raise ConfigError(f"events.{e}" if command_config is None else f"events.command.config: {e}") from None
    kw["events_principal"] = kafka_client_properties.principal(client)
    if kw["node_id"] < 0:
        raise ConfigError("node.id: must not be negative")
    for key in ("controller.quorum.election.timeout.ms", "controller.quorum.fetch.timeout.ms",
                "controller.quorum.request.timeout.ms", "socket.request.max.bytes", "log.segment.bytes",
                "events.metrics.interval.ms", "events.buffer.records"):
        if key in values and values[key] <= 0:
            raise ConfigError(f"{key}: must be positive (got {values[key]})")
    for key in ("controller.quorum.election.backoff.max.ms", "controller.quorum.retry.backoff.ms",
                "controller.quorum.append.linger.ms", "metadata.max.idle.interval.ms", "fetch.max.wait.ms"):
        if key in values and values[key] < 0:
            raise ConfigError(f"{key}: must not be negative (got {values[key]})")
    node_id = kw["node_id"]
    if node_id in kw["voters"] and kw["voters"][node_id] != kw["listener"]:
        raise ConfigError(f"listener: {kw['listener']} differs from this node's entry in controller.quorum.voters "
                          f"({kw['voters'][node_id]})")
    return NodeConfig(**kw)


def load(path: str | Path) -> NodeConfig:
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    return from_mapping(raw or {}, str(path))


def settings_help() -> str:
    """The table of keys for `quorum node --help`."""
    lines = ["configuration keys (YAML):"]
    for key, (_, _, default, text) in SETTINGS.items():
        d = "required" if key in REQUIRED else f"default {default}" if default is not None else "optional"
        lines.append(f"  {key:<44} {text} ({d})")
    lines.append("  events.security.protocol|events.sasl.mechanism|events.sasl.jaas.config|events.ssl.truststore.*|..."
                 "  the events producer's Kafka client properties, in Kafka's names (or events.command.config: FILE)")
    return "\n".join(lines)


__all__ = ["NodeConfig", "Endpoint", "ConfigError", "load", "from_mapping", "settings_help"]
