"""Poll DescribeQuorum of KRaft clusters and publish one record per poll, so that clusters we
cannot modify (a real Kafka, a fleet of them) are watched by the same streaming job as the
quorum nodes of this project.

  quorum collect --bootstrap-server kafka-1:9092 --cluster-id CLUSTER_ID \\
      --events-bootstrap-server monitor:9092 --events-topic quorum-events
  quorum collect --fleet fleet.yaml --shard 0/3 --events-bootstrap-server monitor:9092

Every poll gives exactly one record: `quorum_snapshot` when the quorum answered (with the
poll's latency and the node that answered), `quorum_poll_error` when it did not (Kafka's error,
such as NOT_LEADER_OR_FOLLOWER when no leader is elected, or the client's failure: timeout,
connection_refused), so a leaderless or unreachable quorum is seen as one, never as silence.
A poll is abandoned after the timeout (default: the interval), so a hanging cluster still gives
a record every interval. A node that hangs (it accepts connections and answers nothing: a
frozen process, a long GC pause) costs at most part of one poll: another node is asked after 30 %
of the timeout, and the silent one is asked last for a while. List several brokers, or give the
controllers (KIP-919), so that no single node is the collector's only path; either path takes
Kafka's client properties (TLS, SASL). Through the brokers, a poll without an answer makes the
next ones ask the controllers that the last answer named as well, with the same client
properties, until the brokers answer again (quorum.kafka_watch.cluster_poller).

With node metrics endpoints (--node-metrics ID=URL, or a fleet entry's node_metrics), every poll
also reads each node's own view of the quorum from its Prometheus JMX exporter endpoint and
publishes it as that node's `metrics` record; an endpoint that does not answer gives no record
(a round waits for them at most half the timeout), and one that refuses the connection is named
in the poll's record (`refused_nodes`): its process is gone, and the job says so at once.

`--fleet FILE` watches every cluster the file lists (quorum.kafka_watch.fleet_file), each on its
own cadence, side by side on one event loop: one that hangs, refuses or cannot be resolved
delays no other. SIGHUP re-reads the file; `--shard K/N` splits a fleet over N replicas. The
single-cluster flags are a fleet of one.

Every interval is checked against the streaming job's `health.unreachable_after_ms`
(--unreachable-after-ms): at least two polls must fall within it, or the collector refuses to
start (exit code 2), naming the numbers. Records are keyed per quorum (`events.quorum_key`) and
go through one producer (librdkafka); publishing never blocks polling (records the events Kafka
does not take within 30 s are dropped, counted and the failure named).
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import threading
from typing import Any

from quorum.config_file import ConfigFileError
from quorum.http_client_config import NO_CLIENT_CONFIG, load_http_client_config
from quorum.kafka_client import kafka_client_properties
from quorum.kafka_watch.brokers_poller import QuorumPoller
from quorum.kafka_watch.cluster_poller import CLIENT_ID
from quorum.kafka_watch.cluster_watch import WARM_UP_S, ClusterClients, ClusterRound, Poll
from quorum.kafka_watch.controller_fallback import ControllerFallback
from quorum.kafka_watch.controller_poller import ControllerQuorumPoller
from quorum.kafka_watch.events_producer import EventsProducer
from quorum.kafka_watch.fleet import Fleet
from quorum.kafka_watch.fleet_file import WatchedCluster, check_endpoints, in_shard, load_fleet, parse_shard
from quorum.kafka_watch.kafka_node_metrics import parse_endpoint
from quorum.kafka_watch.poll_interval import check_poll_interval
from quorum.kafka_watch.poll_records import record_of, snapshot, snapshot_of
from quorum.kafka_watch.status_endpoint import serve_status

__all__ = ["Collection", "record_of", "snapshot", "snapshot_of", "run", "add_arguments", "WARM_UP_S"]

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_MS = 1000
DEFAULT_UNREACHABLE_AFTER_MS = 2000  # the streaming job's health.unreachable_after_ms default
SERVE_DELIVERIES_S = 0.5  # how often the producer's delivery callbacks run (failures counted, named)
WATCHED_CLIENT = "quorum collect's client for the watched cluster"
EVENTS_CLIENT = "quorum collect's events producer"


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
    path.add_argument("--fleet", metavar="FILE",
                      help="watch every cluster this YAML file lists, one entry each (cluster_id, bootstrap_server "
                           "or bootstrap_controller, command_config, node_metrics, node_metrics_config, interval_ms, "
                           "timeout_ms; docs/deployment.md, 'Watching a fleet'); SIGHUP reads it again")
    parser.add_argument("--shard", type=_shard, metavar="K/N",
                        help="with --fleet: watch only the clusters of shard K of N (from 0), by a stable hash of "
                             "the cluster id; N replicas with K = 0..N-1 split the fleet with no overlap and no gap")
    parser.add_argument("--status-port", type=int, metavar="PORT",
                        help="serve the collector's state on http://HOST:PORT/metrics (Prometheus' text format): "
                             "the clusters watched, which are late and which answer")
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


# --- the clusters and their clients ---------------------------------------------------------------

def single_cluster(args: argparse.Namespace) -> WatchedCluster:
    """The fleet of one that the single-cluster flags describe."""
    return WatchedCluster(args.cluster_id, args.bootstrap_server, getattr(args, "bootstrap_controller", None),
                          args.interval_ms, args.timeout_ms if args.timeout_ms is not None else args.interval_ms,
                          getattr(args, "command_config", None), tuple(sorted(args.node_metrics)),
                          getattr(args, "node_metrics_config", None))


def cluster_clients(cluster: WatchedCluster, flags: bool = False) -> ClusterClients:
    """A cluster's clients' settings, read from its files; ValueError says what is wrong, naming
    the fleet entry's key (or, with `flags`, the command-line option)."""
    try:
        watched = kafka_client_properties.merged(cluster.command_config, {})
        config = kafka_client_properties.kafka_python_config(watched, WATCHED_CLIENT)
    except kafka_client_properties.ClientPropertiesError as e:
        raise ValueError(str(e)) from None
    try:
        http_client = load_http_client_config(cluster.node_metrics_config) if cluster.node_metrics_config else None
    except ConfigFileError as e:
        raise ValueError(f"{'--node-metrics-config' if flags else 'node_metrics_config'}: {e}") from None
    return ClusterClients(config, kafka_client_properties.principal(watched), http_client or NO_CLIENT_CONFIG)


def _events_properties(args: argparse.Namespace) -> dict[str, str]:
    """The events producer's client properties, checked before anything starts."""
    props = kafka_client_properties.merged(args.events_command_config, {})
    kafka_client_properties.librdkafka_config(props, EVENTS_CLIENT)
    return props


class Collection:
    """One cluster's rounds, called from plain threads (`quorum describe`-like tools and the
    tests that fold a real cluster's records into the health state): the collector's own round
    (cluster_watch.ClusterRound) on an event loop of its own."""

    def __init__(self, cluster: WatchedCluster, clients: ClusterClients | None = None):
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="collection", daemon=True)
        self._thread.start()
        self.round = self._call(_make_round(cluster, clients or cluster_clients(cluster)))

    @property
    def cluster_id(self) -> str | None:
        return self.round.cluster_id

    def warm_up(self) -> None:
        self._call(self.round.warm_up())

    def poll(self, last: bool = False) -> Poll:
        return self._call(self.round.poll(last))

    def close(self) -> None:
        async def close() -> None:
            self.round.close()
        self._call(close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(2)

    def _call(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()


async def _make_round(cluster: WatchedCluster, clients: ClusterClients) -> ClusterRound:
    return ClusterRound(cluster, clients)  # made on the loop that will run it


# --- command --------------------------------------------------------------------------------------

def check_arguments(args: argparse.Namespace) -> str | None:
    """Why these options cannot work, or None."""
    if getattr(args, "shard", None) and not getattr(args, "fleet", None):
        return "--shard splits a --fleet file, and none is given"
    if getattr(args, "fleet", None):
        for flag in ("cluster_id", "command_config", "node_metrics_config", "timeout_ms"):
            if getattr(args, flag, None):
                return f"--{flag.replace('_', '-')} is a single cluster's: with --fleet, give it in the file's entry"
        if args.node_metrics:
            return "--node-metrics is a single cluster's: with --fleet, give it in the file's entry"
        return None
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
    return check_endpoints(single_cluster(args))  # the rest is checked above, in the flags' words


def _load_fleet(args: argparse.Namespace) -> list[WatchedCluster]:
    """The clusters this process watches: the file's (this shard's), or the flags' one."""
    if not args.fleet:
        return [single_cluster(args)]
    fleet = load_fleet(args.fleet, args.unreachable_after_ms, args.interval_ms)
    return in_shard(fleet, args.shard)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # a cluster that is down would make kafka-python log every reconnect, every second; the
    # collector logs each change of the polls' outcome itself, and publishes every failure
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    for name in ("shard", "fleet", "status_port"):
        if not hasattr(args, name):
            setattr(args, name, None)
    try:
        problem = check_arguments(args)
        if problem:
            raise ValueError(problem)
        clusters = _load_fleet(args)
        if not args.fleet:
            cluster_clients(clusters[0], flags=True)  # the files' faults said before anything starts
        events_properties = _events_properties(args)
    except (ValueError, ConfigFileError, kafka_client_properties.ClientPropertiesError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    publisher = EventsProducer(args.events_bootstrap_server, args.events_topic, events_properties,
                               client_id=CLIENT_ID + "-events")
    try:
        fleet = _run_loop(_watch(args, clusters, publisher))
    except ValueError as e:  # a cluster's client files (the fleet's first load)
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        publisher.close()
    if publisher.dropped_total:
        log.warning("%d record(s) could not be published to the events topic %s: %s", publisher.dropped_total,
                    args.events_topic, publisher.last_error)
    unanswered = [w for w in fleet.ended if w.polls and not w.answered]
    if args.count > 0 and unanswered:
        for w in unanswered:
            log.error("%severy one of the %d poll(s) failed to reach the quorum (last: %s)",
                      f"{w.cluster.name}: " if args.fleet else "", w.polls, w.changes.last_error)
        return 1
    return 0


async def _watch(args: argparse.Namespace, clusters: list[WatchedCluster], publisher: EventsProducer) -> Fleet:
    fleet = Fleet(cluster_clients, publisher.publish, args.count, spread=bool(args.fleet))
    fleet.apply(clusters)
    loop = asyncio.get_running_loop()
    stopped = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopped.set)
    if args.fleet:
        loop.add_signal_handler(signal.SIGHUP, lambda: _reload(args, fleet))
    server = await serve_status("0.0.0.0", args.status_port, fleet.status) if args.status_port else None
    serving = asyncio.ensure_future(_serve_deliveries(publisher))
    _log_start(args, clusters)
    done = asyncio.ensure_future(fleet.until_done())
    try:
        await asyncio.wait([done, asyncio.ensure_future(stopped.wait())], return_when=asyncio.FIRST_COMPLETED)
    finally:
        done.cancel()
        serving.cancel()
        await fleet.stop()
        if server is not None:
            server.close()
        for sig in (signal.SIGTERM, signal.SIGINT) + ((signal.SIGHUP,) if args.fleet else ()):
            loop.remove_signal_handler(sig)
    return fleet


def _run_loop(main):
    """uvloop's event loop where it is installed (a pinned dependency: a fifth less CPU for a
    fleet's polls), asyncio's own elsewhere."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)


async def _serve_deliveries(publisher: EventsProducer) -> None:
    while True:
        await asyncio.sleep(SERVE_DELIVERIES_S)
        publisher.serve()


def _log_start(args: argparse.Namespace, clusters: list[WatchedCluster]) -> None:
    events_at = f"publishing to {args.events_topic} on {args.events_bootstrap_server}"
    if not args.fleet:
        c = clusters[0]
        log.info("polling DescribeQuorum on %s every %d ms (timeout %d ms, job threshold %d ms), %s", c.path,
                 c.interval_ms, c.timeout_ms, args.unreachable_after_ms, events_at)
        return
    shard = f" (shard {args.shard[0]}/{args.shard[1]})" if args.shard else ""
    log.info("watching %d cluster(s) of %s%s, %s: %s", len(clusters), args.fleet, shard, events_at,
             ", ".join(c.name for c in clusters) or "none in this shard")


def _reload(args: argparse.Namespace, fleet: Fleet) -> None:
    """SIGHUP: the file read again; a file that does not load keeps the fleet as it is."""
    try:
        clusters = _load_fleet(args)
        added, removed, unchanged = fleet.apply(clusters)
    except (ValueError, ConfigFileError) as e:
        log.error("the fleet file does not load, the %d cluster(s) watched stay as they are: %s",
                  len(fleet.watches), e)
        return
    log.info("fleet file %s read again: %d cluster(s) added, %d removed, %d unchanged", args.fleet, added, removed,
             unchanged)


def _shard(text: str) -> tuple[int, int]:
    try:
        return parse_shard(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
