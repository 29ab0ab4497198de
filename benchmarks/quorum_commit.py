"""Commit throughput and latency of a 3-voter quorum on loopback, with fsync.

Starts three `quorum node` processes (Kafka's default timeouts), appends through the
leader with kafka-python's producer (acks=all: an append returns once committed, i.e.
fsync'ed on the leader and a follower and below the high watermark), one request at a
time, for batches of 1 and of 100 records. The baseline is the fsync latency of the same
disk measured in the same run: commit latency is printed as a multiple of it.

  python benchmarks/quorum_commit.py [--seconds 8] [--linger-ms 25]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from quorum.node.local_cluster import Cluster  # noqa: E402


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def fsync_latency_ms(directory: Path, n: int = 200, size: int = 4096) -> list[float]:
    """Append `size` bytes and fsync, `n` times: what one durable log append costs here."""
    path = directory / "fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    out = []
    try:
        block = os.urandom(size)
        for _ in range(n):
            t0 = time.perf_counter()
            os.write(fd, block)
            os.fsync(fd)
            out.append((time.perf_counter() - t0) * 1000)
    finally:
        os.close(fd)
        path.unlink()
    return out


def run_batches(cluster: Cluster, leader: int, batch: int, seconds: float) -> tuple[int, float, list[float]]:
    producer = cluster.producer(leader)
    payload = b"x" * 100
    latencies: list[float] = []
    records = 0
    try:
        cluster.append(leader, [payload], producer=producer)  # warm-up: metadata, connections
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            t0 = time.perf_counter()
            futs = [producer.send("__cluster_metadata", value=payload, partition=0) for _ in range(batch)]
            producer.flush()
            for f in futs:
                f.get(timeout=10)
            latencies.append((time.perf_counter() - t0) * 1000)
            records += batch
        elapsed = time.perf_counter() - start
    finally:
        producer.close(timeout=2)
    return records, elapsed, latencies


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=8.0, help="measuring time per batch size")
    ap.add_argument("--linger-ms", type=int, default=25, help="controller.quorum.append.linger.ms (Kafka: 25)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="quorum-bench-") as tmp:
        root = Path(tmp)
        fsync = fsync_latency_ms(root)
        f50, f99 = pct(fsync, 50), pct(fsync, 99)
        print(f"fsync baseline (4 KiB append + fsync, same disk): p50 {f50:.2f} ms  p99 {f99:.2f} ms")
        cluster = Cluster(root, voters=3, observers=0,
                          settings={"controller.quorum.append.linger.ms": args.linger_ms})
        cluster.start()
        try:
            leader = cluster.wait_leader(timeout_s=30)
            print(f"3 voters on loopback, fsync on, append linger {args.linger_ms} ms, one request in flight")
            print(f"{'batch':>6} {'records/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'p50/fsync p50':>14} "
                  f"{'p99/fsync p99':>14}")
            for batch in (1, 100):
                records, elapsed, lat = run_batches(cluster, leader, batch, args.seconds)
                p50, p99 = pct(lat, 50), pct(lat, 99)
                print(f"{batch:>6} {records / elapsed:>10.0f} {p50:>8.2f} {p99:>8.2f} {p50 / f50:>14.1f} "
                      f"{p99 / f99:>14.1f}")
        finally:
            cluster.stop_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
