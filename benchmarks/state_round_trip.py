"""One state-server round trip of the health processor, over a Unix domain socket and over TCP.

    python benchmarks/state_round_trip.py [--rounds 3] [--calls 2000]

Every call a `transformWithState` processor makes on its state (a key, a get, an update, a
timer) is a round trip between the Python worker and the JVM's state server, and a busy quorum
costs five a batch. The channel is TCP on loopback unless `spark.python.unix.domain.socket.enabled`
is set; the job sets it (streaming/spark_session.py). Each round starts two fresh local[1] sessions,
one per channel (the setting is read when the JVM starts), in alternating order; in each, one
micro-batch's task times `--calls` `ValueState.get` calls on each of 4 keys, five times, and keeps
the fastest pass per key. Printed: the median microseconds per round trip over each channel, and
the ratio Unix socket / TCP (TCP, Spark's default, is the baseline measured in the same run).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def measure(unix_sockets: bool, calls: int) -> list[float]:
    """In this process: microseconds per `get`, the fastest of five passes, one figure per key."""
    import time

    from pyspark.sql import Row
    from pyspark.sql.streaming import StatefulProcessor
    from pyspark.sql.types import DoubleType, StringType, StructField, StructType

    from streaming.spark_session import UNIX_SOCKETS, build_spark

    class TimedGets(StatefulProcessor):
        def init(self, handle):
            self.state = handle.getValueState("v", "x LONG")

        def handleInputRows(self, key, rows, timerValues):
            for _ in rows:
                pass
            self.state.update((1,))
            passes = []
            for _ in range(5):
                start = time.perf_counter_ns()
                for _ in range(calls):
                    self.state.get()
                passes.append((time.perf_counter_ns() - start) / calls / 1000)
            yield Row(k=key[0], us=min(passes))

        def close(self):
            pass

    spark = build_spark(master="local[1]", app_name="state-round-trip", shuffle_partitions=1,
                        extra_conf={UNIX_SOCKETS: str(unix_sockets).lower()})
    assert spark.sparkContext.getConf().get(UNIX_SOCKETS) == str(unix_sockets).lower()
    with tempfile.TemporaryDirectory() as d:
        spark.range(4).selectExpr("cast(id as string) as k").write.parquet(f"{d}/in")
        schema = StructType([StructField("k", StringType()), StructField("us", DoubleType())])
        out = (spark.readStream.schema("k STRING").parquet(f"{d}/in").groupBy("k")
               .transformWithState(TimedGets(), schema, "Update", "None"))
        figures: list[float] = []
        query = (out.writeStream.foreachBatch(lambda batch, _: figures.extend(r.us for r in batch.collect()))
                 .option("checkpointLocation", f"{d}/checkpoint").trigger(availableNow=True).start())
        query.awaitTermination()
    spark.stop()
    return figures


def run_once(unix_sockets: bool, calls: int) -> list[float]:
    """`measure` in a fresh interpreter and JVM: the channel is fixed when the JVM starts."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, __file__, "--child", "unix" if unix_sockets else "tcp",
                          "--calls", str(calls)], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3, help="sessions per channel, alternating the order")
    ap.add_argument("--calls", type=int, default=2000, help="gets timed per pass")
    ap.add_argument("--child", choices=["unix", "tcp"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure(args.child == "unix", args.calls)))
        return
    figures: dict[str, list[float]] = {"tcp": [], "unix": []}
    for i in range(args.rounds):
        order = ("tcp", "unix") if i % 2 == 0 else ("unix", "tcp")
        for channel in order:
            per_key = run_once(channel == "unix", args.calls)
            figures[channel].extend(per_key)
            print(f"round {i + 1} {channel:>4}: " + ", ".join(f"{us:.0f}" for us in sorted(per_key))
                  + " us per round trip (each key's fastest pass)", flush=True)
    tcp, unix = statistics.median(figures["tcp"]), statistics.median(figures["unix"])
    print(f"TCP (baseline): {tcp:.0f} us per round trip, median of {len(figures['tcp'])}")
    print(f"Unix socket:    {unix:.0f} us per round trip, median of {len(figures['unix'])}")
    print(f"ratio Unix socket / TCP: {unix / tcp:.2f}")


if __name__ == "__main__":
    main()
