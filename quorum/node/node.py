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
"""
from __future__ import annotations

import asyncio
import collections
import dataclasses
import functools
import itertools
import json
import logging
import os
import random
import time
from dataclasses import dataclass
from typing import Any, Callable

from quorum.contract_records import metrics_record, records
from quorum.node.config import NodeConfig
from quorum.node.faults import Faults
from quorum.node.peer_client import Codec, PeerClients, PeerUnavailable, settle
from quorum.node.publisher import EventPublisher
from quorum.node import requests as rq
from quorum.node.server import Reply, Server
from quorum.raft import messages as m
from quorum.raft.errors import NotLeaderError
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


def now_ms() -> int:
    return int(time.time() * 1000)


# How an append's outcome is told, once: (first, last) offsets, or the exception.
AppendCallback = Callable[["tuple[int, int] | None", "BaseException | None"], None]


@dataclass
class _AppendWait:
    values: list[bytes]
    callback: AppendCallback
    committed: bool = True   # False: answer once on the leader's disk (acks=1), not committed
    first: int = -1
    last: int = -1
    epoch: int = -1
    finished: bool = False

    def succeed(self) -> None:
        if not self.finished:
            self.finished = True
            self.callback((self.first, self.last), None)

    def fail(self, error: BaseException) -> None:
        if not self.finished:
            self.finished = True
            self.callback(None, error)


class QuorumNode:
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
        self._lingering: list[_AppendWait] = []
        self._linger_deadline: float | None = None
        self._commit_waits: list[_AppendWait] = []
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
            wait: _AppendWait = item[1]
            if not core.is_leader:
                wait.fail(NotLeaderError(core.leader_id, core.epoch))
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
                wt.fail(e)
            return []
        first = out.append_offsets[0]
        for wt in waits:
            wt.first, wt.last, wt.epoch = first, first + len(wt.values) - 1, self.core.epoch
            first = wt.last + 1
            self._commit_waits.append(wt)
        return [out]

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

    def _resolve_commits(self) -> None:
        if not self._commit_waits:
            return
        core = self.core
        hw = core.high_watermark
        keep = []
        for wt in self._commit_waits:
            if wt.finished:
                continue
            # committed: below the high watermark and still the record this leader wrote
            if not wt.committed and wt.last < self.log.flushed_end_offset():
                wt.succeed()
            elif wt.last < hw and wt.last < self.log.end_offset() and self.log.epoch_at(wt.last) == wt.epoch:
                wt.succeed()
            elif not core.is_leader or core.epoch != wt.epoch:
                wt.fail(NotLeaderError(core.leader_id, core.epoch))
            else:
                keep.append(wt)
        self._commit_waits = keep

    def _send_request(self, msg: m.Message) -> None:
        if isinstance(msg.body, m.FetchRequest) and w.FETCH_VERSION == fetch_codec.VERSION:
            api_key, version = w.FETCH, fetch_codec.VERSION
            codec: Codec = _LeanFetch(msg.body, self.directory_id, self.names)
        else:
            codec = Codec(*translate.request_to_wire(msg.body))
            api_key, version = codec.api_key, codec.version

        def answered(resp: Any, error: BaseException | None) -> None:
            if error is not None:   # the core's own deadline handles the silence
                if not isinstance(error, PeerUnavailable):
                    log.warning("node %d: request to %d failed: %r", self.config.node_id, msg.destination, error)
                return
            try:
                core_resp = resp if isinstance(codec, _LeanFetch) else translate.response_from_wire(
                    api_key, version, resp, self.names)
            except Exception as e:
                log.warning("node %d: request to %d failed: %r", self.config.node_id, msg.destination, e)
                return
            if isinstance(core_resp, m.FetchResponse) and self.faults.throttle_records_per_s > 0:
                self._spawn(self._post_throttled(msg, core_resp), "throttle")
            else:
                self._post_answer(msg, core_resp)

        self.peers.send(msg.destination, codec, self.config.request_timeout_ms / 1000, answered)

    def _post_answer(self, request: m.Message, core_resp: m.Response) -> None:
        self._post(("msg", m.Message(request.destination, self.config.node_id, request.correlation_id, core_resp)))

    async def _post_throttled(self, request: m.Message, resp: m.FetchResponse) -> None:
        self._post_answer(request, await self._throttled(resp))

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
        for t in req.body.topics:
            for p in t.partitions:
                self._note_directory(replica, getattr(p, "replica_directory_id", None))

    def _note_directory(self, replica: int | None, directory: Any) -> None:
        if replica is None or replica < 0:
            return  # a consumer, not a replica
        if directory is not None and directory.int != 0:
            self._directory_ids[replica] = directory

    def _produce(self, req: Request, reply: Reply) -> None:
        """Append each partition's records (only the quorum topic's partition 0 exists) and
        answer once all are committed (acks=-1), on the leader's disk (acks=1) or at the
        request's timeout; acks=0 has no answer. The answer is written from the loop's turn
        that commits, like the core's own responses."""
        body = req.body
        results: dict[tuple[str, int], tuple[int, int]] = {}
        appends: list[tuple[tuple[str, int], list[bytes]]] = []
        for t in body.topic_data:
            for p in t.partition_data:
                if t.name != self.config.topic or p.index != 0:
                    results[(t.name, p.index)] = (rq.UNKNOWN_TOPIC_OR_PARTITION, -1)
                    continue
                try:
                    appends.append(((t.name, p.index), rq.produce_values(p)))
                except Exception as e:
                    log.warning("node %d: bad produce records: %s", self.config.node_id, e)
                    results[(t.name, p.index)] = (rq.CORRUPT_MESSAGE, -1)
        if body.acks == 0:
            reply.send(None)
        waiting = {key for key, _ in appends}

        def answer() -> None:
            timer.cancel()
            if body.acks != 0:
                core = self.core
                for key in waiting:
                    results[key] = (7, -1)  # REQUEST_TIMED_OUT
                reply.send(encode_response(req, rq.produce_response(body, req.version, results,
                                                                    (core.leader_id, core.epoch))))

        def appended(key: tuple[str, int], offsets: tuple[int, int] | None, error: BaseException | None) -> None:
            if key not in waiting:
                return   # answered at the timeout already
            waiting.discard(key)
            if error is None:
                results[key] = (0, offsets[0])
            elif isinstance(error, NotLeaderError):
                results[key] = (m.Errors.NOT_LEADER_OR_FOLLOWER, -1)
            else:
                results[key] = (rq.UNKNOWN_SERVER_ERROR, -1)
            if not waiting:
                answer()

        def timed_out() -> None:
            if waiting:
                answer()
                waiting.clear()

        timer = asyncio.get_running_loop().call_later(max(body.timeout_ms, 1) / 1000, timed_out)
        if not appends:
            answer()
        for key, values in appends:
            self._post(("append", _AppendWait(values, functools.partial(appended, key), body.acks == -1)))

    # --- the append path ------------------------------------------------------------------------------

    async def append(self, values: list[bytes], committed: bool = True) -> tuple[int, int]:
        """Append records as leader; returns their (first, last) offsets once they are
        committed (or, with committed=False, once they are on the leader's disk: Kafka's
        acks=1). Raises NotLeaderError (with the leader it knows) on a non-leader or a lost
        leadership."""
        fut = asyncio.get_running_loop().create_future()
        self._post(("append", _AppendWait(list(values), settle(fut), committed)))
        return await fut

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
        elif op == "skew":
            f.clock_skew_ms = int(cmd["ms"])
        elif op == "clear":
            f.clear()
        elif op != "status":
            raise ValueError(f"unknown op {op!r}")
        if op != "status":
            log.warning("node %d: fault injection: %s -> %s", self.config.node_id, cmd, f.describe())
        return self.status()


class _LeanFetch(Codec):
    """A follower's Fetch in the lean v17 codec: the core's request to bytes, the answer
    straight to the core's response."""

    def __init__(self, request: m.FetchRequest, directory_id: Any, names: translate.TopicNames) -> None:
        super().__init__(w.FETCH, fetch_codec.VERSION, request)
        self.directory_id, self.names = directory_id, names

    def encode(self, correlation_id: int, client_id: str) -> bytes:
        return fetch_codec.encode_request(self.body, correlation_id, client_id, self.directory_id)

    def decode(self, payload: bytes) -> m.FetchResponse:
        return fetch_codec.read_response(payload, self.names)


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
