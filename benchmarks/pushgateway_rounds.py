"""What a round of pushes costs the Pushgateway: one group per cluster against the job's sink.

    python benchmarks/pushgateway_rounds.py [--clusters 50,100,200] [--rounds 5]

The Pushgateway checks every PUT against every series it holds, so the layout of the groups
decides its cost. For each cluster count, a snapshot of that many healthy quorums (3 voters,
1 observer, rendered by the real tracker) is pushed `--rounds` times:
- baseline: a PUT per cluster (grouping key `cluster`, 8 in flight) plus the monitor group,
  the layout the job used before;
- the job's `PushgatewaySink` (streaming/sinks/pushgateway.py), a full round per publish.
The gateway is the Debian package's, wiped before each layout. Printed per layout: the
gateway's CPU seconds per round, the pushing process's CPU per round, the wall time of a round,
and the ratio sink / baseline of the gateway's CPU (measured in the same run).
"""
from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "streaming"))

from prometheus_client import CollectorRegistry, push_to_gateway  # noqa: E402

from process_usage import cpu_seconds  # noqa: E402
from sinks.health_rows import ScriptedQuorum  # noqa: E402
from streaming.health.config import HealthConfig  # noqa: E402
from streaming.sinks.config import PrometheusSinkConfig  # noqa: E402
from streaming.sinks.monitor import MonitorMetrics  # noqa: E402
from streaming.sinks.prometheus_metrics import HealthCollector  # noqa: E402
from streaming.sinks.pushgateway import PushgatewaySink  # noqa: E402
from streaming.sinks.snapshot import HealthSnapshot  # noqa: E402
from streaming_throughput import Pushgateway  # noqa: E402


def snapshot_of(clusters: int) -> HealthSnapshot:
    snapshot = HealthSnapshot()
    for c in range(clusters):
        snapshot.apply(ScriptedQuorum(f"bench-{c:04d}", observers=(4,)).rows(3000))
    return snapshot


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def per_cluster_round(url: str, snapshot: HealthSnapshot, monitor: MonitorMetrics, clusters: list[str],
                      pool: ThreadPoolExecutor) -> None:
    def push(cluster: str) -> None:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(HealthCollector(snapshot, None, cluster=cluster))
        push_to_gateway(url, job="baseline", registry=registry, grouping_key={"cluster": cluster}, timeout=30)
    list(pool.map(push, clusters))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(HealthCollector(HealthSnapshot(), monitor, monitor_labels={"cluster": "_monitor"}))
    push_to_gateway(url, job="baseline", registry=registry, grouping_key={"cluster": "_monitor"}, timeout=30)


def measure(gateway: Pushgateway, rounds: int, one_round) -> tuple[float, float, float]:
    """(gateway CPU s, own CPU s, wall s) per round, after one untimed round."""
    gateway.wipe()
    one_round()
    g0, c0, t0 = cpu_seconds(gateway.pid), own_cpu(), time.perf_counter()
    for _ in range(rounds):
        one_round()
    return tuple(x / rounds for x in (cpu_seconds(gateway.pid) - g0, own_cpu() - c0, time.perf_counter() - t0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clusters", default="50,100,200", help="comma-separated cluster counts")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds per layout")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        gateway = Pushgateway(Path(tmp))
        try:
            for n in (int(x) for x in args.clusters.split(",")):
                snapshot, monitor = snapshot_of(n), MonitorMetrics(HealthConfig())
                clusters = sorted({v.quorum["cluster_id"] for v in snapshot.views()})
                with ThreadPoolExecutor(8) as pool:
                    base = measure(gateway, args.rounds,
                                   lambda: per_cluster_round(gateway.url, snapshot, monitor, clusters, pool))
                sink = PushgatewaySink(PrometheusSinkConfig(pushgateway_url=gateway.url, job="sink",
                                                            push_interval_ms=0, push_timeout_s=30),
                                       snapshot, monitor)

                def sink_round() -> None:
                    sink.publish()
                    assert sink.flush(120) and monitor.push_failures_total == 0
                try:
                    new = measure(gateway, args.rounds, sink_round)
                finally:
                    sink.close()
                for name, (g, own, wall) in (("a group per cluster", base), ("the job's sink", new)):
                    print(f"{n} clusters, {name}: gateway {g * 1000:.0f} ms CPU a round, pusher "
                          f"{own * 1000:.0f} ms CPU, round {wall * 1000:.0f} ms")
                print(f"{n} clusters: gateway CPU a round, sink / baseline = {new[0] / base[0]:.3f}; "
                      f"pusher CPU {new[1] / base[1]:.2f}; round time {new[2] / base[2]:.2f}")
        finally:
            gateway.stop()


if __name__ == "__main__":
    main()
