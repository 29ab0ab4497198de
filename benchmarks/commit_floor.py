"""The floor under a quorum commit on this machine: its message flow with no protocol.

A commit one at a time crosses four loopback hops and waits for fsyncs: the client sends
to the leader, the leader forwards to two followers and fsyncs its own copy, a follower
fsyncs and acknowledges, the leader answers the client once its own copy and one
follower's are durable. This runs exactly that flow as separate processes with asyncio
streams and 4-byte frames, and nothing else: no Kafka protocol, no Raft, no record codec.
Its p50 is what any asyncio implementation of the commit pays here before doing any work
of its own, so `quorum_commit.py` prints the commit's p50 against it.

  python benchmarks/commit_floor.py [--n 3000]          # prints the floor and the fsync p50
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from quorum.wire.codec import frame, read_frame  # noqa: E402   the nodes' own framing

MESSAGE = b"x" * 250   # about one Produce of one 100-byte record
MAX_FRAME = 1 << 16
WARM_UP = 100          # commits timed but not counted: the connections' first round trips


def _append_fsync(fd: int, payload: bytes) -> None:
    os.write(fd, payload)
    os.fsync(fd)


@contextlib.contextmanager
def _until_closed():
    """A connection's loop ends quietly when its peer resets it."""
    try:
        yield
    except ConnectionError:
        pass


async def _serve(handler) -> None:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)   # the parent reads the port
    await server.serve_forever()


async def follower(log: Path) -> None:
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with _until_closed():
            while (message := await read_frame(reader, MAX_FRAME)) is not None:
                _append_fsync(fd, message)
                writer.write(frame(b"ack"))

    await _serve(handle)


async def leader(log: Path, follower_ports: list[int]) -> None:
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    links = [await asyncio.open_connection("127.0.0.1", p) for p in follower_ports]
    acked = [0] * len(links)      # messages each follower has acknowledged
    majority: dict[int, asyncio.Future] = {}

    async def count_acks(i: int, reader: asyncio.StreamReader) -> None:
        while await read_frame(reader, MAX_FRAME) is not None:
            acked[i] += 1
            waiter = majority.pop(acked[i], None)   # the first follower to reach it completes it
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    tasks = [asyncio.create_task(count_acks(i, r)) for i, (r, _) in enumerate(links)]
    sent = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal sent
        with _until_closed():
            while (message := await read_frame(reader, MAX_FRAME)) is not None:
                sent += 1
                for _, w in links:
                    w.write(frame(message))           # the followers append while this node fsyncs
                _append_fsync(fd, message)
                if max(acked) < sent:
                    waiter = majority.setdefault(sent, asyncio.get_running_loop().create_future())
                    await waiter
                writer.write(frame(b"committed"))

    try:
        await _serve(handle)
    finally:
        for t in tasks:
            t.cancel()


def _start(*args: str) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line.strip().isdigit():
        proc.kill()
        raise RuntimeError(f"commit floor: {args[0]} did not start")
    return proc, int(line)


async def _commit_latencies_ms(port: int, n: int) -> list[float]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    out = []
    try:
        for _ in range(WARM_UP + n):
            t0 = time.perf_counter()
            writer.write(frame(MESSAGE))
            if await read_frame(reader, MAX_FRAME) is None:
                raise RuntimeError("commit floor: the leader closed the connection")
            out.append((time.perf_counter() - t0) * 1000)
    finally:
        writer.close()
    return out[WARM_UP:]


def floor_latencies_ms(directory: Path, n: int = 3000) -> list[float]:
    """One-at-a-time latencies (ms) of the commit's message flow: 3 processes, fsync on."""
    procs = []
    try:
        for name in ("follower-a", "follower-b"):
            procs.append(_start("follower", str(directory / name)))
        proc, port = _start("leader", str(directory / "leader"), *(str(p) for _, p in procs))
        procs.append((proc, port))
        return asyncio.run(_commit_latencies_ms(port, n))
    finally:
        for proc, _ in procs:
            proc.kill()
            proc.wait()


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] in ("follower", "leader"):
        role, log, *ports = sys.argv[1:]
        try:
            asyncio.run(follower(Path(log)) if role == "follower" else leader(Path(log), [int(p) for p in ports]))
        except KeyboardInterrupt:
            pass
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=3000, help="commits to time (default 3000)")
    args = ap.parse_args()
    from disk_latency import fsync_latency_ms, pct
    with tempfile.TemporaryDirectory(prefix="commit-floor-") as tmp:
        f50 = pct(fsync_latency_ms(Path(tmp)), 50)
        lat = floor_latencies_ms(Path(tmp), args.n)
    print(f"fsync p50 {f50:.3f} ms; commit floor p50 {pct(lat, 50):.3f} ms ({pct(lat, 50) / f50:.1f} x fsync), "
          f"p99 {pct(lat, 99):.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
