"""Poll DescribeQuorum of any KRaft cluster and publish one record per poll, so that a cluster
we cannot modify (a real Kafka, say) is watched by the same streaming job as the quorum nodes
of this project.

  quorum collect --bootstrap-server kafka-1:9092 --cluster-id CLUSTER_ID \\
      --events-bootstrap-server monitor:9092 --events-topic quorum-events

Every poll gives exactly one record: `quorum_snapshot` when the quorum answered (with the
poll's latency and the node that answered), `quorum_poll_error` when it did not (Kafka's error,
such as NOT_LEADER_OR_FOLLOWER when no leader is elected, or the client's failure: timeout,
connection_refused), so a leaderless or unreachable quorum is seen as one, never as silence.
A poll is abandoned after --timeout-ms (default: the interval), so a hanging cluster still
gives a record every interval. A node that hangs (it accepts connections and answers nothing: a
frozen process, a long GC pause) costs at most part of one poll: another node is asked after 30 %
of the timeout, and the silent one is asked last for a while. List several brokers in
--bootstrap-server, or give the controllers with --bootstrap-controller (KIP-919), so that no
single node is the collector's only path. Through PLAINTEXT brokers, a poll without an answer
(a broker still forwarding to a controller that hangs) makes the next ones ask the controllers
that the last answer named as well, until the brokers answer again (quorum.kafka_watch.controller_fallback).

With --node-metrics ID=URL for each node, every poll also reads each node's own view of the
quorum from its Prometheus JMX exporter endpoint (quorum.kafka_watch.kafka_node_metrics) and publishes it as
that node's `metrics` record; an endpoint that does not answer gives no record (a round waits
for them at most half the timeout), and one that refuses the connection is named in the poll's
record (`refused_nodes`): its process is gone, and the job says so at once.

The interval is checked against the streaming job's `health.unreachable_after_ms`
(--unreachable-after-ms): at least two polls must fall within it, or the collector refuses
to start (exit code 2), naming the numbers.

Uses kafka-python's admin client (DescribeCluster for the cluster id, DescribeQuorum v2 sent to
one node it picks, so the answer's node is known). Publishing never blocks polling (bounded
buffer, oldest dropped first). Records are keyed per quorum (`events.quorum_key`).
"""
from __future__ import annotations

import argparse
import dataclasses
import logging
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from quorum import events
from quorum.config_file import ConfigFileError
from quorum.http_client_config import NO_CLIENT_CONFIG, load_http_client_config
from quorum.kafka_client import kafka_client_properties, kafka_failures
from quorum.kafka_watch.controller_fallback import ControllerFallback, plaintext
from quorum.kafka_watch.controller_poller import ControllerQuorumPoller
from quorum.kafka_watch.kafka_node_metrics import NodeMetricsReader, parse_endpoint
from quorum.kafka_watch.poll_interval import check_poll_interval
from quorum.kafka_watch.poll_outcome import PollOutcome
from quorum.kafka_watch.quorum_info import DescribeError, QuorumInfo, kafka_error_name, quorum_info

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_MS = 1000
DEFAULT_UNREACHABLE_AFTER_MS = 2000  # the streaming job's health.unreachable_after_ms default
CLIENT_ID = "quorum-collector"  # of the admin client; the events producer's is quorum-collector-events
PROBE_TIMEOUT_S = 0.2  # a refused connection is answered within a round trip
HEDGE_FRACTION = 0.3  # a node silent for this share of a poll's timeout: another is asked too
SUSPECT_S = 30.0  # a node that was silent or unreachable is asked last for this long
REBUILD_AFTER_FAILED_POLLS = 3  # the admin client is built anew after this many polls in a row fail
WARM_UP_S = 10.0  # how long the collector tries to connect before its first poll


def snapshot(result: dict[str, Any], cluster_id: str, source: str, now_ms: int,
             topic: str = "__cluster_metadata", partition: int = 0, *, poll_interval_ms: int = -1,
             latency_ms: int = -1, answered_by: int = -1) -> events.QuorumSnapshot:
    """The QuorumSnapshot record of one DescribeQuorum answer (admin result or raw to_dict())."""
    return snapshot_of(quorum_info(result, topic, partition), cluster_id, source, now_ms, topic, partition,
                       poll_interval_ms=poll_interval_ms, latency_ms=latency_ms, answered_by=answered_by)


def snapshot_of(info: QuorumInfo, cluster_id: str, source: str, now_ms: int, topic: str = "__cluster_metadata",
                partition: int = 0, *, poll_interval_ms: int = -1, latency_ms: int = -1,
                answered_by: int = -1) -> events.QuorumSnapshot:
    def rs(r) -> events.ReplicaState:
        return events.ReplicaState(r.replica_id, r.log_end_offset, r.last_fetch_timestamp,
                                   r.last_caught_up_timestamp, r.directory_id)
    return events.QuorumSnapshot(cluster_id=cluster_id, topic=topic, partition=partition, time_ms=now_ms,
                                 leader_id=info.leader_id, leader_epoch=max(info.leader_epoch, 0),
                                 high_watermark=info.high_watermark, voters=tuple(rs(v) for v in info.voters),
                                 observers=tuple(rs(o) for o in info.observers), source=source,
                                 poll_interval_ms=poll_interval_ms, latency_ms=max(latency_ms, -1),
                                 answered_by=max(answered_by, -1))


def record_of(outcome: PollOutcome, cluster_id: str, source: str, now_ms: int, interval_ms: int,
              topic: str = "__cluster_metadata", partition: int = 0, refused_nodes: list[int] | None = None
              ) -> events.Record:
    """The one record of one poll; `refused_nodes`: nodes whose metrics endpoint refused the
    connection during it."""
    refused = tuple(sorted(refused_nodes or ()))
    if outcome.info is not None:
        snap = snapshot_of(outcome.info, cluster_id, source, now_ms, topic, partition, poll_interval_ms=interval_ms,
                           latency_ms=outcome.latency_ms, answered_by=outcome.answered_by)
        return dataclasses.replace(snap, refused_nodes=refused)
    return events.QuorumPollError(cluster_id=cluster_id, topic=topic, partition=partition, time_ms=now_ms,
                                  source=source, poll_interval_ms=interval_ms, latency_ms=max(outcome.latency_ms, 0),
                                  error_code=max(outcome.error_code, -1), error=outcome.error or "client_error",
                                  answered_by=max(outcome.answered_by, -1), leader_id=max(outcome.leader_id, -1),
                                  leader_epoch=max(outcome.leader_epoch, -1), refused_nodes=refused)


# --- failures -------------------------------------------------------------------------------------

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
            return (admin.describe_cluster().get("cluster_id") or None) if self.want_cluster_id else None
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
                        box["cluster_id"] = admin.describe_cluster().get("cluster_id") or None
                    except Exception:
                        pass
        except Exception as e:  # the cluster is the thing being watched: its failures are data
            box["error"] = e

    def _client(self, box: dict[str, Any], bootstrap_timeout_ms: int | None = None):
        from kafka import KafkaAdminClient
        with self._lock:
            if self._admin is not None:
                box["admin"] = True
                return self._admin
            # one bootstrap server at a time, the next one after a failure: kafka-python picks
            # one at random, and one that hangs would take every poll's whole timeout
            server = self._servers[self._server] if self._servers else self.bootstrap
        try:
            # bootstrap gives up early enough to leave time for naming the failure (`probe`)
            admin = KafkaAdminClient(bootstrap_servers=server, request_timeout_ms=self.timeout_ms,
                                     bootstrap_timeout_ms=bootstrap_timeout_ms or max(1, self.timeout_ms * 3 // 4),
                                     **{"client_id": CLIENT_ID, **self.client_config})
        except Exception:
            box["bootstrap_failed"] = True
            raise
        with self._lock:
            if box.get("abandoned"):  # the poll gave up on us meanwhile
                threading.Thread(target=admin.close, daemon=True).start()
                raise TimeoutError("abandoned")
            self._admin = admin
            box["admin"] = True
        return admin

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


# --- command --------------------------------------------------------------------------------------

@dataclass
class Poll:
    """What one round gave: the DescribeQuorum outcome, the records to publish (none while no
    cluster id is known to key them by), and the nodes whose metrics endpoint did not answer."""
    outcome: PollOutcome
    records: list[events.Record]
    silent_nodes: dict[int, str]


class Collection:
    """One round of `quorum collect`: DescribeQuorum and, with node metrics, every node's own view,
    scraped while DescribeQuorum runs. The nodes' records carry the voter set of the last answer
    (raft-metrics gives only its size); the poll's record names the nodes whose metrics endpoint
    refused the connection (their process is gone: evidence the job uses at once)."""

    def __init__(self, poller: "QuorumPoller | ControllerQuorumPoller", source: str, interval_ms: int,
                 cluster_id: str | None = None, node_metrics: NodeMetricsReader | None = None):
        self.poller = poller
        self.source = source
        self.interval_ms = interval_ms
        self.cluster_id = cluster_id
        self.node_metrics = node_metrics
        self.voters: tuple[int, ...] = ()

    def warm_up(self, timeout_s: float) -> None:
        """Connect to the cluster before the first round (and learn its id, when not given)."""
        cluster_id = self.poller.warm_up(timeout_s)
        if cluster_id and not self.cluster_id:
            self.cluster_id = cluster_id
            self.poller.want_cluster_id = False

    def poll(self, last: bool = False) -> Poll:
        """One round; the `last` one (of `--count`) waits for every endpoint's answer."""
        scrapes = self.node_metrics.begin() if self.node_metrics else None
        outcome = self.poller.poll()
        if outcome.cluster_id and not self.cluster_id:
            self.cluster_id = outcome.cluster_id
            self.poller.want_cluster_id = False
        if outcome.info is not None:
            self.voters = tuple(v.replica_id for v in outcome.info.voters)
        now_ms = int(time.time() * 1000)  # the answer's time, before the round waits for the endpoints
        metrics: list[events.Record] = []
        silent: dict[int, str] = {}
        refusing: list[int] = []
        if scrapes is not None:
            metrics, silent, refusing = self.node_metrics.finish(scrapes, self.cluster_id or "", self.voters, last)
        if not self.cluster_id:
            return Poll(outcome, [], silent)
        record = record_of(outcome, self.cluster_id, self.source, now_ms, self.interval_ms, refused_nodes=refusing)
        return Poll(outcome, [record] + metrics, silent)

    def close(self) -> None:
        self.poller.close()
        if self.node_metrics:
            self.node_metrics.close()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    path = parser.add_mutually_exclusive_group(required=True)
    path.add_argument("--bootstrap-server", metavar="HOST:PORT",
                      help="brokers of the cluster to watch (comma-separated; list several: a poll that one of "
                           "them leaves unanswered asks another; on a PLAINTEXT cluster, while the brokers give no "
                           "answer, the controllers their last answer named are asked as well)")
    path.add_argument("--bootstrap-controller", metavar="HOST:PORT",
                      help="the cluster's controllers instead (KIP-919, as kafka-metadata-quorum takes it): every "
                           "poll asks each of them at once, so no broker is on the path (PLAINTEXT listeners only)")
    parser.add_argument("--interval-ms", type=int, default=DEFAULT_INTERVAL_MS,
                        help=f"poll interval (default {DEFAULT_INTERVAL_MS}); at most half of --unreachable-after-ms")
    parser.add_argument("--unreachable-after-ms", type=int, default=DEFAULT_UNREACHABLE_AFTER_MS,
                        help="the streaming job's health.unreachable_after_ms, to check the interval against "
                             f"(default {DEFAULT_UNREACHABLE_AFTER_MS}, the job's default)")
    parser.add_argument("--timeout-ms", type=int, default=None,
                        help="give up on a poll after this long and publish a timeout record "
                             "(default: the interval; at most the interval)")
    parser.add_argument("--events-bootstrap-server", required=True, metavar="HOST:PORT",
                        help="Kafka holding the events topic")
    parser.add_argument("--events-topic", default="quorum-events", help="the events topic (default quorum-events)")
    parser.add_argument("--cluster-id", help="cluster id to stamp on records (default: asked from the cluster; "
                                             "set it so that a cluster unreachable from the start is still reported)")
    parser.add_argument("--command-config", metavar="FILE",
                        help="Kafka client properties for the watched cluster, the file kafka-metadata-quorum "
                             "--command-config takes (security.protocol, sasl.mechanism, sasl.jaas.config, "
                             "ssl.truststore.*, ssl.keystore.*); its principal needs DESCRIBE on the CLUSTER")
    parser.add_argument("--events-command-config", metavar="FILE",
                        help="Kafka client properties for the events topic's Kafka (its principal needs WRITE on "
                             "the events topic)")
    parser.add_argument("--node-metrics", action="append", default=[], metavar="NODE_ID=URL", type=_endpoint,
                        help="a Kafka node's Prometheus JMX exporter endpoint (rules: deploy/kafka-jmx-exporter.yml), "
                             "read at every poll and published as that node's `metrics` record; repeat for each "
                             "controller. With the nodes' own view the job tells a cut-off voter (partitioned) "
                             "from a dead one (down)")
    parser.add_argument("--node-metrics-config", metavar="FILE",
                        help="Prometheus HTTP client config for the --node-metrics endpoints (tls_config, basic_auth "
                             "with password_file), as a Prometheus scrape config takes it: agents served over HTTPS "
                             "with basic auth (docs/endpoint-security.md)")
    parser.add_argument("--count", type=int, default=0, help="stop after this many polls (default: run forever)")


def _endpoint(text: str) -> tuple[int, str]:
    try:
        return parse_endpoint(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def check_arguments(args: argparse.Namespace) -> str | None:
    """Why these options cannot work, or None."""
    if getattr(args, "bootstrap_controller", None) and args.command_config:
        return ("--command-config: the controllers' client (--bootstrap-controller) speaks PLAINTEXT only and "
                "cannot honour security settings; use --bootstrap-server with --command-config for a secured cluster")
    if getattr(args, "node_metrics_config", None) and not args.node_metrics:
        return "--node-metrics-config applies to --node-metrics endpoints, and none is given"
    problem = check_poll_interval(args.interval_ms, args.unreachable_after_ms)
    if problem:
        return f"--interval-ms {args.interval_ms} with --unreachable-after-ms {args.unreachable_after_ms}: {problem}"
    timeout = args.timeout_ms if args.timeout_ms is not None else args.interval_ms
    if timeout <= 0:
        return f"--timeout-ms must be positive (got {timeout})"
    if timeout > args.interval_ms:
        return (f"--timeout-ms {timeout} is longer than --interval-ms {args.interval_ms}: a poll that hangs would "
                f"hold back the next record; use --timeout-ms {args.interval_ms} or less")
    return None


WATCHED_CLIENT = "quorum collect's admin client for the watched cluster (kafka-python)"
EVENTS_CLIENT = "quorum collect's events producer (kafka-python)"


def make_poller(args: argparse.Namespace, timeout_ms: int, client_config: dict[str, Any], want_cluster_id: bool):
    """The poller of the path the options name: the brokers, or the controllers themselves."""
    if getattr(args, "bootstrap_controller", None):
        return ControllerQuorumPoller(args.bootstrap_controller, timeout_ms=timeout_ms, want_cluster_id=want_cluster_id)
    return brokers_poller(args.bootstrap_server, timeout_ms, client_config, want_cluster_id)


def brokers_poller(bootstrap: str, timeout_ms: int, client_config: dict[str, Any] | None = None,
                   want_cluster_id: bool = True):
    """The poller through the brokers; on a PLAINTEXT cluster it also asks the controllers its
    answers name while the brokers give none (quorum.kafka_watch.controller_fallback)."""
    brokers = QuorumPoller(bootstrap, timeout_ms=timeout_ms, client_config=client_config,
                           want_cluster_id=want_cluster_id)
    return ControllerFallback(brokers) if plaintext(brokers.client_config) else brokers


def _path(args: argparse.Namespace) -> str:
    if getattr(args, "bootstrap_controller", None):
        return f"controllers {args.bootstrap_controller}"
    return args.bootstrap_server


def run(args: argparse.Namespace) -> int:
    from quorum.node.publisher import EventPublisher
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # a cluster that is down would make kafka-python log every reconnect, every second; the
    # collector logs each change of the polls' outcome itself, and publishes every failure
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    problem = check_arguments(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    timeout_ms = args.timeout_ms if args.timeout_ms is not None else args.interval_ms
    try:
        watched_props = kafka_client_properties.merged(args.command_config, {})
        watched_cfg = kafka_client_properties.kafka_python_config(watched_props, WATCHED_CLIENT)
        events_props = kafka_client_properties.merged(args.events_command_config, {})
        events_cfg = kafka_client_properties.kafka_python_config(events_props, EVENTS_CLIENT)
    except kafka_client_properties.ClientPropertiesError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    principal = kafka_client_properties.principal(watched_props)
    try:
        http_client = load_http_client_config(args.node_metrics_config) if args.node_metrics_config else None
    except ConfigFileError as e:
        print(f"error: --node-metrics-config: {e}", file=sys.stderr)
        return 2
    publisher = EventPublisher(args.events_bootstrap_server, args.events_topic, client_config=events_cfg,
                               client_id=CLIENT_ID + "-events",
                               principal=kafka_client_properties.principal(events_props)).start()
    poller = make_poller(args, timeout_ms, watched_cfg, want_cluster_id=not args.cluster_id)
    node_metrics = NodeMetricsReader(dict(args.node_metrics), timeout_ms, http_client or NO_CLIENT_CONFIG) \
        if args.node_metrics else None
    source = poller.bootstrap
    collection = Collection(poller, source, args.interval_ms, args.cluster_id, node_metrics)
    silent_nodes: set[int] = set()
    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    log.info("polling DescribeQuorum on %s every %d ms (timeout %d ms, job threshold %d ms), publishing to %s on %s",
             _path(args), args.interval_ms, timeout_ms, args.unreachable_after_ms, args.events_topic,
             args.events_bootstrap_server)
    collection.warm_up(WARM_UP_S)
    log.info("cluster id %s", collection.cluster_id or "not known yet (asked at every poll until one answers)")
    polls = answered = 0
    last_error = None
    next_poll = time.monotonic()
    try:
        while not stop and (args.count <= 0 or polls < args.count):
            time.sleep(max(0.0, next_poll - time.monotonic()))
            # fixed cadence; a late poll is not followed by a burst of catch-up polls
            next_poll = max(next_poll + args.interval_ms / 1000, time.monotonic())
            result = collection.poll(last=0 < args.count == polls + 1)
            outcome = result.outcome
            polls += 1
            # an error answer of the quorum's own (NOT_LEADER_OR_FOLLOWER: no leader) is an answer;
            # no answer, or a refusal of the collector's credentials, is a failed poll
            answered += outcome.info is not None or (outcome.error_code >= 0
                                                     and outcome.error not in kafka_failures.COLLECTOR_SIDE)
            if outcome.info is None and outcome.error != last_error:
                explained = kafka_failures.explain(outcome.error, principal)
                log.warning("DescribeQuorum on %s: %s (error code %d, %d ms)%s", _path(args), outcome.error,
                            outcome.error_code, outcome.latency_ms,
                            f": {explained}" if explained != outcome.error else "")
            elif outcome.info is not None and last_error is not None:
                log.info("DescribeQuorum on %s answers again (leader %d)", _path(args),
                         outcome.info.leader_id)
            last_error = None if outcome.info is not None else outcome.error
            # no records while no cluster id is known to key them by: logged above, and --cluster-id avoids it
            for record in result.records:
                publisher.publish(record)
            for node in result.silent_nodes.keys() - silent_nodes:
                log.warning("node %d's metrics endpoint: %s", node, result.silent_nodes[node])
            for node in silent_nodes - result.silent_nodes.keys():
                log.info("node %d's metrics endpoint answers again", node)
            silent_nodes = set(result.silent_nodes)
    except KeyboardInterrupt:
        pass
    finally:
        collection.close()
        publisher.close()
    if publisher.dropped_total:
        log.warning("%d record(s) could not be published to the events topic %s: %s", publisher.dropped_total,
                    args.events_topic, publisher.last_error)
    if args.count > 0 and polls and not answered:
        log.error("every one of the %d poll(s) failed to reach the quorum (last: %s)", polls, last_error)
        return 1
    return 0
