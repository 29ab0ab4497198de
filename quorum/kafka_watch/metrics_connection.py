"""GET of one metrics endpoint over a kept-alive HTTP/1.1 connection, on asyncio streams: a
collector scraping every node of many clusters every second opens each connection (and shakes
each TLS hand) once, as Prometheus' scrape loops do, not once per scrape.

The request carries the client config's `Authorization` (basic auth, sent with every request as
Prometheus does) and its TLS context, checking the certificate against `server_name` when the
config names one. An answer of 400 or more raises HTTPError (`HTTP Error 401:
Unauthorized`, as urllib says it); a refused connection raises ConnectionRefusedError; a TLS
failure ssl's own error, naming the certificate problem. After any failure, or an answer that
closes the connection, the next GET connects again."""
from __future__ import annotations

import asyncio
import ssl
import urllib.parse

from quorum.http_client_config import NO_CLIENT_CONFIG, HttpClientConfig

MAX_HEAD_BYTES = 64 * 1024
MAX_BODY_BYTES = 64 * 1024 * 1024


class HTTPError(OSError):
    """The endpoint answered with an error status (named as urllib's, so the node's error reads
    the same: `HTTPError: HTTP Error 401: Unauthorized`)."""

    def __init__(self, status: int, reason: str):
        super().__init__(f"HTTP Error {status}: {reason}")
        self.status = status


class MetricsConnection:
    """One endpoint's connection; GETs are made one at a time, on the caller's event loop."""

    def __init__(self, url: str, client: HttpClientConfig = NO_CLIENT_CONFIG):
        parts = urllib.parse.urlsplit(url)
        self.url = url
        self.host = parts.hostname or "localhost"
        self.tls = parts.scheme == "https"
        self.port = parts.port or (443 if self.tls else 80)
        self.target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        authorization = client.authorization()
        self._context = (client.tls or ssl.create_default_context()) if self.tls else None
        self._server_name = getattr(client.tls, "server_name", None) or self.host
        host_header = f"[{self.host}]" if ":" in self.host else self.host
        self._request = (f"GET {self.target} HTTP/1.1\r\nHost: {host_header}:{self.port}\r\n"
                         "Accept: text/plain\r\nAccept-Encoding: identity\r\nConnection: keep-alive\r\n"
                         + (f"Authorization: {authorization}\r\n" if authorization else "") + "\r\n").encode()
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def get(self, timeout_s: float) -> str:
        """The body of one GET, within `timeout_s` (connecting included)."""
        try:
            async with asyncio.timeout(timeout_s):
                return await self._get()
        except BaseException:
            self.close()  # a half-read answer would be read as the next one's
            raise

    async def _get(self) -> str:
        if self._streams is None or self._streams[1].is_closing():
            self._streams = await asyncio.open_connection(
                self.host, self.port, ssl=self._context, server_hostname=self._server_name if self.tls else None,
                limit=MAX_HEAD_BYTES)
        reader, writer = self._streams
        writer.write(self._request)
        try:
            head = await reader.readuntil(b"\r\n\r\n")  # the status line and the headers, read at once
        except asyncio.IncompleteReadError as e:
            if not e.partial:
                raise ConnectionResetError("the endpoint closed the connection") from None
            raise
        status_line, *lines = head.decode("latin-1").split("\r\n")
        version, _, rest = status_line.strip().partition(" ")
        code, _, reason = rest.partition(" ")
        headers: dict[str, str] = {}
        for line in lines:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        body = await _body(reader, headers)
        delimited = "content-length" in headers or "chunked" in headers.get("transfer-encoding", "").lower()
        keep = headers.get("connection", "").lower()
        if not delimited or keep == "close" or version == "HTTP/1.0" and keep != "keep-alive":
            self.close()
        status = int(code) if code.isdigit() else 0
        if status >= 400 or status == 0:
            raise HTTPError(status, reason or "bad answer")
        return body.decode()

    def close(self) -> None:
        if self._streams is not None:
            self._streams[1].close()
            self._streams = None


async def _body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        chunks = []
        size_total = 0
        while True:
            size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(chunks)
            size_total += size
            if size_total > MAX_BODY_BYTES:
                raise ValueError("the answer is too large")
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)
    length = headers.get("content-length")
    if length is not None:
        if int(length) > MAX_BODY_BYTES:
            raise ValueError("the answer is too large")
        return await reader.readexactly(int(length))
    return await reader.read(MAX_BODY_BYTES)  # until the server closes


def scrape(url: str, timeout_s: float, client: HttpClientConfig = NO_CLIENT_CONFIG) -> str:
    """One GET on a connection of its own, from plain code (a check, a tool): the body."""
    async def once() -> str:
        conn = MetricsConnection(url, client)
        try:
            return await conn.get(timeout_s)
        finally:
            conn.close()
    return asyncio.run(once())
