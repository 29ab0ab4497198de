"""The node's listener: Kafka's wire protocol over TCP.

Each connection reads frames (size checked before buffering), decodes the header and body,
and hands the request to the node; responses go back in request order, as Kafka clients
expect, while the requests themselves are served concurrently (a long-polled Fetch does
not hold up what follows it). At most `MAX_INFLIGHT_PER_CONNECTION` requests are open per
connection: beyond that the server stops reading, so a client cannot make it buffer
without bound. Bytes that are not a request it serves close the connection (as Kafka
does), except ApiVersions in an unknown version, which gets the UNSUPPORTED_VERSION answer
clients rely on to negotiate.
"""
from __future__ import annotations

import asyncio
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

# The node's request handler: the framed response bytes, or None for no response.
Handler = Callable[[Request, "int | None"], Awaitable["bytes | None"]]


def peer_of(client_id: str | None) -> int | None:
    """The node id of a peer connection (peers identify as quorum-node-N), else None."""
    m = _PEER_CLIENT_ID.match(client_id or "")
    return int(m.group(1)) if m else None


class Server:
    def __init__(self, host: str, port: int, handler: Handler, faults: Faults, max_frame_bytes: int):
        self.host, self.port = host, port
        self.handler = handler
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
        pending: asyncio.Queue[asyncio.Future | None] = asyncio.Queue()
        slots = asyncio.Semaphore(MAX_INFLIGHT_PER_CONNECTION)
        sender = asyncio.create_task(self._send_in_order(pending, writer, slots))
        addr = writer.get_extra_info("peername")
        try:
            while True:
                payload = await read_frame(reader, self.max_frame_bytes)
                if payload is None:
                    break
                try:
                    request = decode_request(payload)
                except WireError as e:
                    if e.api_key == API_VERSIONS and e.correlation_id is not None and "not supported" in str(e):
                        fut = asyncio.get_running_loop().create_future()
                        fut.set_result(api_versions_unsupported(e.correlation_id))
                        await slots.acquire()
                        await pending.put(fut)
                        continue
                    raise
                peer = peer_of(request.client_id)
                if self.faults.drops_inbound(peer):
                    continue  # as if the packet never arrived
                await slots.acquire()
                await pending.put(asyncio.ensure_future(self.handler(request, peer)))
        except WireError as e:
            self.rejected += 1
            log.warning("closing connection from %s: %s", addr, e)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        finally:
            await pending.put(None)
            try:
                await asyncio.wait_for(sender, 5)
            except (asyncio.TimeoutError, asyncio.CancelledError, Exception):
                sender.cancel()
            writer.close()
            self._connections.discard(task)

    async def _send_in_order(self, pending: asyncio.Queue, writer: asyncio.StreamWriter,
                             slots: asyncio.Semaphore) -> None:
        while True:
            fut = await pending.get()
            if fut is None:
                return
            try:
                data = await fut
            except Exception as e:  # a handler bug must not take the node down: drop the connection
                log.exception("request handler failed: %s", e)
                writer.close()
                return
            finally:
                slots.release()
            if data is not None and not writer.is_closing():
                writer.write(data)
                await writer.drain()
