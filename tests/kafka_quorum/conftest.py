"""The collector's view of the package's real KRaft cluster, judged live: `quorum collect`'s
poll (its Collection, at the documented 1 s interval) on a thread, each record encoded and
decoded by the event contract and folded at once into the job's health state machine
(streaming.health.tracker), as a 1 s trigger would see it. Tests fault the cluster and await
verdicts with deadlines; every verdict carries the wall time it was reached.

The package runs once per cluster shape (quorum/local_kafka/kafka_shapes.py: a Kafka version, dedicated or
combined nodes, a dynamic or static voter set), one cluster at a time: QUORUM_KAFKA_MATRIX
selects the shapes (CI's two unless `full` or a list of ids). A test that needs a kind of shape
says so with `@pytest.mark.kafka_shape(dynamic=True, combined=False)`, and is skipped, with the
reason, on the others."""
from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Callable

import pytest

from quorum import events
from quorum.kafka_watch.collector import Collection
from quorum.kafka_watch.fleet_file import WatchedCluster
from quorum.local_kafka import kafka_shapes
from quorum.local_kafka.kafka_cluster import KafkaCluster
from streaming.health.config import HealthConfig
from streaming.health.state import new_state
from streaming.health.tracker import QuorumTracker

INTERVAL_MS = 1000  # quorum collect's default, the interval docs/deployment.md documents


SHAPES = kafka_shapes.selected()
# a failed test's report shows which node each DescribeQuorum asked, and what it answered
logging.getLogger("quorum.kafka_watch.collector").setLevel(logging.DEBUG)
SHAPE_MARKER = "kafka_shape"


def pytest_configure(config):
    config.addinivalue_line("markers", f"{SHAPE_MARKER}(dynamic=None, combined=None, reason=''): the cluster "
                                       "shapes a real-Kafka test applies to (skipped on the others)")


def shape_mismatch(shape: kafka_shapes.Shape, dynamic: bool | None = None, combined: bool | None = None,
                   reason: str = "") -> str | None:
    """Why a test that needs a dynamic (or static) voter set, or combined (or dedicated) nodes,
    cannot run on `shape`; None when it can."""
    wants = []
    if dynamic is not None and shape.dynamic != dynamic:
        wants.append("a dynamic voter set" if dynamic else "a static voter set")
    if combined is not None and shape.combined != combined:
        wants.append("combined nodes" if combined else "dedicated controllers")
    if not wants:
        return None
    return f"needs {' and '.join(wants)}{f' ({reason})' if reason else ''}; {shape.id} has not"


def pytest_collection_modifyitems(config, items):
    # at collection, so that a test skipped for its shape starts nothing
    for item in items:
        shape = item.callspec.params.get("shape") if hasattr(item, "callspec") else None
        marker = item.get_closest_marker(SHAPE_MARKER)
        if isinstance(shape, kafka_shapes.Shape) and marker is not None:
            why = shape_mismatch(shape, **marker.kwargs)
            if why:
                item.add_marker(pytest.mark.skip(reason=why))


@pytest.fixture(scope="package", params=SHAPES, ids=[s.id for s in SHAPES])
def shape(request) -> kafka_shapes.Shape:
    """The cluster shape this round of the package runs on: `.version`, `.combined`, `.dynamic`."""
    return request.param


@pytest.fixture(scope="package")
def kafka_cluster(shape, tmp_path_factory):
    """A cluster of `shape`: three controllers and a broker, or three combined nodes; each node in
    a cgroup of its own (for deploy/packet_filter.py) and serving its metrics through the
    Prometheus JMX exporter agent. Package scope, per shape: its JVMs stop before the next
    shape's start, and before the other suites run, which they would slow.
    Tests that fault it leave it as they found it: every node running, every voter fetching."""
    from deploy.packet_filter import cgroup2_root
    cgroups = cgroup2_root() / f"quorum-test-{os.getpid()}"
    started = time.monotonic()
    with KafkaCluster(base_dir=tmp_path_factory.mktemp(f"kafka-cluster-{shape.id}"), cgroup_parent=cgroups,
                      jmx_exporter=True, **shape.cluster_options()) as cluster:
        print(f"\n{shape.id}: the cluster started in {time.monotonic() - started:.1f} s")
        yield cluster
    cgroups.rmdir()


class Watch:
    def __init__(self, cluster, interval_ms: int = INTERVAL_MS, cfg: HealthConfig | None = None,
                 node_metrics: bool = False, path: str = "brokers"):
        """`node_metrics`: also read every node's JMX exporter endpoint, as `quorum collect
        --node-metrics` does, and fold each node's `metrics` record in with the poll's. `path`:
        poll through the brokers (`--bootstrap-server`, every broker listed) or the controllers
        themselves (`--bootstrap-controller`)."""
        self.cluster = cluster
        self.interval_ms = interval_ms
        self.cfg = cfg or HealthConfig()
        metrics = tuple((i, cluster.metrics_url(i)) for i in sorted(cluster.nodes)) if node_metrics else ()
        brokers, controllers = (None, cluster.bootstrap_controllers) if path == "controllers" else (cluster.bootstrap,
                                                                                                   None)
        self.collection = Collection(WatchedCluster(cluster.cluster_id, brokers, controllers, interval_ms,
                                                    interval_ms, node_metrics=metrics))
        self.state = new_state(cluster.cluster_id, "__cluster_metadata", 0)
        self.records: list[dict[str, Any]] = []
        self.rows: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="collector-watch", daemon=True)

    def start(self) -> "Watch":
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.collection.close()

    def _run(self) -> None:
        next_poll = time.monotonic()
        while not self._stop.is_set():
            self._stop.wait(max(0.0, next_poll - time.monotonic()))
            next_poll = max(next_poll + self.interval_ms / 1000, time.monotonic())
            records = self.collection.poll().records
            now_ms = records[0].time_ms
            batch = [events.to_dict(events.decode(events.encode(r))) for r in records]
            with self._lock:
                for rec in batch:
                    rec["_offset"] = len(self.records)
                    self.records.append(rec)
                tracker = QuorumTracker(self.cfg, self.state)
                tracker.apply_all(batch)
                for row in tracker.evaluate(None):
                    self.rows.append({**row, "wall_ms": now_ms})

    # --- reading the verdicts ---------------------------------------------------------------------

    def mark(self) -> int:
        """A position in the verdicts: what came after it is what a fault caused."""
        with self._lock:
            return len(self.rows)

    def since(self, mark: int, kind: str = "transition") -> list[dict[str, Any]]:
        with self._lock:
            return [r for r in self.rows[mark:] if r["kind"] == kind]

    def await_row(self, mark: int, match: Callable[[dict[str, Any]], bool], timeout_s: float, what: str,
                  kind: str = "transition") -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = [r for r in self.since(mark, kind) if match(r)]
            if found:
                return found[0]
            time.sleep(0.1)
        rows = [{k: r.get(k) for k in ("replica_id", "status", "cause", "reason", "wall_ms")}
                for r in self.since(mark, kind)][-12:]
        with self._lock:
            polls = [(r["type"], r.get("answered_by"), r.get("error"), r.get("latency_ms"))
                     for r in self.records if r["type"] != "metrics"][-8:]
        raise AssertionError(f"no {what} within {timeout_s:.0f} s; the last {kind} rows: {rows}; "
                             f"the last polls (type, answered by, error, latency): {polls}")

    def await_replica(self, mark: int, replica_id: int, status: str, timeout_s: float) -> dict[str, Any]:
        return self.await_row(mark, lambda r: r.get("replica_id") == replica_id and r["status"] == status,
                              timeout_s, f"replica {replica_id} {status}")

    def await_quorum(self, mark: int, status: str, timeout_s: float) -> dict[str, Any]:
        return self.await_row(mark, lambda r: r.get("replica_id") is None and r["status"] == status,
                              timeout_s, f"quorum {status}")

    def polled_node(self) -> int:
        """The node the collector's last answered poll went to: the one it talks to."""
        with self._lock:
            answered = [r["answered_by"] for r in self.records if r["type"] == "quorum_snapshot"]
        return answered[-1]

    def snapshot_times(self, since_ms: int) -> list[int]:
        """The wall times of the snapshots (answered polls) since `since_ms`."""
        with self._lock:
            return [r["time_ms"] for r in self.records if r["type"] == "quorum_snapshot" and r["time_ms"] >= since_ms]

    def poll_gaps_ms(self, since_ms: int) -> list[int]:
        """The gaps between consecutive snapshots since `since_ms`."""
        times = self.snapshot_times(since_ms)
        return [b - a for a, b in zip(times, times[1:])]

    def quorum_rows(self, mark: int, until: int | None = None) -> list[dict[str, Any]]:
        """The quorum rows between two marks (`until` None: until now)."""
        with self._lock:
            return [r for r in self.rows[mark:until] if r["kind"] == "quorum"]

    def replica_rows(self, mark: int, replica_id: int, until: int | None = None) -> list[dict[str, Any]]:
        with self._lock:
            return [r for r in self.rows[mark:until] if r["kind"] == "replica" and r["replica_id"] == replica_id]

    def latest(self, kind: str, replica_id: int | None = None) -> dict[str, Any] | None:
        with self._lock:
            rows = [r for r in self.rows if r["kind"] == kind and r.get("replica_id") == replica_id]
        return rows[-1] if rows else None


def _watch(cluster, node_metrics: bool, path: str = "brokers"):
    cluster.wait_for(cluster.every_replica_fetching, 60, "every replica fetching")
    w = Watch(cluster, node_metrics=node_metrics, path=path).start()
    yield w
    w.close()


@pytest.fixture
def watch(kafka_cluster):
    """DescribeQuorum alone, on a healthy cluster: every node running and fetching before the fault."""
    yield from _watch(kafka_cluster, node_metrics=False)


@pytest.fixture
def watch_with_nodes(kafka_cluster):
    """DescribeQuorum and every node's own view (its JMX exporter endpoint), on a healthy cluster."""
    yield from _watch(kafka_cluster, node_metrics=True)


@pytest.fixture
def watch_controllers(kafka_cluster):
    """`quorum collect --bootstrap-controller` with every node's own view: no broker on the path."""
    yield from _watch(kafka_cluster, node_metrics=True, path="controllers")
