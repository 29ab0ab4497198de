"""Commit throughput and latency of a 3-voter quorum on loopback, with fsync.

Starts three `quorum node` processes (Kafka's default timeouts) and appends through the
leader with Produce requests (acks=all: an append is answered once committed, i.e. fsync'ed
on the leader and a follower and below the high watermark), sent by a lean asyncio client
on one connection, in two modes:
  one in flight   the next append is sent when the previous one is committed
  pipelined       `--in-flight` appends outstanding at any time (the leader gathers the
                  appends that arrive together into one log append and one fsync)
for batches of 1 and of 100 records. The baseline is the fsync latency of the same disk
measured in the same run: latencies are printed as multiples of it, next to the round trip
of a request that does no I/O (ApiVersions) on the same connection. A second baseline is the
commit's floor (`commit_floor.py`): the same hops and fsyncs between processes with no
protocol at all, what this machine charges any asyncio implementation of the commit; the
one-at-a-time commit is printed against it too. The run ends with the goals as ratios: p50
commit latency at linger 0 (one in flight, batch 1) <= 8 x fsync p50, and pipelined
throughput at batch 100 >= 20,000 records/s.

  python benchmarks/quorum_commit.py [--seconds 5] [--linger-ms 0 25] [--in-flight 8]
                                     [--profile DIR]

`--profile DIR` runs the nodes under cProfile (slower: use it to see where the time goes,
not for the figures) and prints the leader's and a follower's top functions.
"""
from __future__ import annotations

import argparse
import asyncio
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from commit_floor import floor_latencies_ms  # noqa: E402
from disk_latency import fsync_latency_ms, pct  # noqa: E402
from quorum.kafka_client.wire_connection import PeerConnection  # noqa: E402
from quorum.storage.record_batches import build_batch  # noqa: E402
from quorum.testing.local_cluster import Cluster  # noqa: E402
from quorum.wire import apis as w  # noqa: E402

TOPIC = "__cluster_metadata"
PRODUCE_VERSION = 8
GOAL_LATENCY_X_FSYNC = 8.0
GOAL_PIPELINED_RECORDS_S = 20_000


def produce_request(batch: int, payload: bytes = b"x" * 100):
    req = w.SUPPORTED[w.PRODUCE].request
    T = req.TopicProduceData
    records = build_batch(0, 0, [(int(time.time() * 1000), None, payload)] * batch)
    return req(transactional_id=None, acks=-1, timeout_ms=10_000, topic_data=[
        T(name=TOPIC, partition_data=[T.PartitionProduceData(index=0, records=records)])])


async def _commit(conn: PeerConnection, body) -> None:
    resp = await conn.request(w.PRODUCE, PRODUCE_VERSION, body, 10.0)
    error = resp.responses[0].partition_responses[0].error_code
    if error:
        raise RuntimeError(f"append refused: error {error}")


async def measure(port: int, batch: int, in_flight: int, seconds: float) -> tuple[int, float, list[float]]:
    """Records committed, elapsed seconds and per-append latencies (ms) with `in_flight`
    appends outstanding on one connection."""
    conn = PeerConnection(0, "127.0.0.1", port, "quorum-commit-bench", 1 << 24)
    body = produce_request(batch)   # one encoded request reused: the client's cost stays flat
    latencies: list[float] = []
    try:
        await _commit(conn, body)   # warm-up: connection, first append
        start = time.perf_counter()
        end = start + seconds

        async def writer() -> None:
            while time.perf_counter() < end:
                t0 = time.perf_counter()
                await _commit(conn, body)
                latencies.append((time.perf_counter() - t0) * 1000)

        await asyncio.gather(*(writer() for _ in range(in_flight)))
        elapsed = time.perf_counter() - start
    finally:
        conn.close()
    return len(latencies) * batch, elapsed, latencies


async def round_trip_ms(port: int, n: int = 300) -> list[float]:
    """ApiVersions on the same kind of connection: the client, the network and the node's
    request path, with no Raft step and no disk."""
    conn = PeerConnection(0, "127.0.0.1", port, "quorum-commit-bench", 1 << 24)
    body = w.SUPPORTED[w.API_VERSIONS].request(client_software_name="bench", client_software_version="1")
    out = []
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            await conn.request(w.API_VERSIONS, 3, body, 5.0)
            out.append((time.perf_counter() - t0) * 1000)
    finally:
        conn.close()
    return out


def print_profile(path: Path, title: str, top: int = 18) -> None:
    print(f"\n--- {title}: top functions by own time ({path.name}) ---")
    stats = pstats.Stats(str(path))
    stats.sort_stats("tottime").print_stats(top)


def run_linger(root: Path, linger_ms: int, args, f50: float) -> dict:
    profile_dir = Path(args.profile) if args.profile else None
    if profile_dir:
        profile_dir.mkdir(parents=True, exist_ok=True)
    (root / f"linger-{linger_ms}").mkdir()
    cluster = Cluster(root / f"linger-{linger_ms}", voters=3, observers=0, profile_dir=profile_dir,
                      settings={"controller.quorum.append.linger.ms": linger_ms})
    results = {}
    cluster.start()
    try:
        leader = cluster.wait_leader(timeout_s=30)
        port = cluster.ports[leader]
        rtt = asyncio.run(round_trip_ms(port))
        print(f"\n3 voters on loopback, fsync on, append linger {linger_ms} ms; "
              f"ApiVersions round trip p50 {pct(rtt, 50):.2f} ms ({pct(rtt, 50) / f50:.1f} x fsync p50)")
        print(f"{'mode':>14} {'batch':>6} {'records/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'p50/fsync p50':>14}")
        for mode, in_flight in (("one in flight", 1), (f"{args.in_flight} in flight", args.in_flight)):
            for batch in (1, 100):
                records, elapsed, lat = asyncio.run(measure(port, batch, in_flight, args.seconds))
                p50, p99 = pct(lat, 50), pct(lat, 99)
                results[(in_flight, batch)] = (records / elapsed, p50)
                print(f"{mode:>14} {batch:>6} {records / elapsed:>10.0f} {p50:>8.2f} {p99:>8.2f} "
                      f"{p50 / f50:>14.1f}")
        if profile_dir:
            for i in cluster.ids:
                cluster.terminate(i)
            follower = next(i for i in cluster.voter_ids if i != leader)
            print_profile(profile_dir / f"node-{leader}.prof", f"leader (node {leader}), linger {linger_ms}")
            print_profile(profile_dir / f"node-{follower}.prof", f"follower (node {follower}), linger {linger_ms}")
    finally:
        cluster.stop_all()
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=5.0, help="measuring time per mode and batch size (default 5)")
    ap.add_argument("--linger-ms", type=int, nargs="+", default=[0, 25],
                    help="controller.quorum.append.linger.ms values to run (default: 0 and Kafka's 25)")
    ap.add_argument("--in-flight", type=int, default=8, help="appends outstanding in the pipelined mode (default 8)")
    ap.add_argument("--profile", metavar="DIR", help="run the nodes under cProfile, keep the profiles in DIR")
    args = ap.parse_args()
    if args.seconds <= 0 or args.in_flight < 1 or any(x < 0 for x in args.linger_ms):
        ap.error("--seconds must be positive, --in-flight >= 1, --linger-ms >= 0")
    with tempfile.TemporaryDirectory(prefix="quorum-bench-") as tmp:
        root = Path(tmp)
        fsync = fsync_latency_ms(root)
        f50, f99 = pct(fsync, 50), pct(fsync, 99)
        print(f"fsync baseline (4 KiB append + fsync, same disk): p50 {f50:.2f} ms  p99 {f99:.2f} ms")
        floor50 = pct(floor_latencies_ms(root), 50)
        print(f"commit floor (the same hops and fsyncs, 3 processes, no protocol): p50 {floor50:.2f} ms "
              f"({floor50 / f50:.1f} x fsync p50)")
        by_linger = {linger: run_linger(root, linger, args, f50) for linger in args.linger_ms}
    print()
    if 0 in by_linger:
        _, p50 = by_linger[0][(1, 1)]
        ok = p50 <= GOAL_LATENCY_X_FSYNC * f50
        print(f"goal: p50 commit latency at linger 0 (batch 1, one in flight) <= {GOAL_LATENCY_X_FSYNC:.0f} x fsync "
              f"p50: {p50 / f50:.1f} x ({p50:.2f} ms) {'met' if ok else 'MISSED'}; "
              f"{p50 / floor50:.1f} x the commit floor, which alone is {floor50 / f50:.1f} x fsync p50")
    best = max(r[(args.in_flight, 100)][0] for r in by_linger.values())
    ok = best >= GOAL_PIPELINED_RECORDS_S
    print(f"goal: pipelined throughput at batch 100 >= {GOAL_PIPELINED_RECORDS_S:,} records/s: {best:,.0f} "
          f"({best / GOAL_PIPELINED_RECORDS_S:.2f} x the goal) {'met' if ok else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
