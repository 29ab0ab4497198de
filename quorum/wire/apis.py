"""The Kafka APIs a quorum node speaks, as kafka-python message classes.

Fetch, DescribeQuorum, ApiVersions and Metadata come with kafka-python; Vote,
BeginQuorumEpoch and EndQuorumEpoch are loaded by the same `ApiMessage` machinery
from the JSON schemas in `quorum.wire.schemas`. `SUPPORTED` is the single table
of what this node accepts: ApiVersions answers from it and the server rejects
anything outside it.
"""
from __future__ import annotations

from dataclasses import dataclass

from kafka.protocol.admin import (DescribeClusterRequest, DescribeClusterResponse, DescribeQuorumRequest,
                                  DescribeQuorumResponse)
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.metadata import (ApiVersionsRequest, ApiVersionsResponse, MetadataRequest,
                                     MetadataResponse)
from kafka.protocol.producer import ProduceRequest, ProduceResponse

_SCHEMAS = "quorum.wire.schemas"


class VoteRequest(ApiMessage, load_json=_SCHEMAS): pass
class VoteResponse(ApiMessage, load_json=_SCHEMAS): pass
class BeginQuorumEpochRequest(ApiMessage, load_json=_SCHEMAS): pass
class BeginQuorumEpochResponse(ApiMessage, load_json=_SCHEMAS): pass
class EndQuorumEpochRequest(ApiMessage, load_json=_SCHEMAS): pass
class EndQuorumEpochResponse(ApiMessage, load_json=_SCHEMAS): pass


PRODUCE, FETCH, METADATA, API_VERSIONS = 0, 1, 3, 18
VOTE, BEGIN_QUORUM_EPOCH, END_QUORUM_EPOCH, DESCRIBE_QUORUM = 52, 53, 54, 55
DESCRIBE_CLUSTER = 60


@dataclass(frozen=True)
class Api:
    key: int
    name: str
    request: type
    response: type
    min_version: int
    max_version: int


# Fetch from v12 only: that is where KRaft's fields (ClusterId, LastFetchedEpoch,
# DivergingEpoch, CurrentLeader) exist. Fetch v13+ names topics by id, see topic_id().
# Produce is the append path for applications (v3-v12: topics by name).
SUPPORTED: dict[int, Api] = {a.key: a for a in (
    Api(PRODUCE, "Produce", ProduceRequest, ProduceResponse, 3, 12),
    Api(FETCH, "Fetch", FetchRequest, FetchResponse, 12, 17),
    Api(METADATA, "Metadata", MetadataRequest, MetadataResponse, 0, 12),
    Api(API_VERSIONS, "ApiVersions", ApiVersionsRequest, ApiVersionsResponse, 0, 3),
    Api(VOTE, "Vote", VoteRequest, VoteResponse, 0, 2),
    Api(BEGIN_QUORUM_EPOCH, "BeginQuorumEpoch", BeginQuorumEpochRequest, BeginQuorumEpochResponse, 0, 1),
    Api(END_QUORUM_EPOCH, "EndQuorumEpoch", EndQuorumEpochRequest, EndQuorumEpochResponse, 0, 1),
    Api(DESCRIBE_QUORUM, "DescribeQuorum", DescribeQuorumRequest, DescribeQuorumResponse, 0, 2),
    # the admin client's describe_cluster() (cluster id, controller = the Raft leader)
    Api(DESCRIBE_CLUSTER, "DescribeCluster", DescribeClusterRequest, DescribeClusterResponse, 0, 2),
)}

# The versions this node sends to its peers. BeginQuorumEpoch and EndQuorumEpoch v1 carry
# KIP-853's directory ids and leader endpoints, which a static voter set does not have.
FETCH_VERSION = 17
VOTE_VERSION = 2
EPOCH_VERSION = 0


def topic_id(topic: str):
    """The topic id used in Fetch v13+: Kafka's fixed id for `__cluster_metadata`, and a
    name-derived id for any other quorum topic (both sides derive the same one)."""
    import uuid
    if topic == "__cluster_metadata":
        return uuid.UUID(int=1)  # Kafka's METADATA_TOPIC_ID (AAAAAAAAAAAAAAAAAAAAAQ)
    return uuid.uuid5(uuid.NAMESPACE_URL, "quorum-topic:" + topic)
