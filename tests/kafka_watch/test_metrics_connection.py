"""The kept-alive GET of a metrics endpoint, against a server that answers each request with
scripted bytes: every way HTTP/1.1 delimits a body, answers cut into pieces, error statuses,
and servers that close or say nothing."""
from __future__ import annotations

import asyncio

import pytest

from quorum.kafka_watch.metrics_connection import MAX_HEAD_BYTES, HTTPError, MetricsConnection

OK_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"


class ScriptedServer:
    """Answers the n-th request with script[n]: a list of byte pieces sent apart (b"" marks a pause,
    None closes the connection there). Counts the connections it accepted and the requests read."""

    def __init__(self, script: list[list[bytes | None]]):
        self.script = list(script)
        self.connections = 0
        self.requests = 0
        self.answered = 0  # answers written whole

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/metrics"

    async def __aexit__(self, *exc) -> None:
        self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while self.script:
                request = await reader.readuntil(b"\r\n\r\n")
                assert request.startswith(b"GET /metrics HTTP/1.1\r\n")
                self.requests += 1
                for piece in self.script.pop(0):
                    if piece is None:
                        writer.close()
                        return
                    if piece == b"":
                        await asyncio.sleep(0.05)  # the client reads what came so far first
                        continue
                    writer.write(piece)
                    await writer.drain()
                self.answered += 1
            await reader.read()  # until the client closes
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def run(script: list[list[bytes | None]], gets: int, timeout_s: float = 2.0) -> tuple[list, ScriptedServer]:
    """`gets` GETs on one MetricsConnection: each body, or the exception it raised."""
    server = ScriptedServer(script)

    async def main() -> list:
        out: list = []
        async with server as url:
            conn = MetricsConnection(url)
            try:
                for _ in range(gets):
                    try:
                        out.append(await conn.get(timeout_s))
                    except Exception as e:  # noqa: BLE001 - the test compares them
                        out.append(e)
            finally:
                conn.close()
        return out
    return asyncio.run(main()), server


def test_content_length_answers_in_pieces_share_one_connection():
    body = b"a 1\nb 2\n"
    answer = [OK_HEAD[:10], b"", OK_HEAD[10:] + b"Content-Length: 8\r\n\r\na 1", b"", b"\nb 2\n"]
    out, server = run([answer, answer, answer], gets=3)
    assert out == [body.decode()] * 3
    assert server.connections == 1 and server.requests == 3


def test_a_chunked_answer_cut_anywhere_with_extensions_and_trailers():
    chunked = OK_HEAD + b"Transfer-Encoding: chunked\r\n\r\n"
    plain = [chunked + b"4\r\na 1\n\r\n4\r\nb 2\n\r\n0\r\n\r\n"]
    cut = [chunked + b"4;ext=1\r", b"", b"\na 1", b"", b"\n\r\n4\r\nb 2\n\r\n0", b"", b"\r\nX-Trailer: 1\r\n", b"", b"\r\n"]
    out, server = run([plain, cut, plain], gets=3)
    assert out == ["a 1\nb 2\n"] * 3
    assert server.connections == 1


def test_a_body_delimited_by_the_close_and_http_1_0_connect_again():
    close_delimited = [b"HTTP/1.1 200 OK\r\n\r\na 1\n", b"", b"b 2\n", None]
    http_1_0 = [b"HTTP/1.0 200 OK\r\nContent-Length: 4\r\n\r\nc 3\n"]
    out, server = run([close_delimited, http_1_0, http_1_0], gets=3)
    assert out == ["a 1\nb 2\n", "c 3\n", "c 3\n"]
    assert server.connections == 3  # HTTP/1.0 without keep-alive closes too


def test_an_error_status_is_named_as_urllib_names_it_and_the_next_get_connects_again():
    unauthorized = [b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n"]
    ok = [OK_HEAD + b"Content-Length: 4\r\n\r\na 1\n"]
    out, server = run([unauthorized, ok], gets=2)
    assert isinstance(out[0], HTTPError) and str(out[0]) == "HTTP Error 401: Unauthorized" and out[0].status == 401
    assert out[1] == "a 1\n" and server.connections == 2


def test_a_server_that_closes_is_named_and_the_next_get_connects_again():
    ok = [OK_HEAD + b"Content-Length: 4\r\n\r\na 1\n"]
    out, server = run([[None], [OK_HEAD + b"Content-Length: 9\r\n\r\na 1", None], ok], gets=3)
    assert isinstance(out[0], ConnectionResetError) and str(out[0]) == "the endpoint closed the connection"
    assert isinstance(out[1], ConnectionResetError) and "in the middle of an answer" in str(out[1])
    assert out[2] == "a 1\n" and server.connections == 3


def test_a_silent_server_times_out_and_its_late_answer_is_never_read_as_the_next():
    late = [b"", b"", b"", b"", OK_HEAD + b"Content-Length: 5\r\n\r\nlate\n"]  # after 200 ms
    ok = [OK_HEAD + b"Content-Length: 4\r\n\r\na 1\n"]
    out, server = run([late, ok], gets=2, timeout_s=0.1)
    assert isinstance(out[0], TimeoutError)
    assert out[1] == "a 1\n" and server.connections == 2


def test_a_head_too_large_is_refused():
    out, _ = run([[OK_HEAD + b"X: " + b"x" * MAX_HEAD_BYTES]], gets=1)
    assert isinstance(out[0], ValueError) and "too large" in str(out[0])


def test_more_bytes_than_the_answer_close_the_connection():
    ok = [OK_HEAD + b"Content-Length: 4\r\n\r\na 1\n"]
    out, server = run([[OK_HEAD + b"Content-Length: 4\r\n\r\na 1\nextra"], ok], gets=2)
    assert out == ["a 1\n", "a 1\n"] and server.connections == 2


@pytest.mark.parametrize("given_up", ["cancelled", "closed"])
def test_a_get_given_up_leaves_no_answer_behind(given_up):
    ok = [OK_HEAD + b"Content-Length: 4\r\n\r\na 1\n"]
    server = ScriptedServer([ok, [b"", b"", OK_HEAD + b"Content-Length: 5\r\n\r\nlate\n"], ok])

    async def main() -> list[str]:
        async with server as url:
            conn = MetricsConnection(url)
            try:
                out = [await conn.get(2.0)]
                second = conn.begin()  # on the open connection: a plain future
                await asyncio.sleep(0.02)
                second.cancel() if given_up == "cancelled" else conn.close()
                deadline = asyncio.get_running_loop().time() + 2
                while server.answered < 2 and server.connections == 1 and asyncio.get_running_loop().time() < deadline:
                    await asyncio.sleep(0.01)  # until the late answer went out, or the close was seen
                out.append(await conn.get(2.0))
                return out
            finally:
                conn.close()
    assert asyncio.run(main()) == ["a 1\n", "a 1\n"]
    assert server.connections == 2
