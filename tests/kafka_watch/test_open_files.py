"""A collector keeps a connection to every node and metrics endpoint of its fleet: it raises its
own open-files limit to fit (most systems start processes at a soft limit of 1,024)."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_fleet_raises_the_soft_open_files_limit_to_a_connection_per_node_and_endpoint():
    code = """
import resource
resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
from quorum.kafka_watch.fleet import FILES_BASE, _make_room
from quorum.kafka_watch.fleet_file import WatchedCluster
metrics = tuple((i, f"http://n{i}:7071/metrics") for i in (1, 2, 3))
_make_room([WatchedCluster(f"c{i}", "n1:9092,n2:9092,n3:9092", None, 1000, 1000, node_metrics=metrics)
            for i in range(100)])
print(resource.getrlimit(resource.RLIMIT_NOFILE)[0] - FILES_BASE)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    # each cluster: its 3 brokers and, while they are blind, its 3 controllers; its 3 endpoints
    assert int(out.stdout) == 100 * (2 * 3 + 3)
