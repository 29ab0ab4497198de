"""The values of the records a leader writes itself, in the formats Apache Kafka's controllers
read, so that a Kafka controller can follow a leader of this core and replay its log.

- LeaderChange (control record type 2): Kafka's LeaderChangeMessage v0, a flexible message:
  version int16, leader id int32, then voters and granting voters as compact arrays of
  {voter id int32, no tagged fields}, then no tagged fields.
- NoOp: a metadata record as Kafka's MetadataRecordSerde frames one: frame version 1, api key
  20 (NoOpRecord), version 0, and the empty NoOpRecord (no tagged fields), each an unsigned varint.
"""
from __future__ import annotations

import struct
from typing import Sequence

NOOP_RECORD = bytes((1, 20, 0, 0))

_HEAD = struct.Struct(">hi")      # version, leader id
_VOTER = struct.Struct(">ib")     # voter id, empty tagged fields


def _voters(ids: Sequence[int]) -> bytes:
    if len(ids) >= 127:
        raise ValueError(f"{len(ids)} voters: more than a one-byte compact array length holds")
    return bytes((len(ids) + 1,)) + b"".join(_VOTER.pack(i, 0) for i in ids)


def leader_change(leader_id: int, voters: Sequence[int], granting_voters: Sequence[int]) -> bytes:
    return _HEAD.pack(0, leader_id) + _voters(voters) + _voters(granting_voters) + b"\x00"


def read_leader_change(value: bytes) -> dict:
    """{"leader_id", "voters", "granting_voters"} of a LeaderChangeMessage written by `leader_change`
    or by Kafka (ValueError when it is not one)."""
    try:
        _version, leader_id = _HEAD.unpack_from(value)
        pos, lists = _HEAD.size, []
        for _ in range(2):
            n = value[pos] - 1
            pos += 1
            lists.append([_VOTER.unpack_from(value, pos + 5 * k)[0] for k in range(n)])
            pos += 5 * n
    except (struct.error, IndexError) as e:
        raise ValueError(f"not a LeaderChangeMessage: {e}") from None
    return {"leader_id": leader_id, "voters": lists[0], "granting_voters": lists[1]}
