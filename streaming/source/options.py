"""The source's options, parsed once, with the same names as Spark's native `kafka` format.

Using the native names (`kafka.bootstrap.servers`, `subscribe`, `startingOffsets`,
`maxOffsetsPerTrigger`, `kafka.*` pass-through) lets the job hand one option map to either
source kind. `kafka.*` settings other than the bootstrap servers go verbatim to the client:
librdkafka names for the Python source (e.g. `kafka.security.protocol`, `kafka.sasl.mechanism`,
`kafka.sasl.username`, `kafka.ssl.ca.location`), Java client names for the native one.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

STARTING_OFFSETS = ("earliest", "latest")
# Settings this source owns: a user value would break the exactly-once reading.
_RESERVED = frozenset({"group.id", "enable.auto.commit", "enable.partition.eof", "auto.offset.reset",
                       "isolation.level", "enable.auto.offset.store"})
DEFAULT_POLL_TIMEOUT_S = 1.0
# A read task that sees no progress for this long fails (Spark retries it) instead of hanging.
DEFAULT_READ_STALL_TIMEOUT_S = 120.0
DEFAULT_PROBE_TIMEOUT_S = 10.0


class SourceOptionError(ValueError):
    """A bad option of the Kafka source, naming the option."""


@dataclass(frozen=True)
class KafkaSourceOptions:
    bootstrap_servers: str
    topic: str
    starting_offsets: str = "latest"
    max_offsets_per_trigger: int | None = None
    client_settings: tuple[tuple[str, str], ...] = field(default=())  # librdkafka pass-through
    read_stall_timeout_s: float = DEFAULT_READ_STALL_TIMEOUT_S
    probe_timeout_s: float = DEFAULT_PROBE_TIMEOUT_S
    min_partitions: int = 1  # read tasks a busy micro-batch is spread over at least (planning.group_ranges)

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> "KafkaSourceOptions":
        # Spark hands Python sources a case-insensitive map whose keys come back lower-cased.
        opts = {str(k).lower(): str(v) for k, v in options.items()}
        bootstrap = opts.get("kafka.bootstrap.servers", "").strip()
        if not bootstrap:
            raise SourceOptionError("option 'kafka.bootstrap.servers' is required (host:port[,host:port])")
        if "subscribepattern" in opts or "assign" in opts:
            raise SourceOptionError("only option 'subscribe' (one topic) is supported by this source")
        topic = opts.get("subscribe", "").strip()
        if not topic or "," in topic:
            raise SourceOptionError("option 'subscribe' must name exactly one topic")
        starting = opts.get("startingoffsets", "latest").strip().lower()
        if starting not in STARTING_OFFSETS:
            raise SourceOptionError(f"option 'startingOffsets' must be one of {', '.join(STARTING_OFFSETS)} "
                                    f"(got {starting!r})")
        max_per_trigger = _positive_int(opts, "maxoffsetspertrigger", "maxOffsetsPerTrigger")
        settings = []
        for key, value in sorted(opts.items()):
            if not key.startswith("kafka.") or key == "kafka.bootstrap.servers":
                continue
            name = key[len("kafka."):]
            if name in _RESERVED:
                raise SourceOptionError(f"option {key!r} is set by the source itself and cannot be overridden")
            settings.append((name, value))
        return cls(bootstrap, topic, starting, max_per_trigger, tuple(settings),
                   _positive_float(opts, "readstalltimeoutseconds", "readStallTimeoutSeconds",
                                   DEFAULT_READ_STALL_TIMEOUT_S),
                   _positive_float(opts, "probetimeoutseconds", "probeTimeoutSeconds", DEFAULT_PROBE_TIMEOUT_S),
                   _positive_int(opts, "minpartitions", "minPartitions") or 1)

    def consumer_config(self, **overrides: object) -> dict[str, object]:
        """librdkafka settings of every consumer this source opens. Offsets are never committed
        to Kafka: Spark's checkpoint is the only record of progress."""
        conf: dict[str, object] = {
            "bootstrap.servers": self.bootstrap_servers,
            "group.id": "quorum-health-source",  # required by the client, never used to commit
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,      # tells a reader it reached the high watermark
            "auto.offset.reset": "error",      # never jump over records silently
            "isolation.level": "read_uncommitted",
            "log_level": 3,
        }
        conf.update(dict(self.client_settings))
        conf.update(overrides)
        return conf


def _positive_int(opts: dict[str, str], key: str, name: str) -> int | None:
    raw = opts.get(key)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise SourceOptionError(f"option {name!r} must be a positive integer (got {raw!r})") from None
    if value <= 0:
        raise SourceOptionError(f"option {name!r} must be a positive integer (got {raw!r})")
    return value


def _positive_float(opts: dict[str, str], key: str, name: str, default: float) -> float:
    raw = opts.get(key)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SourceOptionError(f"option {name!r} must be a positive number (got {raw!r})") from None
    if value <= 0:
        raise SourceOptionError(f"option {name!r} must be a positive number (got {raw!r})")
    return value


def make_consumer(conf: dict[str, object]):
    """A confluent-kafka consumer; a setting librdkafka rejects becomes an error naming it."""
    from confluent_kafka import Consumer, KafkaException
    try:
        return Consumer(conf)
    except (KafkaException, ValueError, TypeError) as e:
        raise SourceOptionError(f"the Kafka client rejected the source's settings: {e}") from None
