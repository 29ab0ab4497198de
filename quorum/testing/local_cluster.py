"""A quorum of real `quorum node` processes on loopback, for tests, benchmarks and demos.

Nodes start in parallel; every wait polls a condition with a deadline (no fixed sleeps).
Status comes from each node's control socket, the quorum view from DescribeQuorum.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import yaml

from quorum.local_kafka.cgroup import preexec_joining
from quorum.local_kafka.loopback_ports import free_port
from quorum.node.fault_command import send

# Timeouts shorter than Kafka's defaults keep the suite fast; tests that claim a default-
# timing property (the 5 s leader failover) set Kafka's values back.
FAST = {"controller.quorum.election.timeout.ms": 300, "controller.quorum.fetch.timeout.ms": 600,
        "controller.quorum.request.timeout.ms": 600, "metadata.max.idle.interval.ms": 200}


class Cluster:
    def __init__(self, root: Path, voters: int = 3, observers: int = 1, settings: dict | None = None,
                 events_bootstrap: str | None = None, events_topic: str | None = None, cluster_id: str = "test-cluster",
                 profile_dir: Path | None = None, first_id: int = 1, ports: dict[int, int] | None = None,
                 cgroup_parent: Path | None = None):
        """`profile_dir`: run every node under cProfile, writing `node-N.prof` there on exit.
        `first_id`: the nodes' ids count from it (nodes joining another quorum, whose voters
        `settings` names, take ids that quorum does not use); `ports`, the listener ports of some
        of them (a quorum configured before they start knows them already). `cgroup_parent`: each
        node runs in a cgroup of its own under it (`cgroup_of`), for packet-filter rules."""
        self.cgroup_parent = cgroup_parent
        self.root = root
        self.profile_dir = profile_dir
        self.ids = list(range(first_id, first_id + voters + observers))
        self.voter_ids = self.ids[:voters]
        self.ports = {i: (ports or {}).get(i) or free_port() for i in self.ids}
        self.procs: dict[int, subprocess.Popen] = {}
        self.configs: dict[int, Path] = {}
        voters_str = ",".join(f"{i}@127.0.0.1:{self.ports[i]}" for i in self.voter_ids)
        for i in self.ids:
            cfg = {"node.id": i, "cluster.id": cluster_id, "controller.quorum.voters": voters_str,
                   "listener": f"127.0.0.1:{self.ports[i]}", "data.dir": str(root / f"node-{i}"),
                   "control.socket": str(root / f"n{i}.sock")}
            if events_bootstrap:
                cfg.update({"events.bootstrap.servers": events_bootstrap, "events.topic": events_topic,
                            "events.metrics.interval.ms": 500})
            cfg.update(settings or {})
            path = root / f"node-{i}.yaml"
            path.write_text(yaml.safe_dump(cfg))
            self.configs[i] = path

    # --- processes ---------------------------------------------------------------------------------

    def start(self, *ids: int) -> None:
        for i in ids or self.ids:
            log = open(self.root / f"node-{i}.log", "ab")
            profile = [] if self.profile_dir is None else ["-m", "cProfile", "-o",
                                                           str(self.profile_dir / f"node-{i}.prof")]
            self.procs[i] = subprocess.Popen([sys.executable, *profile, "-m", "quorum.cli", "node", "--config",
                                              str(self.configs[i])], stdout=log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, preexec_fn=preexec_joining(self.cgroup_of(i)))
        for i in ids or self.ids:
            self.wait_for(lambda i=i: self.try_status(i) is not None, 30, f"node {i} to start")

    def cgroup_of(self, i: int) -> Path | None:
        return self.cgroup_parent / f"node-{i}" if self.cgroup_parent is not None else None

    def signal(self, i: int, sig: int) -> None:
        self.procs[i].send_signal(sig)

    def kill(self, i: int) -> None:
        self.procs[i].kill()
        self.procs[i].wait()

    def terminate(self, i: int, timeout_s: float = 15) -> int:
        p = self.procs[i]
        p.terminate()
        return p.wait(timeout_s)

    def stop_all(self) -> None:
        for i, p in self.procs.items():
            if p.poll() is None:
                try:
                    p.send_signal(signal.SIGCONT)
                except ProcessLookupError:
                    pass
                p.kill()
                p.wait()

    def transitions(self) -> str:
        """Every node's logged state changes, in time order (for failure messages)."""
        lines = []
        for i in self.ids:
            lines += [line for line in self.log_text(i).splitlines() if " -> " in line or "fault" in line]
        return "\n".join(sorted(lines))

    def log_text(self, i: int) -> str:
        return (self.root / f"node-{i}.log").read_text(errors="replace")

    # --- observation -------------------------------------------------------------------------------

    def control(self, i: int, **cmd) -> dict:
        return send(str(self.root / f"n{i}.sock"), cmd, timeout_s=5)

    def try_status(self, i: int) -> dict | None:
        if i in self.procs and self.procs[i].poll() is not None:
            raise AssertionError(f"node {i} exited with {self.procs[i].returncode}:\n{self.log_text(i)[-3000:]}")
        try:
            return send(str(self.root / f"n{i}.sock"), {"op": "status"}, timeout_s=2)
        except (OSError, ValueError):
            return None

    def running(self) -> list[int]:
        return [i for i, p in self.procs.items() if p.poll() is None]

    def leader(self, among: list[int] | None = None) -> int | None:
        """The node that says it is leader, when every responsive node agrees on it."""
        statuses = [s for s in (self.try_status(i) for i in (among or self.running())) if s]
        leaders = {s["node_id"] for s in statuses if s["state"] == "leader"}
        if len(leaders) != 1:
            return None
        (lid,) = leaders
        epoch = next(s["epoch"] for s in statuses if s["node_id"] == lid)
        # voters in the leader's epoch know it (an observer learns it at its next discovery)
        followers_agree = all(s["leader_id"] == lid for s in statuses
                              if s["epoch"] == epoch and s["node_id"] in self.voter_ids)
        return lid if followers_agree else None

    def wait_for(self, cond: Callable, timeout_s: float, what: str, interval_s: float = 0.05):
        deadline = time.monotonic() + timeout_s
        while True:
            value = cond()
            if value:
                return value
            if time.monotonic() > deadline:
                states = {i: self.try_status(i) for i in self.running()}
                raise AssertionError(f"timed out after {timeout_s}s waiting for {what}; nodes: "
                                     + json.dumps(states, default=str))
            time.sleep(interval_s)

    def wait_leader(self, timeout_s: float = 15, among: list[int] | None = None) -> int:
        return self.wait_for(lambda: self.leader(among), timeout_s, "a leader")

    def wait_every_replica_caught_up(self, leader: int, timeout_s: float = 10, within_ms: int = 0) -> None:
        """DescribeQuorum lists an observer, and gives a follower its fetch and caught-up times, only
        once that replica has fetched from the current leader: wait for it rather than assume it.
        With `within_ms`, every replica must also have been caught up that recently (a node that
        has just started may still be copying the log)."""
        def caught_up():
            p = self.describe_direct(leader)["topics"][0]["partitions"][0]
            replicas = p["current_voters"] + p["observers"]
            now_ms = time.time() * 1000
            return (sorted(r["replica_id"] for r in replicas) == self.ids
                    and all(r["last_fetch_timestamp"] > 0 and r["last_caught_up_timestamp"] > 0
                            and (not within_ms or now_ms - r["last_caught_up_timestamp"] < within_ms)
                            for r in replicas))
        self.wait_for(caught_up, timeout_s, f"every replica to have fetched from leader {leader} and caught up", 0.1)

    def bootstrap(self, i: int) -> str:
        return f"127.0.0.1:{self.ports[i]}"

    def describe(self, i: int) -> dict:
        from kafka import KafkaAdminClient
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap(i), request_timeout_ms=5000)
        try:
            return admin.describe_metadata_quorum()
        finally:
            admin.close()

    def describe_direct(self, i: int, version: int = 2) -> dict:
        """DescribeQuorum (v2 unless told) sent to node `i` only (the admin client may pick any
        node it knows for the request, a frozen one included)."""
        from quorum.kafka_client.direct_describe import describe_quorum_directly
        return describe_quorum_directly(i, "127.0.0.1", self.ports[i], 5.0, version)

    def append_direct(self, i: int, values: list[bytes], acks: int = -1, timeout_s: float = 10.0) -> list[int]:
        """Offsets of `values` appended with one Produce request sent to node `i` only (no
        client metadata, no retries elsewhere: what a partition test needs). Raises
        RuntimeError with the error code when the node refuses."""
        import asyncio
        from quorum.kafka_client.wire_connection import PeerConnection
        from quorum.storage.record_batches import build_batch
        from quorum.wire import apis as w

        async def send():
            conn = PeerConnection(i, "127.0.0.1", self.ports[i], "test-client", 1 << 20)
            req = w.SUPPORTED[w.PRODUCE].request
            T = req.TopicProduceData
            batch = build_batch(0, 0, [(int(time.time() * 1000), None, v) for v in values])
            body = req(transactional_id=None, acks=acks, timeout_ms=int(timeout_s * 1000), topic_data=[
                T(name="__cluster_metadata", partition_data=[T.PartitionProduceData(index=0, records=batch)])])
            try:
                return await conn.request(w.PRODUCE, 8, body, timeout_s + 1)
            finally:
                conn.close()
        resp = asyncio.run(send())
        part = resp.responses[0].partition_responses[0]
        if part.error_code:
            raise RuntimeError(f"node {i} refused the append: error {part.error_code}")
        return list(range(part.base_offset, part.base_offset + len(values)))

    def producer(self, i: int, timeout_ms: int = 10_000, **kw):
        from quorum.node.append_command import make_producer
        return make_producer(self.bootstrap(i), timeout_ms=timeout_ms, **kw)

    def append(self, i: int, values: list[bytes], timeout_ms: int = 10_000, producer=None) -> list[int]:
        """Committed offsets of `values` appended through node `i` (or through `producer`,
        whose metadata is already known: a client bootstrapping while a node is frozen may
        pick that node for its metadata and wait for it)."""
        own = producer is None
        producer = producer or self.producer(i, timeout_ms)
        try:
            futs = [producer.send("__cluster_metadata", value=v, partition=0) for v in values]
            producer.flush(timeout=timeout_ms / 1000)
            return [f.get(timeout=timeout_ms / 1000).offset for f in futs]
        finally:
            if own:
                producer.close(timeout=2)


def committed_records(data_dir: Path, high_watermark: int) -> dict[int, bytes]:
    """offset -> value of the data records below `high_watermark` in a stopped node's log."""
    from quorum.storage.durable_log import DurableLog
    log, _ = DurableLog.open(data_dir / "log", fsync=False)
    try:
        return {r.offset: r.value for r in log.read(0, high_watermark) if r.kind == "data"}
    finally:
        log.close()


def committed_values(data_dir: Path, high_watermark: int) -> list[bytes]:
    return list(committed_records(data_dir, high_watermark).values())


def read_events(bootstrap: str, topic: str, until, timeout_s: float = 30.0,
                check_every_s: float = 0.2) -> list:
    """Decoded records of partition 0 of `topic`, read until `until(records)` holds (by
    assignment: no consumer group to join). `until` is asked whenever the topic is drained
    and at least every `check_every_s` while it is not: running nodes publish without a
    pause, so a topic they write to may never look drained."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    from quorum.events import decode
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "t", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    out = []
    deadline = time.monotonic() + timeout_s
    next_check = 0.0
    try:
        while time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None and not msg.error():
                out.append(decode(msg.value()))
                if time.monotonic() < next_check:
                    continue
            if until(out):
                return out
            next_check = time.monotonic() + check_every_s
    finally:
        c.close()
    raise AssertionError(f"events never satisfied the condition ({len(out)} read)")


def wait_exit(p: subprocess.Popen, timeout_s: float) -> int | None:
    try:
        return p.wait(timeout_s)
    except subprocess.TimeoutExpired:
        return None


__all__ = ["Cluster", "FAST", "committed_values", "committed_records", "read_events", "wait_exit", "os"]
