"""The job's YAML configuration as typed, frozen dataclasses; every default is written here.

Sections: `spark`, `source`, `decode`, `job`, `dead_letters` (this module), and `health`, `sink`
(`streaming.health.config`, `streaming.sinks.config`). An unknown key, a wrong type or a bad
value is a `ConfigError` whose message starts with the key's full path (`source.topic: ...`).
`deploy/job.local.yaml` lists every key with its default and meaning.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from quorum import events
from streaming.health.config import ConfigError, HealthConfig, checked_section, config_from_dict
from streaming.sinks.config import SinkConfig
from streaming.source import STARTING_OFFSETS

__all__ = ["ConfigError", "JobConfig", "SparkConfig", "SourceConfig", "DecodeConfig", "RunConfig",
           "DeadLetterConfig", "load_config"]


@dataclass(frozen=True)
class SparkConfig:
    """`spark`: the session. Under spark-submit, spark-submit's --master wins."""
    master: str = "local[*]"
    app_name: str = "quorum-health"
    # State store partitions, the most cores the health stage can use: Spark freezes the number
    # into a new checkpoint. Every partition costs each micro-batch a task, idle or not, so
    # `auto` takes no more than the fleet needs in local mode (one per QUORUMS_PER_STATE_PARTITION
    # quorums the topic shows at the first start, at most local[N]'s N or the machine's cores, at
    # most 8) and 8 on a cluster, room to grow (docs/deployment.md).
    shuffle_partitions: int | str = "auto"
    conf: dict = field(default_factory=dict)  # any other spark.* setting, verbatim

    def __post_init__(self) -> None:
        if not self.master:
            raise ConfigError("master: must not be empty")
        if self.shuffle_partitions != "auto" and (isinstance(self.shuffle_partitions, str)
                                                  or self.shuffle_partitions < 1):
            raise ConfigError(f"shuffle_partitions: must be >= 1 or auto (got {self.shuffle_partitions!r})")

    def quorums_to_count(self, master: str) -> int:
        """How many quorums a new checkpoint's `auto` wants counted on `master` (more would not
        change it); 0 when the fleet does not matter (a number is set, a cluster, one core)."""
        cores = local_cores(master)
        if self.shuffle_partitions != "auto" or cores is None or cores == 1:
            return 0
        return (cores - 1) * QUORUMS_PER_STATE_PARTITION + 1

    def state_partitions(self, master: str, fleet: int | None = None) -> int:
        """The number of state partitions for a new checkpoint on `master`, with `fleet` quorums
        in the events topic (None: not known)."""
        if self.shuffle_partitions != "auto":
            return int(self.shuffle_partitions)
        cores = auto_state_partitions(master)
        if fleet is None or local_cores(master) is None:
            return cores
        return max(1, min(cores, -(-fleet // QUORUMS_PER_STATE_PARTITION)))


CLUSTER_STATE_PARTITIONS = 8
# One state partition keeps up with this many quorums many times over: on local[2] the job with
# one sustained 38,931 events/s against 34,559 with two (docs/performance.md), the records of
# some 2,500 quorums a second.
QUORUMS_PER_STATE_PARTITION = 200


def local_cores(master: str) -> int | None:
    """The task slots of a local master (local: 1, local[N] and local[N,F]: N, local[*]: this
    machine's cores, at most 8); None for a cluster."""
    import os
    import re
    if master == "local":
        return 1
    m = re.fullmatch(r"local\[(\d+|\*)(?:,\d+)?\]", master)
    if m is None:
        return None
    cores = (os.cpu_count() or 1) if m.group(1) == "*" else int(m.group(1))
    return max(1, min(cores, CLUSTER_STATE_PARTITIONS))


def auto_state_partitions(master: str) -> int:
    """The most state partitions `auto` takes: a local master's task slots (`local_cores`); a
    cluster: 8, so that executors added later still get a share of the health stage."""
    cores = local_cores(master)
    return CLUSTER_STATE_PARTITIONS if cores is None else cores


# Client settings Spark's Kafka connector refuses: it manages offsets and deserialisation itself.
CONNECTOR_OWNED_SETTINGS = frozenset({"auto.offset.reset", "enable.auto.commit", "key.deserializer",
                                      "value.deserializer", "interceptor.classes"})
# After each poll a read task's consumer sends its next fetch ahead, and the broker parks a
# fetch with nothing new for up to fetch.max.wait.ms (Kafka's default: 500 ms). A broker answers
# a connection's requests in order, so the next micro-batch's task, which asks the partition's
# offsets on the same connection, waits behind that fetch until a record arrives or the wait ends
# (on a quiet quorum's topic, its read task took 108 ms, 37 ms with 10). A task reads only
# offsets the topic already has, so a short wait costs one empty answer per task.
READ_FETCH_MAX_WAIT_MS = 10
# Records of one Kafka partition that one read task takes in a micro-batch at most: a busy
# partition's range is split between several tasks; a quiet one (a quorum's dozen records a
# second) is read by one, since each further task is a Kafka consumer and a fetch more a batch.
READ_TASK_RECORDS = 10_000


@dataclass(frozen=True)
class SourceConfig:
    """`source`: the events topic, read by Spark's Kafka connector."""
    bootstrap_servers: str = "127.0.0.1:9092"
    topic: str = "quorum-events"
    starting_offsets: str = "latest"         # where a new checkpoint starts: earliest | latest
    # Records per micro-batch at most: a backlog (a restart after an outage) is read in bounded
    # steps instead of one batch whose plan, once in the offset log, would be retried as a whole.
    max_offsets_per_trigger: int | None = 200_000  # None: all available
    # Records the topic deleted (retention) before the job read them: false logs how many offsets
    # were lost and reads on from the earliest left; true stops the job (Spark's own default).
    fail_on_data_loss: bool = False
    # Kafka's own client properties, passed to Spark's connector as they are (security.protocol,
    # sasl.jaas.config, ssl.truststore.*), inline and/or from a properties file (`command_config`,
    # as Kafka's tools take it); inline keys win.
    kafka: dict = field(default_factory=dict)
    command_config: str | None = None

    def __post_init__(self) -> None:
        if self.starting_offsets not in STARTING_OFFSETS:
            raise ConfigError(f"starting_offsets: must be one of {', '.join(STARTING_OFFSETS)} "
                              f"(got {self.starting_offsets!r})")
        if not self.bootstrap_servers:
            raise ConfigError("bootstrap_servers: must not be empty")
        if not self.topic:
            raise ConfigError("topic: must not be empty")
        if self.max_offsets_per_trigger is not None and self.max_offsets_per_trigger < 1:
            raise ConfigError(f"max_offsets_per_trigger: must be >= 1 (got {self.max_offsets_per_trigger})")
        for key in self.client_properties():
            if str(key).startswith("kafka."):
                raise ConfigError(f"kafka.{key}: write client settings without the 'kafka.' prefix")
            if str(key) in CONNECTOR_OWNED_SETTINGS:
                raise ConfigError(f"kafka.{key}: set by Spark's Kafka connector itself (offsets live in "
                                  f"the job's checkpoint), so it cannot be given here")

        self.java_properties(check_files=False)

    def java_properties(self, check_files: bool = True) -> dict[str, str]:
        """The client properties, checked as Kafka's Java client will take them; with
        `check_files`, the stores they name must be readable on this machine (the driver)."""
        from quorum.kafka_client import kafka_client_properties as kcp
        try:
            return kcp.java_config(self.client_properties(), "the job's source (Spark's Kafka connector)",
                                   check_files=check_files)
        except kcp.ClientPropertiesError as e:
            raise ConfigError(f"kafka.{e}") from None

    def client_properties(self) -> dict[str, str]:
        from quorum.kafka_client import kafka_client_properties as kcp
        try:
            return kcp.merged(self.command_config, self.kafka)
        except kcp.ClientPropertiesError as e:
            raise ConfigError(f"command_config: {e}") from None

    def reader_options(self) -> dict[str, str]:
        """The connector's options for the job's read of the events topic (`streaming.source.open_stream`)."""
        opts = {"kafka.bootstrap.servers": self.bootstrap_servers, "subscribe": self.topic,
                "startingOffsets": self.starting_offsets, "failOnDataLoss": str(self.fail_on_data_loss).lower(),
                "maxRecordsPerPartition": str(READ_TASK_RECORDS)}
        if self.max_offsets_per_trigger is not None:
            opts["maxOffsetsPerTrigger"] = str(self.max_offsets_per_trigger)
        opts["kafka.fetch.max.wait.ms"] = str(READ_FETCH_MAX_WAIT_MS)  # a setting in `kafka` wins
        opts.update({f"kafka.{k}": v for k, v in self.client_properties().items()})
        return opts


@dataclass(frozen=True)
class DecodeConfig:
    """`decode`: validation beyond the contract's own rules."""
    max_future_ms: int = events.DEFAULT_MAX_FUTURE_MS  # reject records stamped further ahead of the job's clock

    def __post_init__(self) -> None:
        if self.max_future_ms < 0:
            raise ConfigError(f"max_future_ms: must be >= 0 (got {self.max_future_ms})")


@dataclass(frozen=True)
class RunConfig:
    """`job`: the streaming queries."""
    checkpoint_location: str = "./checkpoints/quorum-health"  # one sub-directory per query
    trigger_interval_ms: int = 1000   # micro-batch period; statuses are re-evaluated on these ticks

    def __post_init__(self) -> None:
        if not self.checkpoint_location:
            raise ConfigError("checkpoint_location: must not be empty")
        if self.trigger_interval_ms < 1:
            raise ConfigError(f"trigger_interval_ms: must be >= 1 (got {self.trigger_interval_ms})")


DEFAULT_DEAD_LETTER_TRIGGER_MS = 10_000


@dataclass(frozen=True)
class DeadLetterConfig:
    """`dead_letters`: records that fail the contract, kept with reason, field and raw bytes
    (JSON lines, one file per micro-batch with rejects, `value` base64-encoded). Counts by reason
    are exported either way."""
    enabled: bool = True
    path: str = "./dead-letters"
    # No longer used: dead letters are written with each health batch, from the same read of the
    # topic. Kept so that existing configs load; the job warns when it is set.
    trigger_interval_ms: int = DEFAULT_DEAD_LETTER_TRIGGER_MS

    def __post_init__(self) -> None:
        if self.enabled and not self.path:
            raise ConfigError("path: must not be empty when dead letters are enabled")
        if self.trigger_interval_ms < 1:
            raise ConfigError(f"trigger_interval_ms: must be >= 1 (got {self.trigger_interval_ms})")


@dataclass(frozen=True)
class JobConfig:
    spark: SparkConfig = field(default_factory=SparkConfig)
    source: SourceConfig = field(default_factory=SourceConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)
    job: RunConfig = field(default_factory=RunConfig)
    dead_letters: DeadLetterConfig = field(default_factory=DeadLetterConfig)
    health: HealthConfig = field(default_factory=HealthConfig)
    sink: SinkConfig = field(default_factory=SinkConfig)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "JobConfig":
        d = checked_section(cls, d, "config")
        sections = {"spark": SparkConfig, "source": SourceConfig, "decode": DecodeConfig, "job": RunConfig,
                    "dead_letters": DeadLetterConfig}
        values: dict[str, Any] = {}
        for name, value in d.items():
            if name == "health":
                values[name] = HealthConfig.from_dict(value, "health")
            elif name == "sink":
                values[name] = SinkConfig.from_dict(value, "sink")
            else:
                values[name] = config_from_dict(sections[name], value, name)
        cfg = cls(**values)
        if cfg.job.trigger_interval_ms > cfg.health.tick_ms:
            raise ConfigError(f"job.trigger_interval_ms: {cfg.job.trigger_interval_ms} is longer than "
                              f"health.tick_ms ({cfg.health.tick_ms}): statuses could not be re-evaluated on time")
        return cfg

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def check_files(self) -> None:
        """What the configuration names that must exist where the job starts (the Kafka clients'
        stores, the exporter's and the Pushgateway client's files); raises ConfigError. Kept out of loading, so that a config can be checked for
        its own sake on another machine."""
        try:
            self.source.java_properties()
        except ConfigError as e:
            raise ConfigError(f"source.{e}") from None
        try:
            self.sink.prometheus.check_files()
        except ConfigError as e:
            raise ConfigError(f"sink.prometheus.{e}") from None

    def shown(self) -> dict[str, Any]:
        """`to_dict` with every secret of the Kafka client properties as `[hidden]` (check-config)."""
        from quorum.kafka_client.kafka_client_properties import redacted
        d = self.to_dict()
        d["source"]["kafka"] = redacted(d["source"]["kafka"])
        d["sink"]["kafka"]["properties"] = redacted(d["sink"]["kafka"]["properties"])
        return d


def load_config(path: str | Path) -> JobConfig:
    """Read a YAML file (an empty file means all defaults)."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise ConfigError(f"cannot read config file {p}: {e.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"{p}: not valid YAML: {e}") from None
    if data is not None and not isinstance(data, Mapping):
        raise ConfigError(f"{p}: expected a mapping of sections at the top, got {type(data).__name__}")
    try:
        return JobConfig.from_dict(data)
    except ConfigError as e:
        raise ConfigError(f"{p}: {e}") from None
