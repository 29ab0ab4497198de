"""Fetch v17 between quorum nodes, straight between bytes and the core's messages.

Every commit crosses Fetch four times (a follower encodes its request, the leader decodes
it, encodes the answer, the follower decodes that), and kafka-python's generic protocol
classes spent 15-30 us on each (90 us in a busy node), most of a commit's processing. This
codec writes and reads the v17 layout of Kafka's FetchRequest/FetchResponse schemas
directly and produces the same bytes and the same messages as kafka-python followed by
`translate` (the tests check both on generated messages). Anything it does not expect
(another version, a fetch session, forgotten topics, unknown tagged fields, a topic id it
does not know) raises `Unsupported`, and the caller takes the general path, which also
gives malformed bytes their proper `WireError`.
"""
from __future__ import annotations

import functools
import struct
import uuid
from dataclasses import dataclass
from typing import Callable, Iterator, TypeVar

from quorum.raft import messages as m
from quorum.storage.durable_log import batches_to_records, records_to_batches
from quorum.wire import apis as w
from quorum.wire import codec, translate
from quorum.wire.codec import Request

VERSION = 17

_I8, _I16, _I32, _I64 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
_REQ_HEAD = struct.Struct(">hhi")                      # api key, version, correlation id
_REQ_FIXED = struct.Struct(">iiibii")                  # max wait, min bytes, max bytes, isolation, session id, epoch
_REQ_PART = struct.Struct(">iiqiqi")                   # partition, leader epoch, offset, last epoch, log start, max bytes
_RESP_FIXED = struct.Struct(">ihi")                    # throttle, error, session id
_RESP_PART = struct.Struct(">ihqqq")                   # index, error, high watermark, last stable, log start
_EPOCH_END = struct.Struct(">iq")                      # DivergingEpoch: epoch, end offset
_LEADER = struct.Struct(">ii")                         # CurrentLeader: leader id, leader epoch
_REPLICA_STATE = struct.Struct(">iq")                  # ReplicaState: replica id, replica epoch
_SNAPSHOT_ID = struct.Struct(">qi")                    # SnapshotId: end offset, epoch


T = TypeVar("T")


class Unsupported(Exception):
    """Not the common shape this codec handles: use the general path."""


# --- varints (Kafka's unsigned varints, as compact lengths and tagged-field headers) --------------

def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes, pos: int = 0) -> None:
        self.buf, self.pos = buf, pos

    def take(self, s: struct.Struct) -> tuple:
        v = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return v

    def uvarint(self) -> int:
        shift = n = 0
        buf = self.buf
        while True:
            b = buf[self.pos]
            self.pos += 1
            n |= (b & 0x7F) << shift
            if b < 0x80:
                return n
            shift += 7
            if shift > 28:
                raise Unsupported("varint too long")

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise Unsupported("field runs past the end")
        v = self.buf[self.pos:self.pos + n]
        self.pos += n
        return v

    def count(self) -> int:
        """A compact array's length (null is not a shape this codec reads)."""
        return self.uvarint() - 1

    def topic(self, names) -> str:
        """A topic id, as the name of a topic this node serves."""
        name = names.by_id.get(self.uuid())
        if name is None:
            raise Unsupported("unknown topic id")
        return name

    def tagged(self) -> Iterator[int]:
        """Each tagged field's tag, with the reader at its data; the caller reads the data,
        and its size is checked against the field's."""
        for _ in range(self.uvarint()):
            tag, size = self.uvarint(), self.uvarint()
            end = self.pos + size
            yield tag
            if self.pos != end:
                raise Unsupported("tagged field size")

    def compact_string(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self.raw(n - 1).decode()

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=bytes(self.raw(16)))

    def no_tags(self) -> None:
        if self.uvarint() != 0:
            raise Unsupported("tagged fields")

    def end(self) -> None:
        if self.pos != len(self.buf):
            raise Unsupported("trailing bytes")


def _compact_string(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    b = s.encode()
    return _uvarint(len(b) + 1) + b


def _tag(tag: int, data: bytes) -> bytes:
    return _uvarint(tag) + _uvarint(len(data)) + data


def _tags(fields: list[bytes]) -> bytes:
    return _uvarint(len(fields)) + b"".join(fields)


def _frame(parts: list[bytes]) -> bytes:
    body = b"".join(parts)
    return _I32.pack(len(body)) + body


# --- FetchRequest ------------------------------------------------------------------------------

def encode_request(r: m.FetchRequest, correlation_id: int, client_id: str,
                   directory_id: uuid.UUID | None) -> bytes:
    """The framed Fetch v17 request, as kafka-python encodes it after `translate`."""
    cid = client_id.encode()
    out = [_REQ_HEAD.pack(w.FETCH, VERSION, correlation_id), _I16.pack(len(cid)), cid, b"\x00",
           _REQ_FIXED.pack(r.max_wait_ms, r.min_bytes, r.max_bytes, 0, 0, -1), _uvarint(len(r.topics) + 1)]
    dir_tag = [] if directory_id is None else [_tag(0, directory_id.bytes)]
    for t in r.topics:
        out.append(w.topic_id(t.topic).bytes)
        out.append(_uvarint(len(t.partitions) + 1))
        for p in t.partitions:
            out.append(_REQ_PART.pack(p.partition, p.current_leader_epoch, p.fetch_offset, p.last_fetched_epoch,
                                      p.log_start_offset, p.partition_max_bytes))
            out.append(_tags(dir_tag))
        out.append(b"\x00")
    out.append(b"\x01")          # no forgotten topics
    out.append(b"\x01")          # rack id ""
    tags = []
    if r.cluster_id is not None:
        tags.append(_tag(0, _compact_string(r.cluster_id)))
    tags.append(_tag(1, _REPLICA_STATE.pack(r.replica_id, r.replica_epoch) + b"\x00"))
    out.append(_tags(tags))
    return _frame(out)


def _bad_bytes_unsupported(decode: Callable[..., T]) -> Callable[..., T]:
    """Bytes cut short or not UTF-8 are not a shape this codec reads either."""
    @functools.wraps(decode)
    def guarded(payload: bytes, names) -> T:
        try:
            return decode(payload, names)
        except (struct.error, IndexError, ValueError) as e:
            raise Unsupported(f"{type(e).__name__}: {e}") from None
    return guarded


@_bad_bytes_unsupported
def decode_request(payload: bytes, names) -> tuple[m.FetchRequest, str | None, uuid.UUID | None]:
    """A Fetch v17 request's payload (after the frame size) as the core's message, the
    client id and the replica's directory id (None when it sent none)."""
    rd = _Reader(payload)
    api_key, version, _ = rd.take(_REQ_HEAD)
    if api_key != w.FETCH or version != VERSION:
        raise Unsupported("not Fetch v17")
    (n,) = rd.take(_I16)
    client_id = None if n < 0 else rd.raw(n).decode()
    rd.no_tags()
    max_wait, min_bytes, max_bytes, _isolation, session_id, session_epoch = rd.take(_REQ_FIXED)
    if session_id != 0 or session_epoch != -1:
        raise Unsupported("fetch session")
    directory = None
    topics = []
    for _ in range(rd.count()):
        name = rd.topic(names)
        parts = []
        for _ in range(rd.count()):
            partition, leader_epoch, offset, last_epoch, log_start, part_max = rd.take(_REQ_PART)
            for tag in rd.tagged():
                if tag != 0:
                    raise Unsupported("partition tagged field")
                directory = rd.uuid()
            parts.append(m.FetchPartition(partition, leader_epoch, offset, last_epoch, log_start, part_max))
        rd.no_tags()
        topics.append(m.FetchTopic(name, tuple(parts)))
    if rd.uvarint() != 1:
        raise Unsupported("forgotten topics")
    rd.compact_string()          # rack id
    cluster_id, replica_id, replica_epoch = None, -1, -1
    for tag in rd.tagged():
        if tag == 0:
            cluster_id = rd.compact_string()
        elif tag == 1:
            replica_id, replica_epoch = rd.take(_REPLICA_STATE)
            rd.no_tags()
        else:
            raise Unsupported("request tagged field")
    rd.end()
    return (m.FetchRequest(cluster_id, replica_id, max_wait, tuple(topics), min_bytes, max_bytes, replica_epoch),
            client_id, directory)


# --- FetchResponse -----------------------------------------------------------------------------

def encode_response(r: m.FetchResponse, correlation_id: int) -> bytes:
    """The framed Fetch v17 response, as kafka-python encodes it after `translate`."""
    out = [_I32.pack(correlation_id), b"\x00", _RESP_FIXED.pack(r.throttle_time_ms, r.error_code, 0),
           _uvarint(len(r.responses) + 1)]
    for t in r.responses:
        out.append(w.topic_id(t.topic).bytes)
        out.append(_uvarint(len(t.partitions) + 1))
        for p in t.partitions:
            out.append(_RESP_PART.pack(p.partition_index, p.error_code, p.high_watermark, p.high_watermark,
                                       p.log_start_offset))
            out.append(b"\x00")        # aborted transactions: null
            out.append(_I32.pack(-1))  # preferred read replica
            records = records_to_batches(p.records) if p.records else b""
            out.append(_uvarint(len(records) + 1))
            out.append(records)
            tags = []
            d = p.diverging_epoch
            if d is not None:
                tags.append(_tag(0, _EPOCH_END.pack(d.epoch, d.end_offset) + b"\x00"))
            cl = p.current_leader
            tags.append(_tag(1, _LEADER.pack(cl.leader_id, cl.leader_epoch) + b"\x00"))
            out.append(_tags(tags))
        out.append(b"\x00")
    out.append(b"\x00")
    return _frame(out)


@_bad_bytes_unsupported
def decode_response(payload: bytes, names) -> m.FetchResponse:
    """A Fetch v17 response's payload (after the frame size) as the core's message."""
    rd = _Reader(payload)
    rd.take(_I32)                # correlation id
    rd.no_tags()
    throttle, error, _session = rd.take(_RESP_FIXED)
    topics = []
    for _ in range(rd.count()):
        name = rd.topic(names)
        parts = []
        for _ in range(rd.count()):
            index, perror, hw, _lso, log_start = rd.take(_RESP_PART)
            if rd.uvarint() != 0:
                raise Unsupported("aborted transactions")
            rd.take(_I32)        # preferred read replica
            n = rd.uvarint()
            if n == 0:
                raise Unsupported("null records")
            data = rd.raw(n - 1)
            records = tuple(batches_to_records(bytes(data))) if data else ()
            diverging, leader, snapshot = None, m.LeaderIdAndEpoch(-1, -1), None
            for tag in rd.tagged():
                if tag == 0:
                    epoch, end_offset = rd.take(_EPOCH_END)
                    rd.no_tags()
                    diverging = None if epoch < 0 else m.EpochEndOffset(epoch, end_offset)
                elif tag == 1:
                    leader = m.LeaderIdAndEpoch(*rd.take(_LEADER))
                    rd.no_tags()
                elif tag == 2:
                    end_offset, epoch = rd.take(_SNAPSHOT_ID)
                    rd.no_tags()
                    snapshot = None if end_offset < 0 else m.EpochEndOffset(epoch, end_offset)
                else:
                    raise Unsupported("partition tagged field")
            parts.append(m.FetchPartitionData(index, perror, hw, leader, diverging, records, log_start, snapshot))
        rd.no_tags()
        topics.append(m.FetchableTopicResponse(name, tuple(parts)))
    rd.no_tags()
    rd.end()
    return m.FetchResponse(error, tuple(topics), throttle)


# --- with the general path behind ----------------------------------------------------------------

@dataclass(frozen=True)
class DecodedRequest:
    """A Fetch v17 request read by this codec: the `body` of a server `Request`."""
    message: m.FetchRequest
    directory_id: uuid.UUID | None


def read_request(payload: bytes, names) -> Request | None:
    """The server's fast path: a `Request` whose body is a `DecodedRequest`, or None when
    the general decoder should read these bytes (another API or version, an unusual shape,
    or malformed bytes, which it rejects with the proper error)."""
    if len(payload) < _REQ_HEAD.size:
        return None
    api_key, version, correlation_id = _REQ_HEAD.unpack_from(payload)
    if api_key != w.FETCH or version != VERSION:
        return None
    try:
        message, client_id, directory = decode_request(payload, names)
    except Unsupported:
        return None
    return Request(w.SUPPORTED[w.FETCH], VERSION, correlation_id, client_id, DecodedRequest(message, directory))


def read_response(payload: bytes, names) -> m.FetchResponse:
    """A Fetch v17 response as the core's message; what this codec does not handle goes
    through kafka-python (WireError when malformed)."""
    try:
        return decode_response(payload, names)
    except Unsupported:
        wire = codec.decode_response(w.SUPPORTED[w.FETCH], VERSION, payload)
        return translate.response_from_wire(w.FETCH, VERSION, wire, names)
