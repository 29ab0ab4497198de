"""The project's own Kafka-protocol client: one asyncio connection to one Kafka node (a peer).

The quorum node talks to the other voters on it (quorum.node.peer_clients), the watcher to Kafka's
controllers (quorum.kafka_watch.quorum_links), and the launchers ask one node DescribeQuorum on
it (direct_describe). The node keeps one per (peer, lane): Fetch gets its own lane because the
leader holds a fetch up to its long-poll time and responses on one connection come back in order,
so a Vote or DescribeQuorum must not queue behind it. A connection is opened on first use,
re-opened after any failure, and every request has a deadline; a request that cannot be
answered gets PeerUnavailable and the caller moves on. `send` hands the answer to a
callback straight from the connection's reader (no task per request: the Raft loop's
fetches go this way); `request` is the awaitable form. `opener` opens the connection to a
secured listener (quorum.kafka_client.wire_login: TLS, then the SASL login); without one it is
PLAINTEXT, as between the project's nodes.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any, Awaitable, Callable

from quorum.wire.apis import SUPPORTED
from quorum.wire.codec import WireError, decode_response, encode_request, read_frame, response_correlation_id

log = logging.getLogger(__name__)


class PeerUnavailable(ConnectionError):
    pass


# What a request's sender is told, exactly once: the decoded response, or the exception.
Callback = Callable[[Any, "BaseException | None"], None]
# host, port, timeout -> an open (and logged in) connection
Opener = Callable[[str, int, float], Awaitable["tuple[asyncio.StreamReader, asyncio.StreamWriter]"]]


class Codec:
    """How one request becomes bytes and its answer a response: kafka-python's classes by
    default; the node gives Fetch a leaner one."""

    def __init__(self, api_key: int, version: int, body: Any) -> None:
        self.api_key, self.version, self.body = api_key, version, body

    def encode(self, correlation_id: int, client_id: str) -> bytes:
        return encode_request(self.body, self.version, correlation_id, client_id)

    def decode(self, payload: bytes) -> Any:
        return decode_response(SUPPORTED[self.api_key], self.version, payload)


class PeerConnection:
    def __init__(self, peer_id: int, host: str, port: int, client_id: str, max_frame_bytes: int,
                 opener: Opener | None = None):
        self.peer_id = peer_id
        self._opener = opener
        self.host, self.port = host, port
        self.client_id = client_id
        self.max_frame_bytes = max_frame_bytes
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task | None = None
        # correlation id -> (codec, callback, deadline timer)
        self._inflight: dict[int, tuple[Codec, Callback, asyncio.TimerHandle]] = {}
        self._correlation = itertools.count(1)
        self._connect_lock = asyncio.Lock()

    async def _ensure_connected(self, timeout_s: float) -> asyncio.StreamWriter:
        async with self._connect_lock:
            if self._writer is not None and not self._writer.is_closing():
                return self._writer
            if self._opener is None:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port), timeout_s)
            else:
                reader, writer = await self._opener(self.host, self.port, timeout_s)
            self._writer = writer
            self._reader_task = asyncio.create_task(self._read_loop(reader, writer))
            return writer

    def send(self, codec: Codec, timeout_s: float, callback: Callback) -> None:
        """Send a request; `callback` gets its answer, or PeerUnavailable, exactly once. On an
        open connection this writes at once and the answer is handed over from the reader,
        with no task in between (the Raft loop's fetches take this path)."""
        writer = self._writer
        if writer is not None and not writer.is_closing():
            self._write(writer, codec, timeout_s, callback)
            return

        async def connect_then_write() -> None:
            try:
                w = await self._ensure_connected(timeout_s)
            except Exception as e:  # noqa: BLE001 - a refused login too: the sender is told why
                failure = PeerUnavailable(f"cannot connect to node {self.peer_id} at {self.host}:{self.port}: {e}")
                failure.__cause__ = e
                callback(None, failure)
                return
            self._write(w, codec, timeout_s, callback)

        task = asyncio.ensure_future(connect_then_write())
        _CONNECTING.add(task)
        task.add_done_callback(_CONNECTING.discard)

    def _write(self, writer: asyncio.StreamWriter, codec: Codec, timeout_s: float, callback: Callback) -> None:
        cid = next(self._correlation)
        timer = asyncio.get_running_loop().call_later(timeout_s, self._expire, cid, timeout_s)
        self._inflight[cid] = (codec, callback, timer)
        try:
            writer.write(codec.encode(cid, self.client_id))
        except (OSError, ConnectionError) as e:
            self._finish(cid, None, PeerUnavailable(f"node {self.peer_id}: {e}"))
            self.close()

    def _expire(self, cid: int, timeout_s: float) -> None:
        self._finish(cid, None, PeerUnavailable(f"node {self.peer_id}: no answer within {timeout_s:.1f}s"))

    def _finish(self, cid: int, response: Any, error: BaseException | None) -> None:
        entry = self._inflight.pop(cid, None)
        if entry is None:
            return   # answered or expired already
        entry[2].cancel()
        entry[1](response, error)

    async def request(self, api_key: int, version: int, body: Any, timeout_s: float) -> Any:
        fut = asyncio.get_running_loop().create_future()
        self.send(Codec(api_key, version, body), timeout_s, settle(fut))
        return await fut

    async def _read_loop(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        error: Exception = ConnectionResetError("connection closed")
        try:
            while True:
                payload = await read_frame(reader, self.max_frame_bytes)
                if payload is None:
                    break
                cid = response_correlation_id(payload)
                entry = self._inflight.get(cid)
                if entry is None:
                    continue  # the caller gave up on it
                try:
                    response, failure = entry[0].decode(payload), None
                except Exception as e:   # malformed or corrupt: that request fails, the link stays
                    response, failure = None, e
                self._finish(cid, response, failure)
        except (OSError, WireError, asyncio.IncompleteReadError) as e:
            error = e
        except asyncio.CancelledError:
            pass
        finally:
            if self._writer is writer:
                self._writer = None
            writer.close()
            for cid in list(self._inflight):
                self._finish(cid, None, PeerUnavailable(f"node {self.peer_id}: {error}"))

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._reader_task is not None:
            self._reader_task.cancel()


_CONNECTING: set[asyncio.Task] = set()   # keeps connect-then-write tasks referenced until done


def settle(fut: asyncio.Future) -> Callback:
    """A (result, error) callback that completes `fut` with the result or the error."""
    def done(response: Any, error: BaseException | None) -> None:
        if not fut.done():
            fut.set_exception(error) if error is not None else fut.set_result(response)
    return done
