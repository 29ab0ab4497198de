"""Untrusted bytes never crash the codec: every failure is a WireError (which the server
turns into an error response or a closed connection), and sizes are checked before any
allocation."""
from __future__ import annotations

import asyncio
import os
import random
import struct

import pytest

from quorum.wire import apis as w
from quorum.wire.codec import (FrameTooLarge, WireError, api_versions_unsupported, decode_request, read_frame)


def feed(data: bytes) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    return reader


def test_frame_above_the_limit_is_refused_before_reading_it():
    async def go():
        with pytest.raises(FrameTooLarge):
            await read_frame(feed(struct.pack(">i", 1 << 30)), max_bytes=1 << 20)
        with pytest.raises(FrameTooLarge):
            await read_frame(feed(struct.pack(">i", -5)), max_bytes=1 << 20)
        assert await read_frame(feed(b""), max_bytes=10) is None
        with pytest.raises(WireError):
            await read_frame(feed(struct.pack(">i", 10) + b"abc"), max_bytes=100)
    asyncio.run(go())


def test_unknown_api_key_and_version_are_wire_errors_with_the_correlation_id():
    with pytest.raises(WireError) as e:
        decode_request(struct.pack(">hhi", 999, 0, 77) + b"\x00\x00")
    assert e.value.correlation_id == 77 and e.value.api_key == 999
    with pytest.raises(WireError, match="not supported"):
        decode_request(struct.pack(">hhi", w.FETCH, 3, 5))        # Fetch before v12 has no KRaft fields
    with pytest.raises(WireError, match="not supported"):
        decode_request(struct.pack(">hhi", w.VOTE, 9, 5))


def test_api_versions_in_an_unknown_version_gets_v0_error_with_our_ranges():
    raw = api_versions_unsupported(12)
    resp = w.ApiVersionsResponse.decode(raw[4:], version=0, header=True)
    assert resp.header.correlation_id == 12 and resp.error_code == 35
    assert {k.api_key for k in resp.api_keys} == set(w.SUPPORTED)


SEED_VARIABLE = "QUORUM_HOSTILE_SEED"  # replays a run: the seed it printed


@pytest.mark.parametrize("api_key", sorted(w.SUPPORTED))
def test_random_garbage_after_a_valid_header_is_a_wire_error(api_key):
    seed = int(os.environ.get(SEED_VARIABLE) or random.randrange(1 << 30))
    print(f"seed {seed} (replay: {SEED_VARIABLE}={seed})")
    rng = random.Random(seed)
    api = w.SUPPORTED[api_key]
    for _ in range(300):
        version = rng.randint(api.min_version, api.max_version)
        body = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 80)))
        payload = struct.pack(">hhi", api_key, version, 1) + body
        try:
            decode_request(payload)
        except WireError:
            pass


def test_truncated_valid_requests_are_wire_errors():
    from quorum.raft import messages as m
    from quorum.wire import translate as t
    from quorum.wire.codec import encode_request
    req = m.FetchRequest("c", 3, 500, (m.FetchTopic("__cluster_metadata", (m.FetchPartition(0, 4, 17, 3),)),))
    _, version, wire = t.request_to_wire(req)
    raw = encode_request(wire, version, 1, "x")[4:]
    decode_request(raw)  # whole, it decodes
    for cut in range(len(raw)):
        with pytest.raises(WireError):
            decode_request(raw[:cut])
