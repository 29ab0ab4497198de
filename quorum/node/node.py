"""One quorum node: the Raft core driven by an asyncio loop over real sockets and disks.

The loop owns the core. Everything that reaches the core (requests from peers, answers
to our requests, appends, timer ticks) goes through one inbox and is handled by the loop
task alone, so the core never sees two calls at once. One turn of the loop:

1. take what is in the inbox (up to a bound) and feed it to the core, then tick it if a
   deadline passed;
2. if any step appended, fsync the log (on the loop: it is shorter than a hand-over to a
   worker thread) — nothing that depends on those records has left the node yet;
3. send the steps' messages: responses complete the waiting server connection, requests
   go out on peer connections and their answers come back through the inbox;
4. resolve appends whose offsets are now committed, publish the events.

Publishing is fire-and-forget into the publisher's bounded buffer.
"""
from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import logging
import os
import random
import time
from dataclasses import dataclass
from typing import Any

from quorum.node.config import NodeConfig
from quorum.node.faults import Faults
from quorum.node.peer_client import PeerClients, PeerUnavailable
from quorum.node.publisher import EventPublisher
from quorum.node import requests as rq
from quorum.node.server import Server
from quorum.raft import messages as m
from quorum.raft.node import NotLeaderError, RaftNode
from quorum.raft.output import Output
from quorum.storage.durable_log import DurableLog, DurableQuorumStateStore
from quorum.storage.meta import check_or_claim, directory_id, directory_id_uuid
from quorum.storage.segment_log import RecoveryReport
from quorum.wire import apis as w
from quorum.wire import translate
from quorum.wire.codec import Request, encode_response

log = logging.getLogger(__name__)

MAX_STEPS_PER_TURN = 256   # inbox items per loop turn, so timers and I/O keep their pace


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class _AppendWait:
    values: list[bytes]
    future: asyncio.Future
    committed: bool = True   # False: answer once on the leader's disk (acks=1), not committed
    first: int = -1
    last: int = -1
    epoch: int = -1


class QuorumNode:
    def __init__(self, config: NodeConfig, publisher: EventPublisher | None = None, seed: int | None = None):
        self.config = config
        self.faults = Faults()
        self.publisher = publisher
        self.rng = random.Random(seed)
        self.names = translate.TopicNames([config.topic])
        self.recovery: RecoveryReport | None = None
        self._inbox: asyncio.Queue = asyncio.Queue()
        self._inbound: dict[int, asyncio.Future] = {}
        self._inbound_ids = itertools.count(1)
        self._lingering: list[_AppendWait] = []
        self._linger_deadline: float | None = None
        self._commit_waits: list[_AppendWait] = []
        self._stopping = False
        self._tasks: set[asyncio.Task] = set()
        self.core: RaftNode | None = None
        # replica id -> its data directory's id (uuid.UUID), learned from the Fetch requests it sends
        # (v17 ReplicaDirectoryId); DescribeQuorum v2 reports them. Our own comes from meta.properties.
        self._directory_ids: dict[int, Any] = {}

    # --- lifecycle ----------------------------------------------------------------------------------

    async def start(self) -> None:
        c = self.config
        check_or_claim(c.data_dir, c.cluster_id, c.node_id)
        self.directory_id = directory_id_uuid(directory_id(c.data_dir))
        self._directory_ids[c.node_id] = self.directory_id
        self.log, self.recovery = DurableLog.open(c.data_dir / "log", c.segment_bytes, c.fsync)
        for problem in self.recovery.problems:
            log.warning("node %d: log recovery: %s", c.node_id, problem)
        self.store = DurableQuorumStateStore(c.data_dir)
        stored = self.store.read()
        if stored is not None and stored.voters and tuple(sorted(stored.voters)) != tuple(sorted(c.voters)):
            log.warning("node %d: stored voter set %s differs from the configured %s; using the configured one",
                        c.node_id, list(stored.voters), sorted(c.voters))
        self.core = RaftNode(c.node_id, tuple(c.voters), self.log, self.store, self.rng, now_ms(),
                             c.raft_config(), c.cluster_id, c.topic)
        peers = {i: (e.host, e.port) for i, e in c.voters.items() if i != c.node_id}
        self.peers = PeerClients(c.node_id, peers, self.faults, c.max_frame_bytes)
        self.server = Server(c.listener.host, c.listener.port, self._handle_request, self.faults, c.max_frame_bytes)
        await self.server.start()
        self._control = await self._start_control()
        self._spawn(self._run(), "raft-loop")
        if self.publisher is not None:
            self._spawn(self._publish_metrics(), "metrics")

    def _spawn(self, coro, name: str) -> asyncio.Task:
        t = asyncio.create_task(coro, name=name)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)
        t.add_done_callback(self._crash_on_error)
        return t

    def _crash_on_error(self, task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is not None and not self._stopping:
            log.error("node %d: %s failed: %r", self.config.node_id, task.get_name(), task.exception(),
                      exc_info=task.exception())
            self.stopped.set_exception(task.exception()) if not self.stopped.done() else None

    @property
    def stopped(self) -> asyncio.Future:
        if not hasattr(self, "_stopped"):
            self._stopped = asyncio.get_running_loop().create_future()
        return self._stopped

    async def shutdown(self, graceful: bool = True) -> None:
        """Graceful: a leader resigns with EndQuorumEpoch (best effort, bounded) first."""
        if graceful and self.core is not None and self.core.is_leader:
            done = asyncio.get_running_loop().create_future()
            await self._inbox.put(("resign", done))
            resigned_epoch = self.core.epoch
            try:
                await asyncio.wait_for(done, 2)
            except asyncio.TimeoutError:
                pass
            # As Kafka's graceful shutdown does, keep serving (and voting) until a successor
            # is elected: with this voter gone, the others may need its vote to break a tie
            # between two successors. Bounded by the election timeout, before which this
            # resigned node cannot start an election of its own.
            deadline = asyncio.get_running_loop().time() + self.config.election_timeout_ms / 1000
            while asyncio.get_running_loop().time() < deadline and not (
                    self.core.epoch > resigned_epoch and self.core.leader_id not in (-1, self.config.node_id)):
                await asyncio.sleep(0.01)
        self._stopping = True
        await self._inbox.put(("stop",))
        # Cancel, but also bound the wait: asyncio.wait_for in Python 3.11 can swallow a
        # cancellation that races with its result, so the loop also checks `_stopping`.
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=2)
        for fut in self._inbound.values():  # requests the stopped loop will never answer
            if not fut.done():
                fut.set_result(None)
        await self.server.close()
        if self._control is not None:
            self._control.close()
            try:
                os.unlink(self.config.control_path)
            except OSError:
                pass
        self.peers.close()
        self.log.close()
        if not self.stopped.done():
            self.stopped.set_result(None)

    # --- the loop -------------------------------------------------------------------------------------

    async def _run(self) -> None:
        core = self.core
        loop = asyncio.get_running_loop()
        while not self._stopping:
            wait_ms = core.next_deadline() - now_ms()
            if self._linger_deadline is not None:
                wait_ms = min(wait_ms, (self._linger_deadline - loop.time()) * 1000)
            items = []
            if self._inbox.empty() and wait_ms > 0:
                try:
                    items.append(await asyncio.wait_for(self._inbox.get(), wait_ms / 1000))
                except asyncio.TimeoutError:
                    pass
            while len(items) < MAX_STEPS_PER_TURN and not self._inbox.empty():
                items.append(self._inbox.get_nowait())
            outputs: list[Output] = []
            for item in items:
                out = self._step(item)
                if out is not None:
                    outputs.append(out)
            if self._linger_deadline is not None and loop.time() >= self._linger_deadline:
                outputs.extend(self._append_lingering())
            now = now_ms()
            if now >= core.next_deadline():
                outputs.append(core.tick(now))
            if outputs:
                await self._execute(outputs)

    def _step(self, item: tuple) -> Output | None:
        kind = item[0]
        core = self.core
        if kind == "stop" or self._stopping:
            return None
        if kind == "msg":
            return core.handle(item[1], now_ms())
        if kind == "append":
            wait: _AppendWait = item[1]
            if not core.is_leader:
                wait.future.set_exception(NotLeaderError(core.leader_id, core.epoch))
                return None
            self._lingering.append(wait)
            if self._linger_deadline is None:
                self._linger_deadline = asyncio.get_running_loop().time() + self.config.append_linger_ms / 1000
            return None
        if kind == "resign":
            out = core.resign(now_ms())
            item[1].set_result(None)
            return out
        raise AssertionError(kind)

    def _append_lingering(self) -> list[Output]:
        waits, self._lingering, self._linger_deadline = self._lingering, [], None
        values = [v for wt in waits for v in wt.values]
        try:
            out = self.core.append(values, now_ms())
        except NotLeaderError as e:
            for wt in waits:
                if not wt.future.done():
                    wt.future.set_exception(e)
            return []
        first = out.append_offsets[0]
        for wt in waits:
            wt.first, wt.last, wt.epoch = first, first + len(wt.values) - 1, self.core.epoch
            first = wt.last + 1
            self._commit_waits.append(wt)
        return [out]

    async def _execute(self, outputs: list[Output]) -> None:
        if any(o.flush_log for o in outputs):
            slow = self.faults.slow_disk_ms / 1000
            self.log.segments.extra_flush_delay_s = slow
            if slow:   # an injected slow disk must not stop the node from serving meanwhile
                await asyncio.get_running_loop().run_in_executor(None, self.log.flush)
            else:
                # fsync on the loop itself: a worker thread cost more than the fsync (the hand-
                # over and the GIL coming back took ~1 ms a commit, profiled); what arrives
                # meanwhile waits in the socket buffers and is taken in one turn afterwards
                self.log.flush()
        for out in outputs:
            for msg in out.messages:
                if msg.is_request:
                    self._spawn(self._send_request(msg), "send")
                else:
                    fut = self._inbound.pop(msg.correlation_id, None)
                    if fut is not None and not fut.done():
                        fut.set_result(msg.body)
        self._resolve_commits()
        for out in outputs:
            for ev in out.events:
                if ev.TYPE == "state_change":
                    log.info("node %d: %s -> %s, epoch %d, leader %d (%s)", ev.node_id, ev.from_state,
                             ev.to_state, ev.epoch, ev.leader_id, ev.reason)
        if self.publisher is not None:
            for out in outputs:
                for ev in out.events:
                    self.publisher.publish(ev)

    def _resolve_commits(self) -> None:
        if not self._commit_waits:
            return
        core = self.core
        hw = core.high_watermark
        keep = []
        for wt in self._commit_waits:
            if wt.future.done():
                continue
            # committed: below the high watermark and still the record this leader wrote
            if not wt.committed and wt.last < self.log.flushed_end_offset():
                wt.future.set_result((wt.first, wt.last))
            elif wt.last < hw and wt.last < self.log.end_offset() and self.log.epoch_at(wt.last) == wt.epoch:
                wt.future.set_result((wt.first, wt.last))
            elif not core.is_leader or core.epoch != wt.epoch:
                wt.future.set_exception(NotLeaderError(core.leader_id, core.epoch))
            else:
                keep.append(wt)
        self._commit_waits = keep

    async def _send_request(self, msg: m.Message) -> None:
        api_key, version, body = translate.request_to_wire(msg.body)
        if api_key == w.FETCH and version >= 17:
            for t in body.topics:  # tell the leader which data directory this replica is
                for p in t.partitions:
                    p.replica_directory_id = self.directory_id
        timeout_s = self.config.request_timeout_ms / 1000
        try:
            resp = await self.peers.request(msg.destination, api_key, version, body, timeout_s)
            core_resp = translate.response_from_wire(api_key, version, resp, self.names)
            if isinstance(core_resp, m.FetchResponse) and self.faults.throttle_records_per_s > 0:
                core_resp = await self._throttled(core_resp)
        except (PeerUnavailable, Exception) as e:  # the core's own deadline handles the silence
            if not isinstance(e, PeerUnavailable):
                log.warning("node %d: request to %d failed: %r", self.config.node_id, msg.destination, e)
            return
        await self._inbox.put(("msg", m.Message(msg.destination, self.config.node_id, msg.correlation_id,
                                                core_resp)))

    async def _throttled(self, resp: m.FetchResponse) -> m.FetchResponse:
        """The fetched records a follower under a replication throttle keeps (the rest it fetches
        again later), after the throttle's wait."""
        parts = [p for t in resp.responses for p in t.partitions]
        offered = sum(len(p.records) for p in parts)
        if offered == 0:
            return resp
        kept, wait_s = self.faults.take_records(offered, time.monotonic())
        if wait_s > 0:
            await asyncio.sleep(wait_s)
        if kept == offered:
            return resp
        topics = []
        for t in resp.responses:
            trimmed = []
            for p in t.partitions:
                trimmed.append(dataclasses.replace(p, records=p.records[:kept]))
                kept -= len(trimmed[-1].records)
            topics.append(dataclasses.replace(t, partitions=tuple(trimmed)))
        return dataclasses.replace(resp, responses=tuple(topics))

    # --- inbound requests ---------------------------------------------------------------------------

    async def _handle_request(self, req: Request, peer: int | None) -> bytes | None:
        key = req.api.key
        if key == w.API_VERSIONS:
            return encode_response(req, rq.api_versions_response())
        if key == w.METADATA:
            return encode_response(req, self._metadata(req.body))
        if key == w.DESCRIBE_CLUSTER:
            return encode_response(req, rq.describe_cluster_response(
                cluster_id=self.config.cluster_id, brokers=self._brokers(), leader_id=self.core.leader_id))
        if key == w.PRODUCE:
            return await self._produce(req)
        if key == w.DESCRIBE_QUORUM:
            return await self._describe_quorum(req)
        core_req = translate.request_from_wire(key, req.version, req.body, self.names)
        if key == w.FETCH:
            self._note_directory_id(req)
        source = _source_of(core_req, peer)
        cid = next(self._inbound_ids)
        fut = asyncio.get_running_loop().create_future()
        self._inbound[cid] = fut
        await self._inbox.put(("msg", m.Message(source, self.config.node_id, cid, core_req)))
        limit = (self.config.request_timeout_ms + self.config.fetch_max_wait_ms) / 1000
        try:
            body = await asyncio.wait_for(fut, limit)
        except asyncio.TimeoutError:
            return None
        finally:
            self._inbound.pop(cid, None)
        if body is None:  # shutting down
            return None
        return encode_response(req, translate.response_to_wire(body, req.version))

    def _brokers(self) -> list[tuple[int, str, int]]:
        c = self.config
        out = [(i, e.host, e.port) for i, e in sorted(c.voters.items())]
        if not c.is_voter:
            out.append((c.node_id, c.listener.host, c.listener.port))
        return out

    def _metadata(self, body: Any) -> Any:
        core = self.core
        return rq.metadata_response(body, cluster_id=self.config.cluster_id, topic=self.config.topic,
                                    brokers=self._brokers(), leader_id=core.leader_id, epoch=core.epoch,
                                    voters=core.voters)

    async def _describe_quorum(self, req: Request) -> bytes | None:
        core = self.core
        leader = core.leader_id
        if not core.is_leader and leader >= 0 and leader != self.config.node_id and self.peers.knows(leader):
            # Forward to the leader, as Kafka brokers forward to the active controller.
            try:
                resp = await self.peers.request(leader, w.DESCRIBE_QUORUM, req.version, req.body,
                                                self.config.request_timeout_ms / 1000)
                resp._header = None  # re-headed with the client's correlation id
                return encode_response(req, resp)
            except PeerUnavailable:
                pass
        core_req = translate.describe_request_from_wire(req.body)
        parts = []
        topics = []
        for t in core_req.topics:
            parts = []
            for p in t.partitions:
                if t.topic_name == self.config.topic and p.partition_index == 0:
                    parts.append(core.describe_quorum(now_ms()))
                else:
                    parts.append(m.DescribeQuorumPartitionResponse(p.partition_index, 3, -1, -1, -1, (), (),
                                                                   "unknown topic or partition"))
            topics.append(m.DescribeQuorumTopicResponse(t.topic_name, tuple(parts)))
        body = m.DescribeQuorumResponse(0, tuple(topics))
        nodes = [(i, e.host, e.port) for i, e in sorted(self.config.voters.items())]
        return encode_response(req, translate.describe_response_to_wire(body, nodes, self._directory_ids))

    def _note_directory_id(self, req: Request) -> None:
        state = getattr(req.body, "replica_state", None)
        replica = state.replica_id if state is not None else getattr(req.body, "replica_id", -1)
        if replica is None or replica < 0:
            return  # a consumer, not a replica
        for t in req.body.topics:
            for p in t.partitions:
                d = getattr(p, "replica_directory_id", None)
                if d is not None and d.int != 0:
                    self._directory_ids[replica] = d

    async def _produce(self, req: Request) -> bytes | None:
        body = req.body
        results: dict[tuple[str, int], tuple[int, int]] = {}
        for t in body.topic_data:
            for p in t.partition_data:
                if t.name != self.config.topic or p.index != 0:
                    results[(t.name, p.index)] = (rq.UNKNOWN_TOPIC_OR_PARTITION, -1)
                    continue
                try:
                    values = rq.produce_values(p)
                except Exception as e:
                    log.warning("node %d: bad produce records: %s", self.config.node_id, e)
                    results[(t.name, p.index)] = (rq.CORRUPT_MESSAGE, -1)
                    continue
                try:
                    async with asyncio.timeout(max(body.timeout_ms, 1) / 1000):   # no task per append
                        first, _ = await self.append(values, committed=body.acks == -1)
                    results[(t.name, p.index)] = (0, first)
                except NotLeaderError:
                    results[(t.name, p.index)] = (m.Errors.NOT_LEADER_OR_FOLLOWER, -1)
                except asyncio.TimeoutError:
                    results[(t.name, p.index)] = (7, -1)  # REQUEST_TIMED_OUT
        if body.acks == 0:
            return None
        core = self.core
        return encode_response(req, rq.produce_response(body, req.version, results, (core.leader_id, core.epoch)))

    # --- the append path ------------------------------------------------------------------------------

    async def append(self, values: list[bytes], committed: bool = True) -> tuple[int, int]:
        """Append records as leader; returns their (first, last) offsets once they are
        committed (or, with committed=False, once they are on the leader's disk: Kafka's
        acks=1). Raises NotLeaderError (with the leader it knows) on a non-leader or a lost
        leadership."""
        wait = _AppendWait(list(values), asyncio.get_running_loop().create_future(), committed)
        await self._inbox.put(("append", wait))
        return await wait.future

    # --- metrics and status -------------------------------------------------------------------------------

    async def _publish_metrics(self) -> None:
        interval = self.config.metrics_interval_ms / 1000
        while not self._stopping:
            await asyncio.sleep(interval)
            self.publisher.publish(self.core.metrics_record(now_ms(), self.publisher.dropped_total))

    def status(self) -> dict:
        core = self.core
        return {"node_id": self.config.node_id, "state": core.state_name, "leader_id": core.leader_id,
                "epoch": core.epoch, "high_watermark": core.high_watermark,
                "log_end_offset": self.log.end_offset(), "flushed_end_offset": self.log.flushed_end_offset(),
                "faults": self.faults.describe(),
                "recovery_problems": list(self.recovery.problems) if self.recovery else [],
                "dropped_events_total": self.publisher.dropped_total if self.publisher else 0}

    # --- control socket (fault injection) ----------------------------------------------------------------

    async def _start_control(self):
        path = self.config.control_path
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        return await asyncio.start_unix_server(self._serve_control, path=str(path))

    async def _serve_control(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await reader.readline()
            try:
                reply = self.control(json.loads(line))
            except (ValueError, KeyError, TypeError) as e:
                reply = {"error": f"{type(e).__name__}: {e}"}
            writer.write((json.dumps(reply) + "\n").encode())
            await writer.drain()
        finally:
            writer.close()

    def control(self, cmd: dict) -> dict:
        op = cmd["op"]
        f = self.faults
        if op == "pause":
            f.paused = True
        elif op == "resume":
            f.paused = False
        elif op == "cut":
            f.cut([int(p) for p in cmd["peers"]], cmd.get("direction", "both"))
        elif op == "heal":
            f.cut_in.clear()
            f.cut_out.clear()
        elif op == "slow-disk":
            f.slow_disk_ms = int(cmd["ms"])
        elif op == "throttle":
            f.throttle(float(cmd["records_per_s"]))
        elif op == "clear":
            f.clear()
        elif op != "status":
            raise ValueError(f"unknown op {op!r}")
        if op != "status":
            log.warning("node %d: fault injection: %s -> %s", self.config.node_id, cmd, f.describe())
        return self.status()


def _source_of(req: m.Request, peer: int | None) -> int:
    """The node id a request comes from, as the core needs it to address its answer."""
    try:
        if isinstance(req, m.FetchRequest):
            return req.replica_id
        p = req.topics[0].partitions[0]
        if isinstance(req, m.VoteRequest):
            return p.candidate_id
        if isinstance(req, (m.BeginQuorumEpochRequest, m.EndQuorumEpochRequest)):
            return p.leader_id if p.leader_id >= 0 else (peer if peer is not None else -1)
    except IndexError:
        pass
    return peer if peer is not None else -1
