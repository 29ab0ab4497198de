"""The simulated fleet's /metrics endpoints: a minimal HTTP/1.1 server on asyncio streams, one
listener per node, connections kept alive until the client closes them or asks `Connection:
close` (as urllib does on every request). Only GET is answered; what a node says comes from a
callable, and a gate (an asyncio.Event) holds every answer while its node hangs: the connection
is accepted and the request read, and nothing is written until the gate opens again."""
from __future__ import annotations

import asyncio
from typing import Callable

MAX_HEAD_BYTES = 16 * 1024
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # the exposition format's


class MetricsEndpoint:
    """One node's `/metrics` on `host:port`."""

    def __init__(self, host: str, port: int, body: Callable[[], str], gate: asyncio.Event):
        self.host, self.port = host, port
        self.body = body
        self.gate = gate
        self.answered = 0
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port, reuse_address=True,
                                                  limit=MAX_HEAD_BYTES)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._connections.add(task)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                    break
                if not self.gate.is_set():  # a hung node: the request sits unanswered
                    await self.gate.wait()
                keep_alive = self._answer(head, writer)
                await writer.drain()
                if not keep_alive:
                    break
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._connections.discard(task)
            writer.close()

    def _answer(self, head: bytes, writer: asyncio.StreamWriter) -> bool:
        """Writes the answer to one request; whether the connection stays open."""
        lines = head.decode("latin-1").split("\r\n")
        method, _, rest = lines[0].partition(" ")
        path, _, version = rest.partition(" ")
        headers = {k.strip().lower(): v.strip().lower() for k, _, v in (h.partition(":") for h in lines[1:] if h)}
        keep_alive = headers.get("connection") != "close" and version == "HTTP/1.1"
        if method != "GET":
            status, payload = "405 Method Not Allowed", b""
        elif path.split("?", 1)[0] != "/metrics":
            status, payload = "404 Not Found", b""
        else:
            status, payload = "200 OK", self.body().encode()
            self.answered += 1
        closing = "" if keep_alive else "Connection: close\r\n"
        writer.write(f"HTTP/1.1 {status}\r\nContent-Type: {CONTENT_TYPE}\r\nContent-Length: {len(payload)}\r\n"
                     f"{closing}\r\n".encode() + payload)
        return keep_alive
