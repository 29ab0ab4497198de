"""The append path, as part of `QuorumNode` (node.py): appends, the node's own (`append`) and
Kafka Produce requests', linger up to append.linger.ms and reach the core as one batch; each
is answered once its records are committed (or, with acks=1, on the leader's disk), or failed
when the leadership it was appended under is lost."""
from __future__ import annotations

import asyncio
import functools
import logging
from dataclasses import dataclass
from typing import Callable

from quorum.kafka_client.wire_connection import settle
from quorum.node import requests as rq
from quorum.node.clock import now_ms
from quorum.node.server import Reply
from quorum.raft import messages as m
from quorum.raft.errors import NotLeaderError
from quorum.raft.output import Output
from quorum.wire.codec import Request, encode_response

log = logging.getLogger("quorum.node.node")   # its lines are the node's

# How an append's outcome is told, once: (first, last) offsets, or the exception.
AppendCallback = Callable[["tuple[int, int] | None", "BaseException | None"], None]


@dataclass
class AppendWait:
    """One append waiting for its answer."""
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


class AppendPath:
    """QuorumNode's appends, mixed into it: `self` is the node."""

    async def append(self, values: list[bytes], committed: bool = True) -> tuple[int, int]:
        """Append records as leader; returns their (first, last) offsets once they are
        committed (or, with committed=False, once they are on the leader's disk: Kafka's
        acks=1). Raises NotLeaderError (with the leader it knows) on a non-leader or a lost
        leadership."""
        fut = asyncio.get_running_loop().create_future()
        self._post(("append", AppendWait(list(values), settle(fut), committed)))
        return await fut

    def _linger(self, wait: AppendWait) -> None:
        """Hold an append for the next batch (append.linger.ms), or fail it on a non-leader."""
        core = self.core
        if not core.is_leader:
            wait.fail(NotLeaderError(core.leader_id, core.epoch))
            return
        self._lingering.append(wait)
        if self._linger_deadline is None:
            self._linger_deadline = asyncio.get_running_loop().time() + self.config.append_linger_ms / 1000

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
            self._post(("append", AppendWait(values, functools.partial(appended, key), body.acks == -1)))
