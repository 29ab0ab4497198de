"""GET of one metrics endpoint over a kept-alive HTTP/1.1 connection: a collector scraping every
node of many clusters every second opens each connection (and shakes each TLS hand) once, as
Prometheus' scrape loops do, not once per scrape.

The answer is read by a protocol object (asyncio.Protocol) that settles a future when the body
is complete: a scrape on an open connection is one write and a callback, with no task, stream
reader or timer of its own (at 500 clusters of 3 nodes those were a tenth of the collector's
CPU). The caller bounds the wait: `get()` with a timeout of its own, or a fleet's rounds, which
give up on a scrape after its timeout (node_scrapes).

The request carries the client config's `Authorization` (basic auth, sent with every request as
Prometheus does) and its TLS context, checking the certificate against `server_name` when the
config names one. An answer of 400 or more fails with HTTPError (`HTTP Error 401:
Unauthorized`, as urllib says it); a refused connection with ConnectionRefusedError; a TLS
failure with ssl's own error, naming the certificate problem. After any failure, a GET given up
on, or an answer that closes the connection, the next GET connects again."""
from __future__ import annotations

import asyncio
import ssl
import time
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
        self._answers: _Answers | None = None

    def begin(self) -> asyncio.Future:
        """Start one GET: a future of (body, the time it was read in ms). Cancelling it, or
        calling close(), gives the GET up (and the connection, which a late answer would mix up
        with the next)."""
        answers = self._answers
        if answers is not None and answers.ready:
            return answers.ask(self._request)
        return asyncio.ensure_future(self._connect_then_ask())  # a connection to open: the rare path

    async def get(self, timeout_s: float) -> str:
        """The body of one GET, within `timeout_s` (connecting included)."""
        answer = self.begin()
        try:
            async with asyncio.timeout(timeout_s):
                return (await answer)[0]
        except BaseException:
            answer.cancel()
            self.close()
            raise

    async def _connect_then_ask(self) -> tuple[str, int]:
        self.close()
        loop = asyncio.get_running_loop()
        try:
            _, answers = await loop.create_connection(
                _Answers, self.host, self.port, ssl=self._context,
                server_hostname=self._server_name if self.tls else None)
            self._answers = answers
            return await answers.ask(self._request)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._answers is not None:
            self._answers.close()
            self._answers = None


class _Answers(asyncio.Protocol):
    """Reads the answers of one connection, one request at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.open = False
        self._waiting: asyncio.Future | None = None
        self._buf = bytearray()
        self._head: tuple[str, int, str, dict[str, str]] | None = None  # version, status, reason, headers
        self._chunks: list[bytes] | None = None   # a chunked body's chunks so far
        self._chunked_bytes = 0

    # --- the caller's side ----------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """Open, and no answer owed: a GET given up on may still be answered here."""
        return self.open and self._waiting is None and not self._buf

    def ask(self, request: bytes) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        if not self.ready:
            fut.set_exception(RuntimeError("the connection is not ready for a GET"))
            return fut
        self._waiting, self._head, self._chunks, self._chunked_bytes = fut, None, None, 0
        self.transport.write(request)
        return fut

    def close(self) -> None:
        self.open = False
        if self.transport is not None:
            self.transport.close()
        self._fail(ConnectionResetError("the GET was given up"))

    # --- asyncio's side -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.open = True

    def data_received(self, data: bytes) -> None:
        if self._waiting is None or self._waiting.done():
            self.close()  # bytes nobody asked for, or the rest of an answer given up on
            return
        self._buf += data
        try:
            self._read()
        except (ValueError, OSError) as e:
            self.close_with(e)

    def eof_received(self) -> bool:
        if self._head is not None and self._framing() == "close" and self._waiting is not None:
            self._answered(bytes(self._buf), keep=False)  # a body that lasts until the server closes
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.open = False
        if exc is not None:
            self._fail(exc)
        elif self._head is None and not self._buf:
            self._fail(ConnectionResetError("the endpoint closed the connection"))
        else:
            self._fail(ConnectionResetError("the endpoint closed the connection in the middle of an answer"))

    # --- reading --------------------------------------------------------------------------------

    def _read(self) -> None:
        if self._head is None:
            end = self._buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buf) > MAX_HEAD_BYTES:
                    raise ValueError("the answer's head is too large")
                return
            self._head = _head(bytes(self._buf[:end]).decode("latin-1"))
            del self._buf[:end + 4]
        framing = self._framing()
        if framing == "chunked":
            self._read_chunks()
        elif framing == "close":
            if len(self._buf) > MAX_BODY_BYTES:
                raise ValueError("the answer is too large")
        else:
            length = int(framing)
            if length > MAX_BODY_BYTES:
                raise ValueError("the answer is too large")
            if len(self._buf) >= length:
                body = bytes(self._buf[:length])
                del self._buf[:length]
                self._answered(body, keep=True)

    def _framing(self) -> str:
        """"chunked", the Content-Length, or "close" (the body lasts until the server closes)."""
        headers = self._head[3]
        if "chunked" in headers.get("transfer-encoding", "").lower():
            return "chunked"
        return headers.get("content-length", "close")

    def _read_chunks(self) -> None:
        if self._chunks is None:
            self._chunks = []
        buf = self._buf
        while True:
            line_end = buf.find(b"\r\n")
            if line_end < 0:
                return
            size = int(bytes(buf[:line_end]).split(b";")[0].strip() or b"0", 16)
            if size == 0:  # the last chunk; then trailers, if any, and an empty line
                after = line_end + 2
                if len(buf) < after + 2:
                    return
                end = after + 2 if buf[after:after + 2] == b"\r\n" else buf.find(b"\r\n\r\n", after) + 4
                if end < 4:
                    return
                del buf[:end]
                self._answered(b"".join(self._chunks), keep=True)
                return
            if len(buf) < line_end + 2 + size + 2:
                return
            self._chunked_bytes += size
            if self._chunked_bytes > MAX_BODY_BYTES:
                raise ValueError("the answer is too large")
            self._chunks.append(bytes(buf[line_end + 2:line_end + 2 + size]))
            del buf[:line_end + 2 + size + 2]

    def _answered(self, body: bytes, keep: bool) -> None:
        version, status, reason, headers = self._head
        connection = headers.get("connection", "").lower()
        if not keep or connection == "close" or version == "HTTP/1.0" and connection != "keep-alive":
            self.open = False
            self.transport.close()
        if self._buf and self.open:  # more than the answer: nothing here would tell it from the next one
            self.open = False
            self.transport.close()
        self._buf.clear()
        fut, self._waiting, self._head = self._waiting, None, None
        if fut.done():
            return
        if status >= 400 or status == 0:
            fut.set_exception(HTTPError(status, reason or "bad answer"))
        else:
            fut.set_result((body.decode(), int(time.time() * 1000)))

    def close_with(self, error: BaseException) -> None:
        self.open = False
        if self.transport is not None:
            self.transport.close()
        self._fail(error)

    def _fail(self, error: BaseException) -> None:
        fut, self._waiting = self._waiting, None
        if fut is not None and not fut.done():
            fut.set_exception(error)


def _head(text: str) -> tuple[str, int, str, dict[str, str]]:
    status_line, *lines = text.split("\r\n")
    version, _, rest = status_line.strip().partition(" ")
    code, _, reason = rest.partition(" ")
    headers: dict[str, str] = {}
    for line in lines:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    return version, int(code) if code.isdigit() else 0, reason, headers


def scrape(url: str, timeout_s: float, client: HttpClientConfig = NO_CLIENT_CONFIG) -> str:
    """One GET on a connection of its own, from plain code (a check, a tool): the body."""
    async def once() -> str:
        conn = MetricsConnection(url, client)
        try:
            return await conn.get(timeout_s)
        finally:
            conn.close()
    return asyncio.run(once())
