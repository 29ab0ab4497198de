"""What opening the health processor's state costs a task, with its schemas given as DDL text
and as types.

    python benchmarks/state_open.py [--rounds 3] [--batches 25]

Every micro-batch, each task of the health stage opens the processor's state (a value state
and a map state, as `streaming/health/processor.py` does in `init`). PySpark sends a schema
given as DDL text to the JVM's SQL parser first (one more round trip and a parse); a
`StructType` goes as it is. Each round runs a small `transformWithState` query (rate source,
50 keys, 8 state partitions, `local[2]`) for `--batches` micro-batches once per form, in
alternating order, in one session; the processor times its `init`. Printed: the median ms a
task per form over all rounds (the first batches of each query left out: start-up), and the
ratio types / DDL (DDL, PySpark's documented form, is the baseline measured in the same run).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WARM_UP_BATCHES = 5


def run(spark, form: str, batches: int, out: Path) -> list[float]:
    """Init times (ms) of the tasks of one query whose processor gives its schemas in `form`."""
    from pyspark.sql import Row
    from pyspark.sql.streaming import StatefulProcessor

    from streaming.health.processor import REPLICA_KEY_SCHEMA, STATE_SCHEMA

    value = "json STRING" if form == "ddl" else STATE_SCHEMA
    key = "replica STRING" if form == "ddl" else REPLICA_KEY_SCHEMA
    path = str(out)

    class Opens(StatefulProcessor):
        def init(self, handle) -> None:
            t0 = time.perf_counter()
            self.state = handle.getValueState("quorum", value)
            handle.getMapState("replicas", key, value)
            with open(path, "a") as f:
                f.write(f"{(time.perf_counter() - t0) * 1000:.3f}\n")

        def handleInputRows(self, k, rows, timerValues):
            for _ in rows:
                pass
            self.state.update(("x",))
            yield Row(k=k[0])

        def close(self) -> None:
            pass

    checkpoint = tempfile.mkdtemp(prefix=f"state-open-{form}-")
    query = (spark.readStream.format("rate").option("rowsPerSecond", 200).load()
             .selectExpr("cast(value % 50 as string) as k")
             .groupBy("k").transformWithState(Opens(), "k string", "update", "none")
             .writeStream.format("noop").option("checkpointLocation", checkpoint)
             .trigger(processingTime="300 milliseconds").start())
    deadline = time.monotonic() + 120
    try:
        while (query.lastProgress is None or query.lastProgress["batchId"] < batches) and query.isActive:
            if time.monotonic() > deadline:
                raise SystemExit(f"{form}: {batches} batches not done within 120 s")
            time.sleep(0.2)
    finally:
        query.stop()
    times = [float(x) for x in out.read_text().split()]
    tasks_per_batch = int(spark.conf.get("spark.sql.shuffle.partitions"))
    return times[WARM_UP_BATCHES * tasks_per_batch:]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batches", type=int, default=25, help="micro-batches per query")
    args = ap.parse_args()
    if args.rounds < 1 or args.batches <= WARM_UP_BATCHES:
        ap.error(f"--rounds >= 1 and --batches > {WARM_UP_BATCHES}")

    from streaming.spark_session import build_spark
    spark = build_spark(master="local[2]", app_name="state-open-bench", shuffle_partitions=8)
    spark.sparkContext.setLogLevel("ERROR")
    times: dict[str, list[float]] = {"ddl": [], "types": []}
    with tempfile.TemporaryDirectory(prefix="state-open-") as tmp:
        for r in range(args.rounds):
            order = ("ddl", "types") if r % 2 == 0 else ("types", "ddl")
            for form in order:
                got = run(spark, form, args.batches, Path(tmp) / f"{form}-{r}.txt")
                times[form] += got
                print(f"round {r + 1}, {form:>5}: {statistics.median(got):6.1f} ms a task (median of {len(got)})",
                      flush=True)
    spark.stop()
    ddl, types = statistics.median(times["ddl"]), statistics.median(times["types"])
    print(f"opening the state: DDL {ddl:.1f} ms a task, types {types:.1f} ms; types / DDL {types / ddl:.2f} x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
