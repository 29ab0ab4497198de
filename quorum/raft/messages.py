"""The KRaft RPCs the core speaks, as plain frozen dataclasses.

Names follow Kafka's JSON message schemas in snake_case (`CandidateEpoch` ->
`candidate_epoch`, `LastFetchedEpoch` -> `last_fetched_epoch`) so that mapping
them to the wire (Vote 52, BeginQuorumEpoch 53, EndQuorumEpoch 54, Fetch 1 v12+,
DescribeQuorum 55) is mechanical. Every request and response has the batched
topics/partitions form, so several quorums could share a node later; the core
serves exactly one (topic, partition) and answers any other one with
UNKNOWN_TOPIC_OR_PARTITION.

Every response partition carries the responder's leader id and epoch
(`leader_id`, `leader_epoch`, or `current_leader` for Fetch), -1 meaning unknown.

A `Message` is the envelope the core emits and consumes: the caller delivers
`body` from `source` to `destination`; a response reuses the request's
`correlation_id`, which is how the core matches answers to what it asked.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Union

from quorum.raft.log import LogRecord


class Errors(IntEnum):
    """Kafka error codes the protocol uses (values are the wire values)."""
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    UNKNOWN_TOPIC_OR_PARTITION = 3
    NOT_LEADER_OR_FOLLOWER = 6
    INVALID_REQUEST = 42
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    INCONSISTENT_VOTER_SET = 80
    INCONSISTENT_CLUSTER_ID = 104


NO_LEADER = -1  # LeaderId when the leader is unknown


# --- Vote (52) -------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class VotePartitionRequest:
    partition_index: int
    candidate_epoch: int      # bumped epoch of a candidate; for a pre-vote, the sender's current epoch
    candidate_id: int
    last_offset_epoch: int    # epoch of the last record in the candidate's log (0 if empty)
    last_offset: int          # the candidate's log end offset
    pre_vote: bool = False    # KIP-996: ask "would you vote for me?" without anyone changing state


@dataclass(frozen=True, slots=True)
class VoteTopicRequest:
    topic_name: str
    partitions: tuple[VotePartitionRequest, ...]


@dataclass(frozen=True, slots=True)
class VoteRequest:
    cluster_id: str | None
    topics: tuple[VoteTopicRequest, ...]
    voter_id: int = -1        # the receiver's id as the sender knows it (Vote v1+); -1 unknown


@dataclass(frozen=True, slots=True)
class VotePartitionResponse:
    partition_index: int
    error_code: int
    leader_id: int
    leader_epoch: int
    vote_granted: bool


@dataclass(frozen=True, slots=True)
class VoteTopicResponse:
    topic_name: str
    partitions: tuple[VotePartitionResponse, ...]


@dataclass(frozen=True, slots=True)
class VoteResponse:
    error_code: int
    topics: tuple[VoteTopicResponse, ...]


# --- BeginQuorumEpoch (53) ---------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class BeginQuorumEpochPartitionRequest:
    partition_index: int
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochTopicRequest:
    topic_name: str
    partitions: tuple[BeginQuorumEpochPartitionRequest, ...]


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    cluster_id: str | None
    topics: tuple[BeginQuorumEpochTopicRequest, ...]


@dataclass(frozen=True, slots=True)
class EpochPartitionResponse:
    """Partition answer of BeginQuorumEpoch and EndQuorumEpoch (the schemas are identical)."""
    partition_index: int
    error_code: int
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class EpochTopicResponse:
    topic_name: str
    partitions: tuple[EpochPartitionResponse, ...]


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    error_code: int
    topics: tuple[EpochTopicResponse, ...]


# --- EndQuorumEpoch (54) -----------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class EndQuorumEpochPartitionRequest:
    partition_index: int
    leader_id: int                        # -1 when a candidate ends its election
    leader_epoch: int
    preferred_successors: tuple[int, ...]  # voters by replicated offset, highest first


@dataclass(frozen=True, slots=True)
class EndQuorumEpochTopicRequest:
    topic_name: str
    partitions: tuple[EndQuorumEpochPartitionRequest, ...]


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    cluster_id: str | None
    topics: tuple[EndQuorumEpochTopicRequest, ...]


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    error_code: int
    topics: tuple[EpochTopicResponse, ...]


# --- Fetch (1, v12+) ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class FetchPartition:
    partition: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int   # epoch of the record before fetch_offset (the seed's FetchEpoch), 0 if none
    log_start_offset: int = -1
    partition_max_bytes: int = 1 << 20


@dataclass(frozen=True, slots=True)
class FetchTopic:
    topic: str
    partitions: tuple[FetchPartition, ...]


@dataclass(frozen=True, slots=True)
class FetchRequest:
    cluster_id: str | None
    replica_id: int           # ReplicaId (<= v14) / ReplicaState.ReplicaId (v15+)
    max_wait_ms: int
    topics: tuple[FetchTopic, ...]
    min_bytes: int = 0
    max_bytes: int = 0x7FFFFFFF
    replica_epoch: int = -1   # ReplicaState.ReplicaEpoch (v15+), unused by this core


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """DivergingEpoch: the follower must truncate to at most `end_offset` of `epoch`."""
    epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class LeaderIdAndEpoch:
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class FetchPartitionData:
    partition_index: int
    error_code: int
    high_watermark: int
    current_leader: LeaderIdAndEpoch
    diverging_epoch: EpochEndOffset | None = None
    records: tuple[LogRecord, ...] = ()
    log_start_offset: int = 0
    # a Kafka leader's answer to a fetch below its log start: the snapshot to fetch instead
    snapshot_id: EpochEndOffset | None = None


@dataclass(frozen=True, slots=True)
class FetchableTopicResponse:
    topic: str
    partitions: tuple[FetchPartitionData, ...]


@dataclass(frozen=True, slots=True)
class FetchResponse:
    error_code: int
    responses: tuple[FetchableTopicResponse, ...]
    throttle_time_ms: int = 0


# --- DescribeQuorum (55) -----------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class DescribeQuorumPartitionRequest:
    partition_index: int


@dataclass(frozen=True, slots=True)
class DescribeQuorumTopicRequest:
    topic_name: str
    partitions: tuple[DescribeQuorumPartitionRequest, ...]


@dataclass(frozen=True, slots=True)
class DescribeQuorumRequest:
    topics: tuple[DescribeQuorumTopicRequest, ...]


@dataclass(frozen=True, slots=True)
class DescribeQuorumReplica:
    """One replica in a DescribeQuorum answer (Kafka's DescribeQuorumResponse ReplicaState,
    KIP-836); -1 means unknown."""
    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int


@dataclass(frozen=True, slots=True)
class DescribeQuorumPartitionResponse:
    partition_index: int
    error_code: int
    leader_id: int
    leader_epoch: int
    high_watermark: int
    current_voters: tuple[DescribeQuorumReplica, ...]
    observers: tuple[DescribeQuorumReplica, ...]
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class DescribeQuorumTopicResponse:
    topic_name: str
    partitions: tuple[DescribeQuorumPartitionResponse, ...]


@dataclass(frozen=True, slots=True)
class DescribeQuorumResponse:
    error_code: int
    topics: tuple[DescribeQuorumTopicResponse, ...]
    error_message: str | None = None


# --- envelope ----------------------------------------------------------------------------------

Request = Union[VoteRequest, BeginQuorumEpochRequest, EndQuorumEpochRequest, FetchRequest,
                DescribeQuorumRequest]
Response = Union[VoteResponse, BeginQuorumEpochResponse, EndQuorumEpochResponse, FetchResponse,
                 DescribeQuorumResponse]
REQUEST_TYPES = (VoteRequest, BeginQuorumEpochRequest, EndQuorumEpochRequest, FetchRequest,
                 DescribeQuorumRequest)


@dataclass(frozen=True, slots=True)
class Message:
    """One request or response travelling between two nodes."""
    source: int
    destination: int
    correlation_id: int
    body: Request | Response

    @property
    def is_request(self) -> bool:
        return isinstance(self.body, REQUEST_TYPES)
