"""A simulated fleet of Kafka KRaft clusters served from one process: the load fixture the fleet
collector is measured against (correctness stays proven on real Kafka, tests/kafka_quorum).

N clusters of 3 combined nodes (fleet_model.py); every node has
  - a port speaking Kafka's wire protocol, answered by the nodes' own server and answer builders
    (quorum.node.server, quorum.node.requests, quorum.wire): ApiVersions, Metadata (the brokers
    are the cluster's 3 nodes), DescribeCluster (its cluster id) and DescribeQuorum v0-v2 (the
    leader's answer, with v2's directory ids and nodes; any node answers it, as a broker
    forwards it to the active controller);
  - a port serving its JMX exporter's /metrics (fleet_http.py), kept alive.
All ports are on one host (127.0.0.1), below the ephemeral range, served by one asyncio loop.

A cluster can be made to hang: its nodes accept connections and read requests, and answer
nothing until it is un-hung (as SIGSTOPped processes; the answers held then go out).

  python -m quorum.synthetic.simulated_fleet --clusters 500

prints one JSON line, {"clusters": [{"cluster_id", "bootstrap", "node_metrics": {id: url}}, ...],
"nofile": the open-files limit}, then reads commands on stdin, one a line, each answered by a JSON
line: `hang I J ...`, `unhang I J ...` (cluster indices; `all` for every one), `status`. It
ends at the end of stdin or on SIGTERM.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import threading
import time
from typing import Iterable

from quorum.local_kafka.loopback_ports import free_port
from quorum.node import requests as rq
from quorum.node.faults import Faults
from quorum.node.server import Reply, Server
from quorum.open_files import raise_soft_limit
from quorum.synthetic.fleet_http import MetricsEndpoint
from quorum.synthetic.fleet_model import DEFAULT_ELECTION_PERIOD_MS, TOPIC, ClusterModel, describe_response
from quorum.wire import apis as w
from quorum.wire import translate
from quorum.wire.codec import Request, encode_response

HOST = "127.0.0.1"
MAX_FRAME_BYTES = 1 << 20
BIND_ATTEMPTS = 20
FDS_PER_NODE = 8  # two listeners and a few connections each; the limit is raised to fit


def now_ms() -> int:
    return int(time.time() * 1000)


class SimulatedCluster:
    """One cluster's nodes: their ports, their answers, and the gate a hang closes."""

    def __init__(self, model: ClusterModel):
        self.model = model
        self.awake = asyncio.Event()
        self.awake.set()
        self.kafka_ports: dict[int, int] = {}
        self.metrics: dict[int, MetricsEndpoint] = {}
        self.servers: list[Server] = []
        self.kafka_answered = 0

    def brokers(self) -> list[tuple[int, str, int]]:
        return [(i, HOST, p) for i, p in sorted(self.kafka_ports.items())]

    def endpoints(self) -> dict:
        return {"cluster_id": self.model.cluster_id,
                "bootstrap": ",".join(f"{HOST}:{p}" for _, p in sorted(self.kafka_ports.items())),
                "node_metrics": {str(i): f"http://{HOST}:{e.port}/metrics" for i, e in sorted(self.metrics.items())}}

    def handle(self, req: Request, peer: int | None, reply: Reply) -> None:
        """The node's handler (quorum.node.server): answered now, or once the cluster wakes."""
        if self.awake.is_set():
            reply.send(self.answer(req))
        else:
            reply.send_when_done(self._answer_when_awake(req))

    async def _answer_when_awake(self, req: Request) -> bytes:
        await self.awake.wait()
        return self.answer(req)

    def answer(self, req: Request) -> bytes:
        self.kafka_answered += 1
        t = now_ms()
        key = req.api.key
        if key == w.API_VERSIONS:
            return encode_response(req, rq.api_versions_response())
        view = self.model.view(t)
        if key == w.METADATA:
            return encode_response(req, rq.metadata_response(
                req.body, cluster_id=self.model.cluster_id, topic=TOPIC, brokers=self.brokers(),
                leader_id=view.leader_id, epoch=view.epoch, voters=self.model.voter_ids))
        if key == w.DESCRIBE_CLUSTER:
            return encode_response(req, rq.describe_cluster_response(
                cluster_id=self.model.cluster_id, brokers=self.brokers(), leader_id=view.leader_id))
        if key == w.DESCRIBE_QUORUM:
            body = describe_response(self.model, translate.describe_request_from_wire(req.body), t)
            return encode_response(req, translate.describe_response_to_wire(body, self.brokers(),
                                                                            self.model.directory_ids))
        raise ValueError(f"{req.api.name} is not served by a simulated node")  # drops that connection

    async def start(self) -> None:
        for node in self.model.voter_ids:
            server = await _bound(lambda port: Server(HOST, port, self.handle, Faults(), MAX_FRAME_BYTES))
            self.servers.append(server)
            self.kafka_ports[node] = server.port
            self.metrics[node] = await _bound(
                lambda port, node=node: MetricsEndpoint(HOST, port, lambda: self.model.exporter_text(node, now_ms()),
                                                        self.awake))

    async def close(self) -> None:
        self.awake.set()  # held answers go out rather than leaving tasks behind
        for server in self.servers:
            await server.close()
        for endpoint in self.metrics.values():
            await endpoint.close()


async def _bound(make):
    """`make(port)` started on a free loopback port; another port when one was taken meanwhile."""
    for attempt in range(BIND_ATTEMPTS):
        listener = make(free_port(HOST))
        try:
            await listener.start()
            return listener
        except OSError:
            if attempt == BIND_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def raise_open_files_limit(clusters: int) -> int:
    """Raises the soft RLIMIT_NOFILE to what the fleet needs (at most the hard limit): 3,000
    listeners for 500 clusters, and their connections. Returns the limit now in force."""
    needed = 256 + clusters * 3 * FDS_PER_NODE
    soft, hard = raise_soft_limit(needed)
    if soft < needed:
        raise RuntimeError(f"{clusters} clusters need about {needed} open files; the hard limit is {hard}")
    return soft


class SimulatedFleet:
    """N simulated clusters on one asyncio loop; `start`, `hang`, `unhang` and `close` run on it."""

    def __init__(self, clusters: int, seed: int = 0, election_period_ms: int = DEFAULT_ELECTION_PERIOD_MS):
        self.nofile = raise_open_files_limit(clusters)
        start = now_ms()
        self.models = [ClusterModel(i, seed, start, election_period_ms) for i in range(clusters)]
        self.clusters: list[SimulatedCluster] = []

    async def start(self) -> "SimulatedFleet":
        for model in self.models:
            cluster = SimulatedCluster(model)
            await cluster.start()
            self.clusters.append(cluster)
        return self

    def hang(self, indices: Iterable[int]) -> None:
        for i in indices:
            self.clusters[i].awake.clear()

    def unhang(self, indices: Iterable[int]) -> None:
        for i in indices:
            self.clusters[i].awake.set()

    def hung(self) -> list[int]:
        return [i for i, c in enumerate(self.clusters) if not c.awake.is_set()]

    def endpoints(self) -> list[dict]:
        return [c.endpoints() for c in self.clusters]

    def answered(self) -> dict[str, int]:
        return {"kafka": sum(c.kafka_answered for c in self.clusters),
                "metrics": sum(e.answered for c in self.clusters for e in c.metrics.values())}

    async def close(self) -> None:
        for cluster in self.clusters:
            await cluster.close()


class FleetThread:
    """A simulated fleet on a loop of its own in a thread of this process (for tests); its
    methods may be called from any thread."""

    def __init__(self, clusters: int, seed: int = 0, **kw):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="simulated-fleet", daemon=True)
        self._thread.start()
        self.fleet = self._run(SimulatedFleet(clusters, seed, **kw).start(), 120)

    def _run(self, coro, timeout_s: float = 10):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    async def _call(self, fn, *args):
        return fn(*args)

    def endpoints(self) -> list[dict]:
        return self._run(self._call(self.fleet.endpoints))

    def hang(self, *indices: int) -> None:
        self._run(self._call(self.fleet.hang, indices))

    def unhang(self, *indices: int) -> None:
        self._run(self._call(self.fleet.unhang, indices))

    def close(self) -> None:
        self._run(self.fleet.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)

    def __enter__(self) -> "FleetThread":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def command(fleet: SimulatedFleet, line: str) -> dict:
    """One control line's effect and answer."""
    verb, *args = line.split()
    everyone = range(len(fleet.clusters))
    try:
        indices = list(everyone) if args == ["all"] else [int(a) for a in args]
        if any(not 0 <= i < len(fleet.clusters) for i in indices):
            raise ValueError(f"cluster indices are 0..{len(fleet.clusters) - 1}")
    except ValueError as e:
        return {"error": str(e)}
    if verb == "hang":
        fleet.hang(indices)
    elif verb == "unhang":
        fleet.unhang(indices)
    elif verb != "status":
        return {"error": f"unknown command {verb!r} (hang, unhang, status)"}
    return {"hung": fleet.hung(), "answered": fleet.answered()}


async def serve(args: argparse.Namespace) -> None:
    fleet = await SimulatedFleet(args.clusters, args.seed, args.election_period_ms).start()
    print(json.dumps({"clusters": fleet.endpoints(), "nofile": fleet.nofile}), flush=True)
    loop = asyncio.get_running_loop()
    stopped = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stopped.set)
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    lines = asyncio.ensure_future(reader.readline())
    stop = asyncio.ensure_future(stopped.wait())
    while True:
        await asyncio.wait({lines, stop}, return_when=asyncio.FIRST_COMPLETED)
        if stop.done() or not lines.result():
            break
        text = lines.result().decode().strip()
        if text:
            print(json.dumps(command(fleet, text)), flush=True)
        lines = asyncio.ensure_future(reader.readline())
    lines.cancel()
    await fleet.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m quorum.synthetic.simulated_fleet", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clusters", type=int, default=500, help="clusters of 3 nodes (default %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="the clusters' offsets, epochs and leaders")
    parser.add_argument("--election-period-ms", type=int, default=DEFAULT_ELECTION_PERIOD_MS,
                        help="how often each cluster's leadership moves on (default %(default)s)")
    args = parser.parse_args(argv)
    asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
