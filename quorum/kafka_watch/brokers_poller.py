"""DescribeQuorum through the brokers (or any bootstrap servers), with kafka-python's admin client:
one poll per call, never longer than its timeout, never raising, a node that hangs hedged around."""
from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any

from quorum.kafka_client import kafka_failures
from quorum.kafka_watch.bootstrap_race import BootstrapFailed, BootstrapRace, Bootstrapped, hedge_delay_s
from quorum.kafka_watch.poll_outcome import PollOutcome
from quorum.kafka_watch.quorum_info import DescribeError, kafka_error_name, quorum_info

log = logging.getLogger("quorum.kafka_watch.collector")  # its lines are `quorum collect`'s

CLIENT_ID = "quorum-collector"  # of the admin client; the events producer's is quorum-collector-events
PROBE_TIMEOUT_S = 0.2  # a refused connection is answered within a round trip
HEDGE_FRACTION = 0.3  # a node silent for this share of a poll's timeout: another is asked too
SUSPECT_S = 30.0  # a node that was silent or unreachable is asked last for this long
REBUILD_AFTER_FAILED_POLLS = 3  # the admin client is built anew after this many polls in a row fail


def client_failure(e: BaseException) -> tuple[int, str]:
    """(Kafka error code or -1, short low-cardinality name) of a failed poll's exception."""
    import kafka.errors as Errors
    if isinstance(e, DescribeError):
        return e.error_code, e.error or "bad_answer"
    errno = getattr(e, "errno", None)
    named = kafka_failures.name_of(e)
    if named is not None:
        return (errno if isinstance(errno, int) and errno > 0 else -1), named
    if isinstance(e, Errors.BrokerResponseError) and isinstance(errno, int) and errno > 0:
        return errno, kafka_error_name(errno)
    if isinstance(e, ConnectionRefusedError):
        return -1, "connection_refused"
    if isinstance(e, (TimeoutError, socket.timeout, Errors.KafkaTimeoutError, Errors.RequestTimedOutError)):
        return -1, "timeout"
    if isinstance(e, socket.gaierror):
        return -1, "unknown_host"
    if isinstance(e, (Errors.NodeNotReadyError, Errors.UnknownBrokerIdError)):
        return -1, "node_not_ready"
    if isinstance(e, (Errors.KafkaConnectionError, ConnectionError, OSError)):
        return -1, "connection_error"
    return -1, "client_error"


def probe(bootstrap: str, timeout_s: float) -> str:
    """Why nothing could be bootstrapped, from a plain TCP connect to each server (kafka-python
    reports a refused connection as a bootstrap timeout): connection_refused, unknown_host or
    timeout; `timeout` too when a server accepts TCP but the Kafka client still failed."""
    reasons = []
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=max(timeout_s, 0.05)).close()
            return "timeout"
        except ConnectionRefusedError:
            reasons.append("connection_refused")
        except socket.gaierror:
            reasons.append("unknown_host")
        except (OSError, ValueError):
            reasons.append("timeout")
    return reasons[0] if len(set(reasons)) == 1 else "timeout"


def admin_client(**configs):
    """kafka-python's admin client, bootstrapped; one whose bootstrap fails has its I/O thread
    ended (kafka-python leaves it running: a collector would gain a thread per failed bootstrap)."""
    from kafka import KafkaAdminClient
    admin = KafkaAdminClient.__new__(KafkaAdminClient)
    try:
        admin.__init__(**configs)
    except BaseException:
        for part, end in (("_metrics", "close"), ("_client", "close"), ("_net", "stop")):
            try:
                getattr(getattr(admin, part), end)()
            except Exception:  # noqa: BLE001 - the part was never made, or is half made
                pass
        raise
    return admin


# --- polling --------------------------------------------------------------------------------------

class QuorumPoller:
    """DescribeQuorum v2, one poll per call, never longer than `timeout_ms`, never raising.

    The admin client runs each poll on a thread of its own: a poll that outlives its deadline
    is abandoned, so one hanging cluster never delays the next record. A node that hangs
    (a frozen process, a long GC pause, a stuck disk: it accepts TCP and answers nothing) costs
    at most part of one poll: after HEDGE_FRACTION of the timeout another node is asked too,
    the first answer wins, and the silent node is asked last for SUSPECT_S."""

    def __init__(self, bootstrap: str, *, timeout_ms: int, client_config: dict[str, Any] | None = None,
                 topic: str = "__cluster_metadata", partition: int = 0, want_cluster_id: bool = True):
        self.bootstrap = bootstrap
        self.timeout_ms = timeout_ms
        self.client_config = dict(client_config or {})
        self.topic = topic
        self.partition = partition
        self.want_cluster_id = want_cluster_id
        self._servers = [s.strip() for s in bootstrap.split(",") if s.strip()]
        self._server = 0  # the bootstrap server a new admin client starts from (see _client)
        self._admin = None
        self._preferred: Any = None  # the node that answered last
        self._suspects: dict[Any, float] = {}  # node -> monotonic time until it is asked last
        self._failed_polls = 0
        self._lock = threading.Lock()

    def poll(self) -> PollOutcome:
        start = time.monotonic()
        box: dict[str, Any] = {}
        worker = threading.Thread(target=self._ask, args=(box,), name="describe-quorum", daemon=True)
        worker.start()
        worker.join(self.timeout_ms / 1000)
        latency = int((time.monotonic() - start) * 1000)
        with self._lock:  # decided once: a worker finishing now is abandoned all the same
            abandoned = worker.is_alive()
            if abandoned:
                box["abandoned"] = True
                bootstrapping = "admin" not in box
                if bootstrapping:
                    self._next_server()
                self._failed(rebuild=bootstrapping)
            elif "error" in box and not isinstance(box["error"], DescribeError):  # an error answer is an answer
                self._failed(rebuild=False)
            else:
                self._failed_polls = 0
        if abandoned:
            if not bootstrapping:
                return PollOutcome(latency, error="timeout")
            named = self._bootstrap_failure(start)
            if named is not None:
                return named
            # kafka-python reports a refused bootstrap connection only as its own timeout
            name = probe(self.bootstrap, PROBE_TIMEOUT_S)
            return PollOutcome(int((time.monotonic() - start) * 1000) if name != "timeout" else latency, error=name)
        if "error" in box:
            e = box["error"]
            code, name = client_failure(e)
            if box.get("bootstrap_failed"):
                with self._lock:
                    self._next_server()
                named = self._bootstrap_failure(start)
                if named is not None:
                    return named
                name = probe(self.bootstrap, min(self.timeout_ms / 1000 - (time.monotonic() - start), 1.0))
                latency = int((time.monotonic() - start) * 1000)
            elif code < 0 and not isinstance(e, DescribeError):
                with self._lock:
                    self._drop_admin()  # no node of the cluster could be reached: bootstrap again
            return PollOutcome(box.get("describe_ms", latency), box.get("node_id", -1), error_code=code, error=name,
                               leader_id=getattr(e, "leader_id", -1), leader_epoch=getattr(e, "leader_epoch", -1),
                               cluster_id=box.get("cluster_id"), detail=str(e))
        return PollOutcome(box.get("describe_ms", latency), box["node_id"], info=box["info"],
                           cluster_id=box.get("cluster_id"))

    def _bootstrap_failure(self, start: float) -> PollOutcome | None:
        """The outcome of a bootstrap that a secured cluster refused (a wrong password, an
        untrusted certificate), told by logging in once on a bootstrap server."""
        server = self._servers[self._server] if self._servers else self.bootstrap
        budget = max(PROBE_TIMEOUT_S, min(1.0, self.timeout_ms / 1000 - (time.monotonic() - start)))
        found = kafka_failures.diagnose(server, self.client_config, budget)
        if found is None:
            return None
        name, failure = found
        import kafka.errors as Errors
        errno = getattr(failure, "errno", -1) if isinstance(failure, Errors.BrokerResponseError) else -1
        return PollOutcome(int((time.monotonic() - start) * 1000), error=name,
                           error_code=errno if isinstance(errno, int) and errno > 0 else -1, detail=str(failure))

    def warm_up(self, timeout_s: float) -> str | None:
        """Connect before the first poll (a new admin client asks ApiVersions and Metadata before
        it can ask anything), so that no poll's timeout pays for it; the cluster id when asked
        for and given. A cluster that cannot be reached now is left to the polls to report."""
        box: dict[str, Any] = {}
        try:
            admin = self._client(box, bootstrap_timeout_ms=int(timeout_s * 1000))
            return self._cluster_id(admin, self._preferred) if self.want_cluster_id else None
        except Exception:  # noqa: BLE001 - the polls publish what fails
            with self._lock:
                if box.get("bootstrap_failed"):
                    self._next_server()
            return None

    def close(self) -> None:
        with self._lock:
            self._drop_admin()

    def _failed(self, rebuild: bool) -> None:
        """A poll without an answer. The admin client is kept through a few (its connections to
        a hung node time out by themselves, and the others stay usable), rebuilt after that."""
        self._failed_polls += 1
        if rebuild or self._failed_polls >= REBUILD_AFTER_FAILED_POLLS:
            self._drop_admin()
            self._failed_polls = 0

    def _next_server(self) -> None:
        self._server = (self._server + 1) % len(self._servers)

    def _ask(self, box: dict[str, Any]) -> None:
        try:
            admin = self._client(box)
            try:
                asked = time.monotonic()
                node_id, answer = admin._manager.run(self._describe, admin)
                box["describe_ms"] = int((time.monotonic() - asked) * 1000)
                box["node_id"] = node_id if isinstance(node_id, int) and node_id >= 0 else -1
                box["info"] = quorum_info(answer.to_dict(), self.topic, self.partition)
            finally:  # asked after DescribeQuorum, so that failing does not hide its outcome
                if self.want_cluster_id and not box.get("abandoned"):
                    try:
                        box["cluster_id"] = self._cluster_id(admin, box["node_id"] if box.get("node_id", -1) >= 0
                                                             else self._preferred)
                    except Exception:
                        pass
        except Exception as e:  # the cluster is the thing being watched: its failures are data
            box["error"] = e

    def _client(self, box: dict[str, Any], bootstrap_timeout_ms: int | None = None):
        with self._lock:
            if self._admin is not None:
                box["admin"] = True
                return self._admin
            first = self._server
        # bootstrap gives up early enough to leave time for naming the failure (`probe`)
        budget_ms = bootstrap_timeout_ms or max(1, self.timeout_ms * 3 // 4)
        race = BootstrapRace(self._servers or [self.bootstrap], self._new_admin,
                             hedge_delay_s(self.timeout_ms, HEDGE_FRACTION))
        try:
            won = race.run(first, budget_ms / 1000)
        except BootstrapFailed as e:
            import kafka.errors as Errors
            box["bootstrap_failed"] = True
            raise e.cause or Errors.KafkaTimeoutError(f"Unable to bootstrap from {self.bootstrap}") from None
        with self._lock:
            if box.get("abandoned"):  # the poll gave up on us meanwhile
                threading.Thread(target=won.admin.close, daemon=True).start()
                raise TimeoutError("abandoned")
            self._admin, self._server = won.admin, won.server
            self._learn_bootstrap(won)
            box["admin"] = True
        return won.admin

    def _new_admin(self, server: str, bootstrap_timeout_ms: int):
        return admin_client(bootstrap_servers=server, request_timeout_ms=self.timeout_ms,
                            bootstrap_timeout_ms=bootstrap_timeout_ms, **{"client_id": CLIENT_ID, **self.client_config})

    def _learn_bootstrap(self, won: Bootstrapped) -> None:
        """The node a bootstrap came from is asked first; those its race found silent, last."""
        if not self._servers:
            return
        by_address = {f"{b.host}:{b.port}": b.node_id for b in won.admin._manager.cluster.brokers()}
        node = by_address.get(self._servers[won.server])
        if node is not None and self._suspects.get(node, 0) <= time.monotonic():
            self._preferred = node
        for silent in (by_address.get(self._servers[i]) for i in won.silent):
            if silent is not None:
                self._suspect(silent)

    def _cluster_id(self, admin, node_id: Any) -> str | None:
        """DescribeCluster of the node that answered last (any other may be the one that hangs)."""
        from kafka.protocol.admin import DescribeClusterRequest
        request = DescribeClusterRequest(include_cluster_authorized_operations=False)

        async def ask():
            return await admin._manager.send(request, node_id=node_id)
        answer = admin._manager.run(ask)
        return (answer.cluster_id or None) if answer.error_code == 0 else None

    async def _describe(self, admin) -> tuple[Any, Any]:
        """DescribeQuorum sent to one node at a time (at the highest version both speak: v2
        against Kafka 3.8+ and this project's nodes), so the node that answered is known: the one
        that answered last time first, then the others while a node cannot be reached (a broker
        that is down is not a quorum without a leader) or is silent past the hedge delay (one
        that hangs). An error answer is an answer."""
        import kafka.errors as Errors
        from kafka.future import Future
        from kafka.protocol.admin import DescribeQuorumRequest
        manager = admin._manager
        T = DescribeQuorumRequest.TopicData
        request = DescribeQuorumRequest(topics=[T(topic_name=self.topic,
                                                  partitions=[T.PartitionData(partition_index=self.partition)])])
        unanswered = (Errors.KafkaConnectionError, Errors.NodeNotReadyError, Errors.KafkaTimeoutError,
                      Errors.RequestTimedOutError, Errors.UnknownBrokerIdError, ConnectionError)
        hedge_ms = max(1, int(self.timeout_ms * HEDGE_FRACTION))
        tried: list[Any] = []
        pending: dict[Any, Any] = {}
        failure: Exception = Errors.NodeNotReadyError("no node of the cluster is ready")
        while True:
            node_id = self._next_node(manager, tried)
            if node_id is not None:
                tried.append(node_id)
                log.debug("DescribeQuorum asks node %s (asked already: %s)", node_id, tried[:-1])
                pending[node_id] = manager.send(request, node_id=node_id)
            if not pending:
                raise failure
            first = Future()
            for future in pending.values():
                future.add_both(lambda _, first=first: first.is_done or first.success(None))
            try:
                # with nobody left to ask, wait for the askers until the poll's own deadline
                await manager.wait_for(first, hedge_ms if node_id is not None else None)
            except Errors.KafkaTimeoutError:
                log.debug("DescribeQuorum: no answer from %s within %d ms", sorted(pending), hedge_ms)
                for silent in pending:
                    self._suspect(silent)
                continue
            for asked, future in list(pending.items()):
                if not future.is_done:
                    continue
                del pending[asked]
                if future.succeeded():
                    self._preferred = asked
                    self._suspects.pop(asked, None)
                    return asked, future.value
                if not isinstance(future.exception, unanswered):
                    raise future.exception
                log.debug("DescribeQuorum: node %s gave no answer: %r", asked, future.exception)
                failure = future.exception
                self._suspect(asked)

    def _suspect(self, node_id: Any) -> None:
        self._suspects[node_id] = time.monotonic() + SUSPECT_S
        if self._preferred == node_id:
            self._preferred = None

    def _next_node(self, manager, tried: list[Any]) -> Any:
        """The node to ask next: the one that answered last, then any the client likes, then the
        rest; a node lately silent or unreachable only when no other is left."""
        now = time.monotonic()
        known = [b.node_id for b in manager.cluster.brokers()]
        fresh = [n for n in known if n not in tried and self._suspects.get(n, 0) <= now]
        if self._preferred in fresh:
            return self._preferred
        node_id = manager.least_loaded_node()
        if node_id in fresh:
            return node_id
        if fresh:
            return fresh[0]
        rest = sorted((n for n in known if n not in tried), key=lambda n: self._suspects.get(n, 0))
        return rest[0] if rest else None

    def _drop_admin(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:  # closing fails the abandoned poll's waiters; never wait for it here
            threading.Thread(target=admin.close, name="admin-close", daemon=True).start()
