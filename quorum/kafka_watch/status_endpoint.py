"""The collector's status endpoint (`--status-port`): GET /metrics answers the fleet's state in
Prometheus' text format, served on the collector's own event loop (no thread of its own)."""
from __future__ import annotations

import asyncio
from typing import Callable

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


async def serve_status(host: str, port: int, render: Callable[[], str]) -> asyncio.base_events.Server:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            path = request.split(b" ", 2)[1] if request.count(b" ") >= 2 else b""
            if path.split(b"?")[0] in (b"/metrics", b"/"):
                status, body = "200 OK", render().encode()
            else:
                status, body = "404 Not Found", b"not found: GET /metrics\n"
            writer.write(f"HTTP/1.1 {status}\r\nContent-Type: {CONTENT_TYPE}\r\nContent-Length: {len(body)}\r\n"
                         f"Connection: close\r\n\r\n".encode() + body)
            await writer.drain()
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()
    return await asyncio.start_server(answer, host, port)
