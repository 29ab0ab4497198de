"""Frames and headers: turning bytes on a socket into requests and responses and back.

A frame is a 4-byte big-endian size followed by that many bytes. A request starts with
its header (api key, api version, correlation id, client id; plus tagged fields when the
version is flexible); a response starts with the correlation id (plus tagged fields when
flexible, except ApiVersions whose response header is never flexible so that any client
can read the error). Everything that can go wrong with untrusted bytes raises
`WireError`, with `correlation_id` set when it was readable, so the server can answer or
close the connection but never crash.
"""
from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass
from typing import Any

from kafka.protocol.api_header import RequestHeader

from quorum.wire.apis import API_VERSIONS, SUPPORTED, Api

DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes
_SIZE = struct.Struct(">i")
_HEAD = struct.Struct(">hhi")  # api key, api version, correlation id
UNSUPPORTED_VERSION = 35


class WireError(Exception):
    """Bytes that are not a request this node can serve."""

    def __init__(self, reason: str, api_key: int | None = None, api_version: int | None = None,
                 correlation_id: int | None = None):
        super().__init__(reason)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


class FrameTooLarge(WireError):
    pass


@dataclass
class Request:
    api: Api
    version: int
    correlation_id: int
    client_id: str | None
    body: Any


async def read_frame(reader: asyncio.StreamReader, max_bytes: int) -> bytes | None:
    """The next frame's payload; None at a clean end of stream. The size is checked before
    anything is buffered, so a hostile size cannot make us allocate."""
    try:
        head = await reader.readexactly(4)
    except asyncio.IncompleteReadError as e:
        if not e.partial:
            return None
        raise WireError("connection closed inside a frame size") from None
    (size,) = _SIZE.unpack(head)
    if size < 0 or size > max_bytes:
        raise FrameTooLarge(f"frame of {size} bytes is outside 0..{max_bytes}")
    try:
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError:
        raise WireError(f"connection closed inside a {size}-byte frame") from None


def frame(payload: bytes | bytearray) -> bytes:
    return _SIZE.pack(len(payload)) + bytes(payload)


def peek_header(payload: bytes) -> tuple[int, int, int]:
    if len(payload) < _HEAD.size:
        raise WireError(f"request of {len(payload)} bytes is too short for a header")
    return _HEAD.unpack_from(payload)


def decode_request(payload: bytes) -> Request:
    api_key, version, correlation_id = peek_header(payload)
    api = SUPPORTED.get(api_key)
    if api is None:
        raise WireError(f"unknown api key {api_key}", api_key, version, correlation_id)
    if not api.min_version <= version <= api.max_version:
        raise WireError(f"{api.name} v{version} is not supported (v{api.min_version}-{api.max_version})",
                        api_key, version, correlation_id)
    try:
        body = api.request.decode(payload, version=version, header=True)
    except Exception as e:  # untrusted bytes: any decoding failure is the sender's fault
        raise WireError(f"malformed {api.name} v{version} request: {type(e).__name__}: {e}",
                        api_key, version, correlation_id) from None
    return Request(api, version, correlation_id, body.header.client_id, body)


def encode_response(request: Request, body: Any) -> bytes:
    """The framed response to `request`, in the version it was asked in."""
    body.API_VERSION = request.version  # before the header: a response header has no version
    body.with_header(correlation_id=request.correlation_id)
    return bytes(body.encode(header=True, framed=True))


def api_versions_unsupported(correlation_id: int) -> bytes:
    """ApiVersions in a version we do not know: answer v0 with UNSUPPORTED_VERSION and our
    ranges, as Kafka does, so the client can retry in a version we speak."""
    api = SUPPORTED[API_VERSIONS]
    body = api.response(error_code=UNSUPPORTED_VERSION, api_keys=supported_api_keys(api.response))
    body.API_VERSION = 0
    body.with_header(correlation_id=correlation_id)
    return bytes(body.encode(header=True, framed=True))


def supported_api_keys(response_cls: type) -> list:
    return [response_cls.ApiVersion(api_key=a.key, min_version=a.min_version, max_version=a.max_version)
            for a in SUPPORTED.values()]


def encode_request(body: Any, version: int, correlation_id: int, client_id: str) -> bytes:
    body.API_VERSION = version
    body.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(body.encode(version=version, header=True, framed=True))


def response_correlation_id(payload: bytes) -> int:
    if len(payload) < 4:
        raise WireError("response too short for a correlation id")
    return _SIZE.unpack_from(payload)[0]


def decode_response(api: Api, version: int, payload: bytes) -> Any:
    try:
        return api.response.decode(payload, version=version, header=True)
    except Exception as e:
        raise WireError(f"malformed {api.name} v{version} response: {type(e).__name__}: {e}") from None


__all__ = ["WireError", "FrameTooLarge", "Request", "read_frame", "frame", "decode_request",
           "encode_response", "encode_request", "decode_response", "response_correlation_id",
           "api_versions_unsupported", "supported_api_keys", "DEFAULT_MAX_FRAME_BYTES", "RequestHeader"]
