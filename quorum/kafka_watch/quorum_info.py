"""The quorum state a DescribeQuorum answer carries (KIP-595, KIP-836; the v2 node endpoints of
KIP-853): what `quorum describe` prints and the collector publishes, read from kafka-python's
admin result or a raw response, an error answer raised as `DescribeError`."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from quorum.events import UNKNOWN_DIRECTORY_ID
from quorum.storage.meta import directory_id_text


class DescribeError(RuntimeError):
    """A DescribeQuorum that gave no quorum state; `error_code` is Kafka's (-1 when there was no
    error answer) and `leader_id`/`leader_epoch` what an error answer names (-1 unknown)."""

    def __init__(self, message: str, error_code: int = -1, error: str = "", leader_id: int = -1,
                 leader_epoch: int = -1):
        super().__init__(message)
        self.error_code = error_code
        self.error = error
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch


@dataclass(frozen=True)
class Replica:
    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int
    directory_id: str = UNKNOWN_DIRECTORY_ID


@dataclass(frozen=True)
class Endpoint:
    """One listener of a node, from DescribeQuorum v2's `Nodes`."""
    name: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host  # IPv6, as Kafka prints it
        return f"{self.name}://{host}:{self.port}"


@dataclass(frozen=True)
class QuorumInfo:
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[Replica, ...]
    observers: tuple[Replica, ...]
    nodes: dict[int, tuple[Endpoint, ...]] = field(default_factory=dict)  # empty before v2


# Kafka's current names where kafka-python still has an older one.
_ERROR_NAMES = {6: "NOT_LEADER_OR_FOLLOWER"}


def kafka_error_name(code: int) -> str:
    """Kafka's name of an error code (NOT_LEADER_OR_FOLLOWER), as its tools print it."""
    if code in _ERROR_NAMES:
        return _ERROR_NAMES[code]
    import kafka.errors
    return getattr(kafka.errors.for_code(code), "message", f"ERROR_{code}")


def quorum_info(result: dict[str, Any], topic: str = "__cluster_metadata", partition: int = 0) -> QuorumInfo:
    """The partition of a DescribeQuorum answer: `KafkaAdminClient.describe_metadata_quorum()`'s
    result (errors as `error` text) or a raw response's `to_dict()` (errors as codes)."""
    if result.get("error_code"):
        code = result["error_code"]
        raise DescribeError(f"{kafka_error_name(code)}: {result.get('error_message') or ''}".rstrip(": "),
                            code, kafka_error_name(code))
    for t in result.get("topics", []):
        if t.get("topic_name") != topic:
            continue
        for p in t.get("partitions", []):
            if p.get("partition_index") != partition:
                continue
            if p.get("error_code"):
                code = p["error_code"]
                raise DescribeError(f"{topic}-{partition}: {kafka_error_name(code)}"
                                    + (f" ({p['error_message']})" if p.get("error_message") else ""),
                                    code, kafka_error_name(code), p.get("leader_id", -1), p.get("leader_epoch", -1))
            if p.get("error"):
                raise DescribeError(f"{topic}-{partition}: {p['error']}", -1, str(p["error"]),
                                    p.get("leader_id", -1), p.get("leader_epoch", -1))
            return QuorumInfo(p["leader_id"], p["leader_epoch"], p["high_watermark"],
                              tuple(_replica(r) for r in p.get("current_voters", [])),
                              tuple(_replica(r) for r in p.get("observers", [])),
                              _nodes(result.get("nodes") or []))
    raise DescribeError(f"the answer does not describe {topic}-{partition}", -1, "bad_answer")


def answer_fields(answer: Any) -> dict[str, Any]:
    """The fields of a raw DescribeQuorum response that `quorum_info` reads, as its `to_dict()`
    gives them, read straight off the response (a collector reads one per cluster per second;
    the generic `to_dict()` walk was a tenth of its time)."""
    def replica(r: Any) -> dict[str, Any]:
        return {"replica_id": r.replica_id, "log_end_offset": r.log_end_offset,
                "last_fetch_timestamp": r.last_fetch_timestamp, "last_caught_up_timestamp": r.last_caught_up_timestamp,
                "replica_directory_id": r.replica_directory_id}

    def partition(p: Any) -> dict[str, Any]:
        return {"partition_index": p.partition_index, "error_code": p.error_code, "error_message": p.error_message,
                "leader_id": p.leader_id, "leader_epoch": p.leader_epoch, "high_watermark": p.high_watermark,
                "current_voters": [replica(r) for r in p.current_voters or ()],
                "observers": [replica(r) for r in p.observers or ()]}
    return {"error_code": answer.error_code, "error_message": answer.error_message,
            "topics": [{"topic_name": t.topic_name, "partitions": [partition(p) for p in t.partitions or ()]}
                       for t in answer.topics or ()],
            "nodes": [{"node_id": n.node_id, "listeners": [{"name": ls.name, "host": ls.host, "port": ls.port}
                                                           for ls in n.listeners or ()]} for n in answer.nodes or ()]}


def _replica(r: dict[str, Any]) -> Replica:
    return Replica(r["replica_id"], r["log_end_offset"], r.get("last_fetch_timestamp", -1),
                   r.get("last_caught_up_timestamp", -1), directory_id_text(r.get("replica_directory_id")))


def _nodes(nodes: list[dict[str, Any]]) -> dict[int, tuple[Endpoint, ...]]:
    return {n["node_id"]: tuple(Endpoint(e["name"], e["host"], e["port"]) for e in n.get("listeners") or [])
            for n in nodes}
