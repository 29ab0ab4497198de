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
single node is the collector's only path; either path takes --command-config (TLS, SASL). Through
the brokers, a poll without an answer (a broker still forwarding to a controller that hangs, or
every broker frozen) makes the next ones ask the controllers that the last answer named as well,
with the same client properties, until the brokers answer again (quorum.kafka_watch.controller_fallback).

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
import sys
import time
from dataclasses import dataclass
from typing import Any

from quorum import events
from quorum.config_file import ConfigFileError
from quorum.http_client_config import NO_CLIENT_CONFIG, load_http_client_config
from quorum.kafka_client import kafka_client_properties, kafka_failures
from quorum.kafka_watch.brokers_poller import CLIENT_ID, QuorumPoller
from quorum.kafka_watch.controller_fallback import ControllerFallback
from quorum.kafka_watch.controller_poller import ControllerQuorumPoller, cluster_id_refusal
from quorum.kafka_watch.kafka_node_metrics import NodeMetricsReader, parse_endpoint
from quorum.kafka_watch.poll_interval import check_poll_interval
from quorum.kafka_watch.poll_outcome import PollOutcome
from quorum.kafka_watch.quorum_info import QuorumInfo, quorum_info

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_MS = 1000
DEFAULT_UNREACHABLE_AFTER_MS = 2000  # the streaming job's health.unreachable_after_ms default
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
                           "them leaves unanswered asks another; while the brokers give no answer, the controllers "
                           "their last answer named are asked as well, with the same --command-config)")
    path.add_argument("--bootstrap-controller", metavar="HOST:PORT",
                      help="the cluster's controllers instead (KIP-919, as kafka-metadata-quorum takes it): every "
                           "poll asks each of them at once, so no broker is on the path; --command-config applies "
                           "to their listener (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)")
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
        return ControllerQuorumPoller(args.bootstrap_controller, timeout_ms=timeout_ms, client_config=client_config,
                                      want_cluster_id=want_cluster_id)
    return brokers_poller(args.bootstrap_server, timeout_ms, client_config, want_cluster_id)


def brokers_poller(bootstrap: str, timeout_ms: int, client_config: dict[str, Any] | None = None,
                   want_cluster_id: bool = True):
    """The poller through the brokers; it also asks the controllers its answers name while the
    brokers give none (quorum.kafka_watch.controller_fallback)."""
    brokers = QuorumPoller(bootstrap, timeout_ms=timeout_ms, client_config=client_config,
                           want_cluster_id=want_cluster_id)
    return ControllerFallback(brokers)


def _path(args: argparse.Namespace) -> str:
    if getattr(args, "bootstrap_controller", None):
        return f"controllers {args.bootstrap_controller}"
    return args.bootstrap_server


@dataclass(frozen=True)
class _ClientSettings:
    watched: dict[str, Any]         # kafka-python's settings for the watched cluster's admin client
    events: dict[str, Any]          # and for the events producer
    principal: str | None           # the watched cluster's, for the explanations of refusals
    events_principal: str | None
    node_metrics: Any               # the nodes' metrics endpoints' HTTP client settings


def _client_settings(args: argparse.Namespace) -> _ClientSettings | str:
    """The clients' settings from the options' files, or what is wrong with them."""
    try:
        watched = kafka_client_properties.merged(args.command_config, {})
        events = kafka_client_properties.merged(args.events_command_config, {})
        settings = (kafka_client_properties.kafka_python_config(watched, WATCHED_CLIENT),
                    kafka_client_properties.kafka_python_config(events, EVENTS_CLIENT))
    except kafka_client_properties.ClientPropertiesError as e:
        return str(e)
    try:
        http_client = load_http_client_config(args.node_metrics_config) if args.node_metrics_config else None
    except ConfigFileError as e:
        return f"--node-metrics-config: {e}"
    return _ClientSettings(*settings, kafka_client_properties.principal(watched),
                           kafka_client_properties.principal(events), http_client or NO_CLIENT_CONFIG)


class _ChangeLog:
    """Logs each change of the polls' outcome and of the nodes' metrics endpoints, once each."""

    def __init__(self, path: str, principal: str | None):
        self.path, self.principal = path, principal
        self.last_error: str | None = None
        self.silent_nodes: set[int] = set()

    def outcome(self, outcome: PollOutcome) -> None:
        if outcome.info is None and outcome.error != self.last_error:
            explained = kafka_failures.explain(outcome.error, self.principal)
            log.warning("DescribeQuorum on %s: %s (error code %d, %d ms)%s", self.path, outcome.error,
                        outcome.error_code, outcome.latency_ms, f": {explained}" if explained != outcome.error else "")
        elif outcome.info is not None and self.last_error is not None:
            log.info("DescribeQuorum on %s answers again (leader %d)", self.path, outcome.info.leader_id)
        self.last_error = None if outcome.info is not None else outcome.error

    def metrics_endpoints(self, silent: dict[int, str]) -> None:
        for node in silent.keys() - self.silent_nodes:
            log.warning("node %d's metrics endpoint: %s", node, silent[node])
        for node in self.silent_nodes - silent.keys():
            log.info("node %d's metrics endpoint answers again", node)
        self.silent_nodes = set(silent)


def run(args: argparse.Namespace) -> int:
    from quorum.node.publisher import EventPublisher
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # a cluster that is down would make kafka-python log every reconnect, every second; the
    # collector logs each change of the polls' outcome itself, and publishes every failure
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    problem = check_arguments(args)
    settings = _client_settings(args) if not problem else problem
    if isinstance(settings, str):
        print(f"error: {settings}", file=sys.stderr)
        return 2
    timeout_ms = args.timeout_ms if args.timeout_ms is not None else args.interval_ms
    publisher = EventPublisher(args.events_bootstrap_server, args.events_topic, client_config=settings.events,
                               client_id=CLIENT_ID + "-events", principal=settings.events_principal).start()
    poller = make_poller(args, timeout_ms, settings.watched, want_cluster_id=not args.cluster_id)
    node_metrics = NodeMetricsReader(dict(args.node_metrics), timeout_ms, settings.node_metrics) \
        if args.node_metrics else None
    collection = Collection(poller, poller.bootstrap, args.interval_ms, args.cluster_id, node_metrics)
    log.info("polling DescribeQuorum on %s every %d ms (timeout %d ms, job threshold %d ms), publishing to %s on %s",
             _path(args), args.interval_ms, timeout_ms, args.unreachable_after_ms, args.events_topic,
             args.events_bootstrap_server)
    collection.warm_up(WARM_UP_S)
    log.info("cluster id %s", collection.cluster_id or "not known yet (asked at every poll until one answers)")
    if not collection.cluster_id and getattr(poller, "cluster_id_error", None):
        log.warning("%s; give --cluster-id", cluster_id_refusal(poller.cluster_id_error, settings.principal))
    changes = _ChangeLog(_path(args), settings.principal)
    try:
        polls, answered = _poll_until_stopped(args, collection, publisher, changes)
    finally:
        collection.close()
        publisher.close()
    if publisher.dropped_total:
        log.warning("%d record(s) could not be published to the events topic %s: %s", publisher.dropped_total,
                    args.events_topic, publisher.last_error)
    if args.count > 0 and polls and not answered:
        log.error("every one of the %d poll(s) failed to reach the quorum (last: %s)", polls, changes.last_error)
        return 1
    return 0


def _poll_until_stopped(args: argparse.Namespace, collection: Collection, publisher, changes: _ChangeLog
                        ) -> tuple[int, int]:
    """Polls at a fixed cadence until SIGTERM, Ctrl-C or `--count` polls, publishing what each
    gives; returns (polls, polls the quorum answered)."""
    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    polls = answered = 0
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
            changes.outcome(outcome)
            # no records while no cluster id is known to key them by: logged above, and --cluster-id avoids it
            for record in result.records:
                publisher.publish(record)
            changes.metrics_endpoints(result.silent_nodes)
    except KeyboardInterrupt:
        pass
    return polls, answered
