"""The node's listener: Kafka's wire protocol over TCP.

Each connection reads frames (size checked before buffering), decodes the header and body,
and hands the request to the node with a `Reply` to complete. Requests are served
concurrently (a long-polled Fetch does not hold up what follows it) and responses go back
in request order, as Kafka clients expect: a reply whose turn has come is written to the
socket at once, by whoever completes it, with no task hand-over in between (the node's
loop answers its peers from inside its turn). At most `MAX_INFLIGHT_PER_CONNECTION`
requests are open per connection: beyond that the server stops reading, so a client
cannot make it buffer without bound. Bytes that are not a request it serves close the
connection (as Kafka does), except ApiVersions in an unknown version, which gets the
UNSUPPORTED_VERSION answer clients rely on to negotiate.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import re
from typing import Awaitable, Callable

from quorum.node.faults import Faults
from quorum.wire.apis import API_VERSIONS
from quorum.wire.codec import Request, WireError, api_versions_unsupported, decode_request, read_frame

log = logging.getLogger(__name__)

MAX_INFLIGHT_PER_CONNECTION = 32
MAX_CONNECTIONS = 1024  # beyond this, new connections are closed at once
_PEER_CLIENT_ID = re.compile(r"^quorum-node-(\d+)$")


class Reply:
    """One request's place in its connection's response order. Complete it exactly once:
    `send(bytes)`, `send(None)` for no response, or `fail(exc)` (a handler bug: the
    connection is dropped, the node goes on)."""
    __slots__ = ("_responses", "data", "done")

    def __init__(self, responses: "_Responses") -> None:
        self._responses = responses
        self.data: bytes | None = None
        self.done = False

    def send(self, data: bytes | None) -> None:
        if not self.done:
            self.data, self.done = data, True
            self._responses.flush()

    def fail(self, error: BaseException) -> None:
        if not self.done:
            log.error("request handler failed: %r", error, exc_info=error)
            self.done = True
            self._responses.abort()

    def send_when_done(self, awaitable: Awaitable[bytes | None]) -> None:
        """Complete with the result of a coroutine (run as a task) or future."""
        fut = asyncio.ensure_future(awaitable)
        _RUNNING.add(fut)   # the loop holds tasks weakly: keep it until it is done
        fut.add_done_callback(_RUNNING.discard)
        fut.add_done_callback(self._from_future)

    def _from_future(self, fut: asyncio.Future) -> None:
        if fut.cancelled():
            self.send(None)
        elif fut.exception() is not None:
            self.fail(fut.exception())
        else:
            self.send(fut.result())


_RUNNING: set[asyncio.Future] = set()

# The node's request handler: completes the Reply now or later.
Handler = Callable[[Request, "int | None", Reply], None]


class _Responses:
    """A connection's replies in request order; the completed ones at the head are written."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.queue: collections.deque[Reply] = collections.deque()
        self.room = asyncio.Semaphore(MAX_INFLIGHT_PER_CONNECTION)
        self._emptied: asyncio.Future | None = None

    def open(self) -> Reply:
        reply = Reply(self)
        self.queue.append(reply)
        return reply

    def flush(self) -> None:
        q, writer = self.queue, self.writer
        while q and q[0].done:
            data = q.popleft().data
            self.room.release()
            if data is not None and not writer.is_closing():
                writer.write(data)
        if not q and self._emptied is not None and not self._emptied.done():
            self._emptied.set_result(None)

    def abort(self) -> None:
        self.queue.clear()
        self.writer.close()
        if self._emptied is not None and not self._emptied.done():
            self._emptied.set_result(None)

    async def settle(self, timeout_s: float) -> None:
        """Wait (bounded) for the open replies to go out: a client that sent its requests and
        half-closed its side still gets its answers."""
        if self.queue and not self.writer.is_closing():
            self._emptied = asyncio.get_running_loop().create_future()
            try:
                await asyncio.wait_for(self._emptied, timeout_s)
            except asyncio.TimeoutError:
                pass


def peer_of(client_id: str | None) -> int | None:
    """The node id of a peer connection (peers identify as quorum-node-N), else None."""
    m = _PEER_CLIENT_ID.match(client_id or "")
    return int(m.group(1)) if m else None


class Server:
    def __init__(self, host: str, port: int, handler: Handler, faults: Faults, max_frame_bytes: int,
                 read_fast: Callable[[bytes], Request | None] | None = None):
        self.host, self.port = host, port
        self.handler = handler
        self.read_fast = read_fast   # a lean decoder for the hot requests; None: use the general one
        self.faults = faults
        self.max_frame_bytes = max_frame_bytes
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task] = set()
        self.rejected = 0   # connections closed for bad input (tests read it)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port, reuse_address=True)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        tasks = list(self._connections)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=3)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._connections) >= MAX_CONNECTIONS:
            self.rejected += 1
            writer.close()
            return
        task = asyncio.current_task()
        self._connections.add(task)
        responses = _Responses(writer)
        addr = writer.get_extra_info("peername")
        try:
            while not writer.is_closing():
                payload = await read_frame(reader, self.max_frame_bytes)
                if payload is None:
                    await responses.settle(5)
                    break
                try:
                    request = (self.read_fast and self.read_fast(payload)) or decode_request(payload)
                except WireError as e:
                    if e.api_key == API_VERSIONS and e.correlation_id is not None and "not supported" in str(e):
                        await responses.room.acquire()
                        responses.open().send(api_versions_unsupported(e.correlation_id))
                        continue
                    raise
                peer = peer_of(request.client_id)
                if self.faults.drops_inbound(peer):
                    continue  # as if the packet never arrived
                await responses.room.acquire()
                reply = responses.open()
                try:
                    self.handler(request, peer, reply)
                except Exception as e:
                    reply.fail(e)
                await writer.drain()   # a client that does not read its answers is not read either
        except WireError as e:
            self.rejected += 1
            log.warning("closing connection from %s: %s", addr, e)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        finally:
            writer.close()
            self._connections.discard(task)
