"""Push to a Prometheus Pushgateway: every cluster and the job's own health as one group, replaced
whole (HTTP PUT).

One group per job (grouping key: `job` alone). The gateway checks each PUT against every series
it holds, so a group per cluster cost it in the square of the clusters: a round of 100 cluster
groups took 1.4 s of its CPU, of 200 groups 7.5 s, more than the 5 s between rounds; the one
group 0.05 and 0.1 s. The series keep their own `cluster` label (the job's health:
cluster="_monitor"), so they are the series a group per cluster gave. A PUT replaces the group: a replica or cluster gone from the snapshot is gone from
the gateway at the next push.

Upgrading from a group per cluster: the gateway refuses a PUT holding a series another group
holds, so before its first push the sink deletes this job's groups keyed by `job` and `cluster`
(listed with GET /api/v1/metrics). Every job needs a `job` name of its own: two jobs under one
name replace each other's group.

A Pushgateway that is down must never stop the job: a round is tried `push_attempts` times with
doubling backoff; after that the failure is counted (`quorum_monitor_push_failures_total`) and
the next batch's round pushes the newest state.

Pushes run on a thread of their own, off the micro-batch: `publish` marks that a round is wanted
and returns, and the pusher renders the latest snapshot when it pushes (a gauge needs only its
newest value). So the gateway's answer time never adds to a batch, and a slow gateway delays the
metrics, never the health state or the event topic. `flush` waits for the wanted rounds (tests,
and `close`).

Rounds are at least `push_interval_ms` apart: values that only moved (lags, ages, ratios) wait;
Prometheus reads the gateway only when it scrapes. A batch in which a cluster's status or cause
changed (`urgent`) starts a round at once, so a page is never held back.

A gateway that requires TLS or basic auth (its own `--web.config.file`) is reached with the
`pushgateway_client_config` file (Prometheus' HTTP client config: `tls_config`, `basic_auth`);
every request goes through it, the pushes, the deletes and the listing of groups. A refused
password is a failed round like any other, logged with the gateway's answer (401), never with
the credentials.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from typing import Callable, Iterable

from prometheus_client import CollectorRegistry, delete_from_gateway, push_to_gateway

from quorum.http_client_config import HttpClientConfig

from .config import PrometheusSinkConfig
from .monitor import MonitorMetrics
from .prometheus_metrics import HealthCollector
from .snapshot import HealthSnapshot

log = logging.getLogger(__name__)
MONITOR_GROUP = "_monitor"  # the `cluster` label of the job's own health series
# Past this many quorums a push round is a fleet's whole exposition, rendered by the library and
# replaced whole by the gateway: at 2,000 quorums (158,011 series) it timed out (docs/performance.md).
FLEET_QUORUMS = 500


class PushgatewaySink:
    def __init__(self, cfg: PrometheusSinkConfig, snapshot: HealthSnapshot, monitor: MonitorMetrics,
                 sleep: Callable[[float], None] = time.sleep):
        self.cfg, self.snapshot, self.monitor, self.sleep = cfg, snapshot, monitor, sleep
        self.client = cfg.pushgateway_client()
        self._handler = client_handler(self.client)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(HealthCollector(snapshot, monitor, monitor_labels={"cluster": MONITOR_GROUP}))
        self.pending = False     # the gateway is behind the snapshot (set by publish, cleared by a pushed round)
        self.cluster_groups_deleted = False  # the upgrade's clean-up (see the module's docstring) is done
        self._changed = threading.Condition()
        self._rounds_wanted = 0  # publish calls not yet taken up by a round
        self._urgent = False     # a status or cause changed: push without waiting for the interval
        self._pushing = False
        self._flushing = 0       # flush() calls waiting: no waiting for the interval either
        self._next_round_at = 0.0  # time.monotonic()
        self._closing = False
        self._thread: threading.Thread | None = None
        self._fleet_warned_at = 0  # the quorums pushed when the log last said the gateway is no path for a fleet

    def publish(self, urgent: bool = False) -> None:
        """Ask for a round; the pusher thread sends it (see the module's docstring), the whole
        snapshot. `urgent` (a status or cause changed) makes it go at once."""
        with self._changed:
            self.pending = True
            self._urgent = self._urgent or urgent
            self._rounds_wanted += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._pusher, name="pushgateway-pusher", daemon=True)
                self._thread.start()
            self._changed.notify_all()

    def flush(self, timeout_s: float | None = None) -> bool:
        """Wait until every publish so far has been pushed (or failed and been counted)."""
        with self._changed:
            self._flushing += 1
            self._changed.notify_all()
            try:
                return self._changed.wait_for(lambda: not self._rounds_wanted and not self._pushing, timeout_s)
            finally:
                self._flushing -= 1

    def _round_due(self) -> bool:
        return (self._urgent or self._flushing > 0 or self._closing
                or time.monotonic() >= self._next_round_at)

    def _pusher(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._rounds_wanted or self._closing)
                if not self._rounds_wanted:
                    return
                while not self._round_due():
                    self._changed.wait(max(0.0, self._next_round_at - time.monotonic()))
                self._rounds_wanted, self._urgent, self.pending, self._pushing = 0, False, False, True
                self._next_round_at = time.monotonic() + self.cfg.push_interval_ms / 1000
            try:
                pushed = self._push_round()
            except Exception:  # never let the pusher die: the next round pushes the newest state
                log.exception("Pushgateway push round failed")
                pushed = False
            if not pushed:
                self.monitor.record_push_failures()
            with self._changed:
                self.pending = self.pending or not pushed
                self._pushing = False
                self._changed.notify_all()

    def _push_round(self) -> bool:
        self.warn_if_fleet(len(self.snapshot.quorums))
        if not self.cluster_groups_deleted:
            if not self._try(self._delete_cluster_groups, "delete the per-cluster groups"):
                return False
            self.cluster_groups_deleted = True
        return self._try(self._push, "push")

    def _push(self) -> None:
        push_to_gateway(self.cfg.pushgateway_url, job=self.cfg.job, registry=self.registry,
                        timeout=self.cfg.push_timeout_s, handler=self._handler)

    def warn_if_fleet(self, quorums: int) -> None:
        """Say once (and again each time the fleet doubles) that a fleet's series go as one group."""
        if quorums > FLEET_QUORUMS and quorums >= 2 * self._fleet_warned_at:
            self._fleet_warned_at = quorums
            log.warning("Pushgateway %s: every push round sends all %d quorums' series as one group; for a fleet "
                        "of this size set sink.prometheus.mode: exporter (docs/deployment.md, \"The job for a fleet\")",
                        self.cfg.pushgateway_url, quorums)

    def _delete_cluster_groups(self) -> None:
        url = f"{self.cfg.pushgateway_url.rstrip('/')}/api/v1/metrics"
        if not url.startswith("http"):
            url = f"http://{url}"  # as push_to_gateway reads the gateway's address
        with self.client.open(url, self.cfg.push_timeout_s) as answer:
            groups = json.loads(answer.read())["data"]
        clusters = sorted(g["labels"]["cluster"] for g in groups
                          if g["labels"].get("job") == self.cfg.job and set(g["labels"]) == {"job", "cluster"})
        for cluster in clusters:
            delete_from_gateway(self.cfg.pushgateway_url, job=self.cfg.job, grouping_key={"cluster": cluster},
                                timeout=self.cfg.push_timeout_s, handler=self._handler)
        if clusters:
            log.info("Pushgateway %s: deleted %d groups of job=%s keyed by cluster, left by an earlier version "
                     "(the job now pushes one group)", self.cfg.pushgateway_url, len(clusters), self.cfg.job)

    def _try(self, action: Callable[[], None], what: str) -> bool:
        backoff = self.cfg.retry_backoff_s
        for attempt in range(1, self.cfg.push_attempts + 1):
            try:
                action()
                return True
            except Exception as e:  # URLError, HTTPError, timeouts: all mean "not pushed"
                if attempt == self.cfg.push_attempts:
                    log.warning("Pushgateway %s: %s failed after %d attempts: %s",
                                self.cfg.pushgateway_url, what, attempt, e)
                    return False
                self.sleep(backoff)
                backoff *= 2
        return False

    def close(self) -> None:
        """Push what is wanted (bounded by the retries of one round), then stop the pusher."""
        self.flush(self.cfg.push_attempts * (self.cfg.push_timeout_s + self.cfg.retry_backoff_s) * 4)
        with self._changed:
            self._closing = True
            self._changed.notify_all()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None


def client_handler(client: HttpClientConfig) -> Callable:
    """A prometheus_client push handler that sends its request through `client` (its TLS
    context and basic auth); an answer of 400 or more raises, as the library's own handler's."""
    def handler(url: str, method: str, timeout: float | None, headers: Iterable[tuple[str, str]], data: bytes):
        def send() -> None:
            client.open(url, timeout, method=method, data=data, headers=headers).close()
        return send
    return handler
