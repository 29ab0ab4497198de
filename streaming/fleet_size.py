"""How many quorums the events topic has heard from lately.

A new checkpoint fixes its number of state partitions for life, and every partition costs every
micro-batch a task, input or not. In local mode `auto` therefore sizes them by the fleet the
topic shows at the first start (`SparkConfig.state_partitions`): one partition for a few hundred
quorums, more only for larger fleets. The count reads the keys of the topic's last minute of
records (each record's key names its quorum, `cluster/topic-partition`) with the source's own
client settings, and stops as soon as the answer cannot change.
"""
from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path
from urllib.parse import urlparse

log = logging.getLogger(__name__)

RECENT_MS = 60_000   # a quorum counts when the topic holds a record of it this recent
BUDGET_S = 10.0      # past this the count gives up, and `auto` keeps the cores
CLIENT = "the job's count of quorums (librdkafka)"


def quorum_of(key: bytes | None) -> bytes | None:
    """`cluster/topic-partition` of a record key, per quorum or (older records) per replica."""
    if not key:
        return None
    return b"/".join(key.split(b"/", 2)[:2])


def recent_quorums(source, enough: int, *, recent_ms: int = RECENT_MS, budget_s: float = BUDGET_S,
                   now_ms: int | None = None) -> int | None:
    """The quorums with records in the last `recent_ms` of the events topic (`source`, a
    SourceConfig), counted up to `enough`; 0 when the topic does not exist yet; None when it
    cannot be read within `budget_s` (the reason is logged)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    from quorum.kafka_client import kafka_client_properties as kcp
    from quorum.kafka_client import kafka_failures
    # the source's login and TLS settings; the rest (fetch sizes, timeouts) is the connector's
    login = {k: v for k, v in source.client_properties().items() if k in kcp.PYTHON_KEYS}
    try:
        security = kcp.librdkafka_config(login, CLIENT)
    except kcp.ClientPropertiesError as e:  # a login only Kafka's Java client speaks (GSSAPI)
        log.warning("could not count the quorums of topic %s on %s (%s): the new checkpoint's state partitions "
                    "are not sized by the fleet", source.topic, source.bootstrap_servers, e)
        return None
    failures = kafka_failures.LibrdkafkaErrors()
    consumer = Consumer({"bootstrap.servers": source.bootstrap_servers, "group.id": f"quorum-health-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "error_cb": failures, "log_level": 0, **security})
    deadline = time.monotonic() + budget_s
    try:
        metadata = consumer.list_topics(source.topic, timeout=budget_s).topics.get(source.topic)
        if metadata is None or metadata.error is not None:
            if metadata is not None and metadata.error.name() == "UNKNOWN_TOPIC_OR_PART":
                return 0
            raise KafkaException(metadata.error if metadata is not None else "no metadata")
        since = (now_ms if now_ms is not None else int(time.time() * 1000)) - recent_ms
        starts = consumer.offsets_for_times([TopicPartition(source.topic, p, since) for p in metadata.partitions],
                                            timeout=max(0.1, deadline - time.monotonic()))
        ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=max(0.1, deadline - time.monotonic()))[1]
                for tp in starts}
        # offset -1: nothing that recent in the partition
        todo = {tp.partition: ends[tp.partition] for tp in starts if 0 <= tp.offset < ends[tp.partition]}
        consumer.assign([tp for tp in starts if tp.partition in todo])
        quorums: set[bytes] = set()
        while todo and len(quorums) < enough:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the last {recent_ms / 1000:.0f} s of records not read within {budget_s:.0f} s")
            for m in consumer.consume(500, timeout=0.5):
                if m.error() is not None:
                    continue  # end of partition and the like; the offsets say when it is done
                if (q := quorum_of(m.key())) is not None:
                    quorums.add(q)
                if m.offset() + 1 >= todo.get(m.partition(), 0):
                    todo.pop(m.partition(), None)
        return min(len(quorums), enough)
    except (KafkaException, TimeoutError) as e:
        log.warning("could not count the quorums of topic %s on %s (%s): the new checkpoint's state partitions "
                    "are not sized by the fleet", source.topic, source.bootstrap_servers,
                    failures.last[0] if failures.last else e)
        return None
    finally:
        consumer.close()


def is_new_local_checkpoint(query_checkpoint: str) -> bool:
    """A checkpoint on this machine's disk that has no batch yet (no `offsets/N` file)."""
    parsed = urlparse(query_checkpoint)
    if parsed.scheme not in ("", "file"):
        return False
    offsets = Path(parsed.path if parsed.scheme else query_checkpoint) / "offsets"
    return not offsets.is_dir() or not any(p.name.isdigit() for p in offsets.iterdir())
