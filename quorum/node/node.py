"""One quorum node: the Raft core driven by an asyncio loop over real sockets and disks.

The loop owns the core. Everything that reaches the core (requests from peers, answers
to our requests, appends, timer ticks) goes through one inbox and is handled by the loop
task alone, so the core never sees two calls at once. One turn of the loop:

1. take what is in the inbox (up to a bound) and feed it to the core, then tick it if a
   deadline passed;
2. if any step appended, send the Fetch responses whose high watermark is already durable
   (as Kafka's leader does before its flush), then fsync the log (on the loop: it is
   shorter than a hand-over to a worker thread) — nothing that depends on those records
   has left the node yet;
3. answer appends whose offsets are now committed (a commit's answer does not wait for
   the high-watermark updates the same step sends to the followers);
4. send the other messages: a response is written to its connection from the loop's turn
   itself, requests go out on peer connections and their answers come back through the
   inbox; publish the events.

Publishing is fire-and-forget into the publisher's bounded buffer.

Beside the loop and the inbound requests here, the node's other concerns are mixed into
`QuorumNode` from a module each: appends.py (the append path and Produce), peer_requests.py
(the core's requests to peers), cluster_info.py (Metadata's brokers, DescribeQuorum) and
control.py (the fault-injection socket).
"""
from __future__ import annotations

import asyncio
import collections
import functools
import itertools
import logging
import os
import random
from typing import Any, Callable

from quorum.contract_records import metrics_record, records
from quorum.node.appends import AppendPath, AppendWait
from quorum.node.clock import now_ms
from quorum.node.cluster_info import ClusterInfo
from quorum.node.config import NodeConfig
from quorum.node.control import ControlSocket
from quorum.node.faults import Faults
from quorum.node.peer_clients import PeerClients
from quorum.node.peer_requests import PeerRequests
from quorum.node.publisher import EventPublisher
from quorum.node import requests as rq
from quorum.node.server import Reply, Server
from quorum.raft import messages as m
from quorum.raft.node import RaftNode
from quorum.raft.output import Output, leaves_before_flush
from quorum.storage.durable_log import DurableLog, DurableQuorumStateStore
from quorum.storage.meta import check_or_claim, directory_id, directory_id_uuid
from quorum.storage.segment_log import RecoveryReport
from quorum.wire import apis as w
from quorum.wire import fetch_codec, translate
from quorum.wire.codec import Request, encode_response

log = logging.getLogger(__name__)

MAX_STEPS_PER_TURN = 256   # inbox items per loop turn, so timers and I/O keep their pace


class QuorumNode(AppendPath, PeerRequests, ClusterInfo, ControlSocket):
    """One quorum node process's node (see the module's documentation)."""

    def __init__(self, config: NodeConfig, publisher: EventPublisher | None = None, seed: int | None = None):
        self.config = config
        self.faults = Faults()
        self.publisher = publisher
        self.rng = random.Random(seed)
        self.names = translate.TopicNames([config.topic])
        self.recovery: RecoveryReport | None = None
        # what reaches the core, in arrival order; `_wakeup` is the loop task waiting for it
        self._inbox: collections.deque[tuple] = collections.deque()
        self._wakeup: asyncio.Future | None = None
        # inbound requests the core has not answered yet: id -> (request, reply, expiry timer)
        self._inbound: dict[int, tuple[Request, Reply, asyncio.TimerHandle]] = {}
        self._inbound_ids = itertools.count(1)
        self._lingering: list[AppendWait] = []
        self._linger_deadline: float | None = None
        self._commit_waits: list[AppendWait] = []
        self._stopping = False
        self._cannot_follow: str | None = None   # the core's last reason, logged once
        self._tasks: set[asyncio.Task] = set()
        self.core: RaftNode | None = None
        # replica id -> its data directory's id (uuid.UUID), learned from the Fetch requests it sends
        # (v17 ReplicaDirectoryId); DescribeQuorum v2 reports them. Our own comes from meta.properties.
        self._directory_ids: dict[int, Any] = {}
        self._handlers = self._request_handlers()

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
        self.server = Server(c.listener.host, c.listener.port, self._handle_request, self.faults, c.max_frame_bytes,
                             read_fast=functools.partial(fetch_codec.read_request, names=self.names))
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
            self._post(("resign", done))
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
        self._post(("stop",))
        # Cancel, but also bound the wait: asyncio.wait_for in Python 3.11 can swallow a
        # cancellation that races with its result, so the loop also checks `_stopping`.
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=2)
        for _, reply, timer in self._inbound.values():  # requests the stopped loop will never answer
            timer.cancel()
            reply.send(None)
        self._inbound.clear()
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
            if not self._inbox and wait_ms > 0:
                await self._inbox_or_timeout(loop, wait_ms / 1000)
            inbox = self._inbox
            items = [inbox.popleft() for _ in range(min(len(inbox), MAX_STEPS_PER_TURN))]
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

    def _post(self, item: tuple) -> None:
        """Hand an item to the loop task (from any coroutine or callback on the loop)."""
        self._inbox.append(item)
        wakeup = self._wakeup
        if wakeup is not None and not wakeup.done():
            wakeup.set_result(None)

    async def _inbox_or_timeout(self, loop: asyncio.AbstractEventLoop, timeout_s: float) -> None:
        # a bare future and a timer: one hop from `_post` to the loop task, where a Queue's
        # get() under wait_for costs a task and three
        self._wakeup = wakeup = loop.create_future()
        timer = loop.call_later(timeout_s, _resolve, wakeup)
        try:
            await wakeup
        finally:
            timer.cancel()
            self._wakeup = None

    def _step(self, item: tuple) -> Output | None:
        kind = item[0]
        core = self.core
        if kind == "stop" or self._stopping:
            return None
        if kind == "msg":
            return core.handle(item[1], now_ms())
        if kind == "append":
            self._linger(item[1])
            return None
        if kind == "resign":
            out = core.resign(now_ms())
            item[1].set_result(None)
            return out
        raise AssertionError(kind)

    async def _execute(self, outputs: list[Output]) -> None:
        flush = any(o.flush_log for o in outputs)
        if flush:
            # Fetch responses whose high watermark is durable leave before the fsync, as
            # Kafka's leader lets parked fetches return before it flushes: the followers
            # append while this node's disk works.
            flushed = self.log.flushed_end_offset()
            for out in outputs:
                for msg in out.messages:
                    if leaves_before_flush(msg, flushed):
                        self._respond(msg)
            slow = self.faults.slow_disk_ms / 1000
            self.log.segments.extra_flush_delay_s = slow
            if slow:   # an injected slow disk must not stop the node from serving meanwhile
                await asyncio.get_running_loop().run_in_executor(None, self.log.flush)
            else:
                # fsync on the loop itself: a worker thread cost more than the fsync (the hand-
                # over and the GIL coming back took ~1 ms a commit, profiled); what arrives
                # meanwhile waits in the socket buffers and is taken in one turn afterwards
                self.log.flush()
        self._resolve_commits()
        for out in outputs:
            for msg in out.messages:
                if msg.is_request:
                    self._send_request(msg)
                else:
                    self._respond(msg)   # a no-op for one already sent before the flush
        published = [records(self.core, out.observations) for out in outputs]
        for out, recs in zip(outputs, published):
            if out.cannot_follow is not None and out.cannot_follow != self._cannot_follow:
                log.error("node %d: %s", self.config.node_id, out.cannot_follow)
            if out.cannot_follow is not None or out.appended:
                self._cannot_follow = out.cannot_follow
            for ev in recs:
                if ev.TYPE == "state_change":
                    log.info("node %d: %s -> %s, epoch %d, leader %d (%s)", ev.node_id, ev.from_state,
                             ev.to_state, ev.epoch, ev.leader_id, ev.reason)
        if self.publisher is not None:
            for recs in published:
                for ev in recs:
                    self.publisher.publish(self.faults.stamped(ev))

    def _respond(self, msg: m.Message) -> None:
        """Write the core's answer to an inbound request on its connection, now."""
        entry = self._inbound.pop(msg.correlation_id, None)
        if entry is None:
            return   # expired, or already sent
        req, reply, timer = entry
        timer.cancel()
        try:
            if req.api.key == w.FETCH and req.version == fetch_codec.VERSION:
                reply.send(fetch_codec.encode_response(msg.body, req.correlation_id))
            else:
                reply.send(encode_response(req, translate.response_to_wire(msg.body, req.version)))
        except Exception as e:   # an encoding bug drops that connection, not the node
            reply.fail(e)

    def _expire_inbound(self, cid: int) -> None:
        entry = self._inbound.pop(cid, None)
        if entry is not None:
            entry[1].send(None)

    # --- inbound requests ---------------------------------------------------------------------------

    def _request_handlers(self) -> dict[int, Callable[[Request, int | None, Reply], None]]:
        """How the node answers each API outside the Raft core, by API key; every other request
        is the core's (`_to_core`)."""
        return {
            w.API_VERSIONS: lambda req, peer, reply: reply.send(encode_response(req, rq.api_versions_response())),
            w.METADATA: lambda req, peer, reply: reply.send(encode_response(req, self._metadata(req.body))),
            w.DESCRIBE_CLUSTER: lambda req, peer, reply: reply.send(encode_response(req, rq.describe_cluster_response(
                cluster_id=self.config.cluster_id, brokers=self._brokers(), leader_id=self.core.leader_id))),
            w.PRODUCE: lambda req, peer, reply: self._produce(req, reply),
            w.DESCRIBE_QUORUM: lambda req, peer, reply: reply.send_when_done(self._describe_quorum(req)),
        }

    def _handle_request(self, req: Request, peer: int | None, reply: Reply) -> None:
        self._handlers.get(req.api.key, self._to_core)(req, peer, reply)

    def _to_core(self, req: Request, peer: int | None, reply: Reply) -> None:
        """A Raft request: the core answers it from the loop, which writes the reply."""
        if isinstance(req.body, fetch_codec.DecodedRequest):
            core_req = req.body.message
            self._note_directory(core_req.replica_id, req.body.directory_id)
        else:
            core_req = translate.request_from_wire(req.api.key, req.version, req.body, self.names)
            if req.api.key == w.FETCH:
                self._note_directory_id(req)
        cid = next(self._inbound_ids)
        limit = (self.config.request_timeout_ms + self.config.fetch_max_wait_ms) / 1000
        timer = asyncio.get_running_loop().call_later(limit, self._expire_inbound, cid)
        self._inbound[cid] = (req, reply, timer)
        self._post(("msg", m.Message(_source_of(core_req, peer), self.config.node_id, cid, core_req)))

    # --- metrics and status -------------------------------------------------------------------------------

    async def _publish_metrics(self) -> None:
        interval = self.config.metrics_interval_ms / 1000
        while not self._stopping:
            await asyncio.sleep(interval)
            self.publisher.publish(self.faults.stamped(metrics_record(self.core, now_ms(),
                                                                      self.publisher.dropped_total)))

    def status(self) -> dict:
        core = self.core
        return {"node_id": self.config.node_id, "state": core.state_name, "leader_id": core.leader_id,
                "epoch": core.epoch, "high_watermark": core.high_watermark,
                "log_end_offset": self.log.end_offset(), "flushed_end_offset": self.log.flushed_end_offset(),
                "faults": self.faults.describe(),
                "recovery_problems": list(self.recovery.problems) if self.recovery else [],
                "cannot_follow": self._cannot_follow,
                "dropped_events_total": self.publisher.dropped_total if self.publisher else 0}


def _resolve(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


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
