"""DescribeQuorum of one watched cluster, as a coroutine: one poll per call, never longer than
its timeout, never raising. Any number of clusters are polled side by side on one event loop
(quorum.kafka_watch.fleet), each on its own kept-alive connections (quorum_links).

Through the brokers (`--bootstrap-server`), one broker is asked at a time: the one that answered
last, then the others in the order given. A broker that refuses the connection is passed over
at once; one silent past the hedge delay (30 % of the timeout, at most 1 s: a frozen process,
a long GC pause) is left waiting and the next is asked too, the first answer winning; a broker
that was silent or unreachable is asked last for SUSPECT_S. An error answer (no leader:
NOT_LEADER_OR_FOLLOWER) is an answer. A broker answers by forwarding to the controller it
believes leads, and waits out its own request timeout when that controller hangs, so after a
poll through the brokers without an answer the controllers that the last answer named (v2's
`nodes`) are asked directly as well, until the brokers answer again (the same client
properties; controllers that refuse them are named in the log, and the brokers alone are asked).

Through the controllers (`--bootstrap-controller`, KIP-919), every controller given and every
voter the answers name is asked at once: the leader answers with the quorum, the others with
NOT_LEADER_OR_FOLLOWER, and the first quorum answer ends the poll.

Failures are named as Kafka's tools name them: Kafka's error answer (CLUSTER_AUTHORIZATION_FAILED
when the principal lacks DESCRIBE on the CLUSTER), authentication_failed or tls_failed for the
collector's own credentials and trust, unknown_host, connection_refused when every node refused
the connection, and timeout.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from quorum.kafka_client import kafka_failures
from quorum.kafka_client.wire_connection import PeerUnavailable
from quorum.kafka_watch.bootstrap_race import hedge_delay_s
from quorum.kafka_watch.poll_outcome import PollOutcome
from quorum.kafka_watch.quorum_info import DescribeError, QuorumInfo, kafka_error_name
from quorum.kafka_watch.quorum_links import Endpoint, QuorumLinks, endpoints

log = logging.getLogger("quorum.kafka_watch.collector")

CLIENT_ID = "quorum-collector"
HEDGE_FRACTION = 0.3  # a node silent for this share of a poll's timeout: another is asked too
SUSPECT_S = 30.0  # a broker that was silent or unreachable is asked last for this long


@dataclass(frozen=True)
class _Ask:
    at: Endpoint
    primary: bool   # one of the path's own nodes (not a controller asked while the brokers are blind)
    final: bool     # its error answer ends the poll (a broker's: it speaks for the leader)


class ClusterPoller:
    """`await poll()` never raises and never outlasts `timeout_ms`; `close()` ends its
    connections. Give `brokers` or `controllers` (comma-separated host:port)."""

    def __init__(self, *, brokers: str | None = None, controllers: str | None = None, timeout_ms: int,
                 client_config: dict[str, Any] | None = None, topic: str = "__cluster_metadata", partition: int = 0,
                 want_cluster_id: bool = True, name: str = ""):
        if (brokers is None) == (controllers is None):
            raise ValueError("give the brokers or the controllers")
        self.bootstrap = brokers if brokers is not None else controllers
        self.via_controllers = controllers is not None
        self.name = name or self.bootstrap  # for the log
        self.timeout_ms = timeout_ms
        self.want_cluster_id = want_cluster_id
        self.cluster_id_error: str | None = None  # why the cluster gave no id (DescribeCluster's error)
        self.blind = False  # the last poll through the brokers gave no answer: the controllers are asked too
        self._given = endpoints(self.bootstrap)
        self._links = QuorumLinks(client_config, CLIENT_ID, topic, partition)
        self._learned: dict[int, Endpoint] = {}  # voter -> its controller listener, from v2 answers
        self._broker_ids: dict[Endpoint, int] = {}  # a given broker's node id, from DescribeCluster
        self._preferred: Endpoint | None = None
        self._suspects: dict[Endpoint, float] = {}
        self._hedge_s = hedge_delay_s(timeout_ms, HEDGE_FRACTION)
        self._refused_by_controllers: str | None = None
        self._brokers_answered = False  # during the last poll

    async def warm_up(self, timeout_s: float) -> str | None:
        """Agree the DescribeQuorum version with the nodes given, and learn the cluster id and
        the brokers' ids, before the first poll, so that no poll's timeout pays for it. All are
        asked at once and the first answer ends it: a node that hangs delays nothing. A cluster
        that cannot be reached now is left to the polls to report."""
        deadline = time.monotonic() + timeout_s
        ask_id = self.want_cluster_id or not self.via_controllers

        async def one(at: Endpoint) -> str | None:
            await self._links.agree(at, deadline)
            return await self._cluster_id(at, deadline, learn_brokers=True) if ask_id else None
        tasks = [asyncio.ensure_future(one(at)) for at in self._given]
        try:
            for next_done in asyncio.as_completed(tasks, timeout=timeout_s):
                try:
                    cluster_id = await next_done
                except Exception:  # noqa: BLE001 - the next node, then the polls
                    continue
                if cluster_id or not ask_id:
                    return cluster_id
        except asyncio.TimeoutError:
            pass
        finally:
            for task in tasks:
                task.cancel()
        return None

    async def poll(self) -> PollOutcome:
        start = time.monotonic()
        deadline = start + self.timeout_ms / 1000
        self._brokers_answered = False
        try:
            # every wait of a poll ends by its deadline (each request's own timer, the hedge's
            # wait, the connection's and the login's timeouts): no timer over the whole poll
            node_id, info, cluster_id = await self._poll(deadline)
        except DescribeError as e:
            outcome = PollOutcome(_ms_since(start), getattr(e, "answered_by", -1), error_code=e.error_code,
                                  error=e.error or "bad_answer", leader_id=e.leader_id, leader_epoch=e.leader_epoch,
                                  detail=str(e))
        except Exception as e:  # noqa: BLE001 - the cluster is the thing being watched: its failures are data
            code, name = failure(e)
            outcome = PollOutcome(_ms_since(start), error=name, error_code=code, detail=str(e))
        else:
            outcome = PollOutcome(_ms_since(start), node_id, info=info, cluster_id=cluster_id)
        if not self.via_controllers:
            self._note_path(outcome)
        return outcome

    def close(self) -> None:
        self._links.close()

    # --- one poll ---------------------------------------------------------------------------------

    async def _poll(self, deadline: float) -> tuple[int, QuorumInfo, str | None]:
        queue = self._order()
        pending: dict[asyncio.Future, _Ask] = {}

        def ask(a: _Ask) -> None:
            pending[self._links.ask_describe(a.at, deadline)] = a

        if self.via_controllers:
            for at in queue:
                ask(_Ask(at, primary=True, final=False))
            queue = []
        else:
            ask(_Ask(queue.pop(0), primary=True, final=True))
            if self.blind:
                for at in self._controllers():
                    ask(_Ask(at, primary=False, final=False))
        error_answer: DescribeError | None = None
        failures: list[BaseException] = []
        primaries = 1 if not self.via_controllers else len(pending)
        try:
            while pending:
                wait_s = max(0.0, deadline - time.monotonic())
                if queue:
                    wait_s = min(wait_s, self._hedge_s)
                done, _ = await asyncio.wait(list(pending), timeout=wait_s, return_when=asyncio.FIRST_COMPLETED)
                if not done:
                    if not queue or time.monotonic() >= deadline:
                        break
                    for silent in pending.values():
                        self._suspect(silent.at)
                    ask(_Ask(queue.pop(0), primary=True, final=True))
                    primaries += 1
                    continue
                for task in done:
                    a = pending.pop(task)
                    try:
                        info = task.result()
                    except DescribeError as e:
                        e.answered_by = self._node_id(a, e.leader_id)
                        if a.final:
                            self._brokers_answered = True
                            raise
                        error_answer = error_answer or e
                        continue
                    except Exception as e:  # noqa: BLE001 - unanswered: the next node is asked
                        if a.primary:
                            failures.append(e)
                            self._suspect(a.at)
                            if queue:
                                ask(_Ask(queue.pop(0), primary=True, final=True))
                                primaries += 1
                        else:
                            self._note_controllers_refusal(e)
                        continue
                    return await self._answered(a, info, deadline)
        finally:
            for ask_left in pending:
                if ask_left.done() and not ask_left.cancelled():
                    ask_left.exception()  # answered as the poll ended: read, so that no warning says otherwise
                ask_left.cancel()
        if error_answer is not None:  # a controller answered: there is no leader it knows of
            raise error_answer
        refusal = next((f for f in failures if kafka_failures.name_of(f)), None)
        if refusal is not None:  # the collector's own credentials, trust or names: named, never a timeout
            raise refusal
        if not queue and failures and len(failures) == primaries and all(map(_refused, failures)):
            raise ConnectionRefusedError("every node refused the connection")
        raise TimeoutError("no node answered")

    async def _answered(self, a: _Ask, info: QuorumInfo, deadline: float) -> tuple[int, QuorumInfo, str | None]:
        self._learn(info)
        if a.primary and not self.via_controllers:
            self._brokers_answered = True
            self._preferred = a.at
            self._suspects.pop(a.at, None)
        cluster_id = None
        # the cluster id when wanted; a broker's own id once (DescribeCluster names every broker)
        if self.want_cluster_id or a.primary and not self.via_controllers and a.at not in self._broker_ids:
            try:
                cluster_id = await self._cluster_id(a.at, deadline, learn_brokers=a.primary,
                                                    controllers=self.via_controllers or not a.primary)
            except Exception:  # noqa: BLE001 - asked again next poll
                pass
        return self._node_id(a, info.leader_id), info, cluster_id

    async def _cluster_id(self, at: Endpoint, deadline: float, learn_brokers: bool,
                          controllers: bool | None = None) -> str | None:
        answer = await self._links.describe_cluster(at, deadline, self.via_controllers if controllers is None
                                                    else controllers)
        code = answer.get("error_code", 0)
        self.cluster_id_error = kafka_error_name(code) if code else None
        if learn_brokers and not self.via_controllers:
            by_address = {(b["host"], b["port"]): b["broker_id"] for b in answer.get("brokers") or []}
            # -1: a broker known by another address (a load balancer's, say); not asked again
            self._broker_ids = {at: by_address.get(at, -1) for at in self._given}
        return answer.get("cluster_id") or None

    def _node_id(self, a: _Ask, leader_id: int) -> int:
        """Who answered: a broker by the id DescribeCluster gave; a controller speaks as the leader."""
        if self.via_controllers or not a.primary:
            return leader_id
        return self._broker_ids.get(a.at, -1)

    # --- whom to ask ------------------------------------------------------------------------------

    def _order(self) -> list[Endpoint]:
        """The path's nodes to ask, first to last: the one that answered last, the others in the
        order given, those lately silent or unreachable last (the longest suspected last)."""
        if self.via_controllers:
            return list(dict.fromkeys(self._given + sorted(self._learned.values())))
        if not self._suspects and self._given and self._preferred in (None, self._given[0]):
            return list(self._given)  # every round of a healthy cluster
        now = time.monotonic()
        fresh = [at for at in self._given if self._suspects.get(at, 0) <= now]
        if self._preferred in fresh:
            fresh.remove(self._preferred)
            fresh.insert(0, self._preferred)
        rest = sorted((at for at in self._given if at not in fresh), key=lambda at: self._suspects[at])
        return fresh + rest

    def _controllers(self) -> list[Endpoint]:
        return sorted(set(self._learned.values()))

    def _suspect(self, at: Endpoint) -> None:
        if self.via_controllers:
            return
        self._suspects[at] = time.monotonic() + SUSPECT_S
        if self._preferred == at:
            self._preferred = None

    def _learn(self, info: QuorumInfo) -> None:
        """Each voter's controller endpoint, as a v2 answer names it."""
        voters = {v.replica_id for v in info.voters}
        learned = {node: (ls[0].host, ls[0].port) for node, ls in info.nodes.items() if node in voters and ls}
        if info.nodes and learned != self._learned:
            self._learned = learned
            self._links.forget(set(self._given) | set(learned.values()))

    def _note_path(self, outcome: PollOutcome) -> None:
        """Whether the brokers' path is blind, logged at each change."""
        if self._brokers_answered:
            if self.blind:
                log.info("%s: DescribeQuorum answers through %s again: the controllers are no longer asked directly",
                         self.name, self.bootstrap)
            self.blind = False
        elif outcome.info is None and outcome.error not in kafka_failures.COLLECTOR_SIDE and self._learned \
                and not self.blind:
            log.warning("%s: DescribeQuorum through %s: no answer (%s); asking the controllers %s directly as well "
                        "until the brokers answer again", self.name, self.bootstrap, outcome.error,
                        ",".join(f"{h}:{p}" for h, p in self._controllers()))
            self.blind = True

    def _note_controllers_refusal(self, e: BaseException) -> None:
        named = kafka_failures.name_of(e)
        if named and named != self._refused_by_controllers:
            log.warning("%s: the controllers refuse the client properties (%s): %s; polls go on through %s alone "
                        "(--bootstrap-controller with the controllers' own --command-config asks them directly)",
                        self.name, named, kafka_failures.explain(named), self.bootstrap)
        self._refused_by_controllers = named


def _ms_since(start: float) -> int:
    return int((time.monotonic() - start) * 1000)


def _refused(e: BaseException) -> bool:
    while e is not None:
        if isinstance(e, ConnectionRefusedError) or "errno 111" in str(e).lower() or "refused" in str(e).lower():
            return True
        e = e.__cause__
    return False


def failure(e: BaseException) -> tuple[int, str]:
    """(Kafka's error code or -1, the short name) of a poll that got no answer."""
    named = kafka_failures.name_of(e)
    if named is not None:
        cause = e.__cause__ or e
        errno = getattr(cause, "errno", -1)
        return (errno if type(cause).__module__ == "kafka.errors" and isinstance(errno, int) else -1), named
    if isinstance(e, ConnectionRefusedError):
        return -1, kafka_failures.CONNECTION_REFUSED
    if isinstance(e, (TimeoutError, asyncio.TimeoutError)):
        return -1, kafka_failures.TIMEOUT
    if isinstance(e, (OSError, PeerUnavailable)):
        return -1, "connection_error"
    return -1, "client_error"
