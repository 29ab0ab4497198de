"""The clusters a collector process watches, each a coroutine of its own on one event loop
(cluster_watch), all publishing through one events producer. The fleet changes by `apply`
(the file re-read on SIGHUP): clusters added start, clusters removed stop, and a cluster whose
entry is unchanged is left polling as it was.

Which clusters are late (no record for more than two intervals: the collector is not keeping
up, or no cluster id is known to key the records by) is logged at each change, and served with
each cluster's state on the status endpoint (`--status-port`, Prometheus' text format)."""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable

from quorum import events
from quorum.kafka_watch.cluster_watch import ClusterClients, ClusterWatch
from quorum.kafka_watch.fleet_file import WatchedCluster
from quorum.kafka_watch.quorum_links import endpoints
from quorum.open_files import raise_soft_limit

log = logging.getLogger("quorum.kafka_watch.collector")

LATE_CHECK_S = 2.0  # how often lateness is looked at
FILES_BASE = 128  # the process's own: the events producer's, the status endpoint's, Python's


def _key(cluster: WatchedCluster) -> str:
    return cluster.cluster_id or cluster.path


class Fleet:
    """`clients(cluster)` reads a cluster's client settings (raising ValueError naming what is
    wrong); `publish` takes every record."""

    def __init__(self, clients: Callable[[WatchedCluster], ClusterClients],
                 publish: Callable[[events.Record], None], count: int = 0, spread: bool = False):
        self._clients = clients
        self.spread = spread  # the clusters' rounds spread over the interval (cluster_watch)
        self._publish = publish
        self.count = count
        self.watches: dict[str, tuple[ClusterWatch, asyncio.Task]] = {}
        self.ended: list[ClusterWatch] = []  # watches that stopped by themselves (--count)
        self._late: set[str] = set()

    def apply(self, clusters: list[WatchedCluster]) -> tuple[int, int, int]:
        """Makes these clusters the fleet: (added, removed, unchanged). Every new entry's client
        settings are read first: if any fails, nothing changes and the ValueError says which."""
        _make_room(clusters)
        wanted = {_key(c): c for c in clusters}
        current = {key: watch.cluster for key, (watch, _) in self.watches.items()}
        starting = [c for key, c in wanted.items() if current.get(key) != c]
        clients = {}
        for c in starting:
            try:
                clients[_key(c)] = self._clients(c)
            except ValueError as e:
                raise ValueError(f"{c.name}: {e}") from None
        removed = [key for key, c in current.items() if wanted.get(key) != c]
        for key in removed:
            watch, task = self.watches.pop(key)
            task.cancel()
            self._late.discard(key)
        for c in starting:
            watch = ClusterWatch(c, clients[_key(c)], self._publish, self.count, self.spread)
            task = asyncio.ensure_future(watch.run())
            task.add_done_callback(lambda t, w=watch: self._ended(w, t))
            self.watches[_key(c)] = (watch, task)
        added = len([c for c in starting if _key(c) not in current])
        return added, len(removed) - (len(starting) - added), len(wanted) - len(starting)

    def _ended(self, watch: ClusterWatch, task: asyncio.Task) -> None:
        if task.cancelled():
            return
        if task.exception() is not None:  # a bug, never the cluster: said, and the others go on
            log.error("%s: the watch stopped: %r", watch.cluster.name, task.exception(),
                      exc_info=task.exception())
        self.ended.append(watch)

    async def until_done(self) -> None:
        """Until every watch has ended (`count` rounds each), or forever."""
        while self.watches:
            tasks = [task for _, task in self.watches.values()]
            await asyncio.wait(tasks, timeout=LATE_CHECK_S)
            self.check_lateness()
            if all(task.done() for task in tasks) and self.count > 0:
                return

    async def stop(self) -> None:
        tasks = [task for _, task in self.watches.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def check_lateness(self) -> None:
        """Logs the clusters that fell behind their cadence, and those that caught up."""
        now = time.monotonic()
        late = {key: watch.late_s(now) for key, (watch, task) in self.watches.items() if not task.done()}
        behind = {key for key, s in late.items() if s > 0}
        for key in sorted(behind - self._late):
            why = "" if self.watches[key][0].round.cluster_id else ": its cluster id is not known yet"
            log.warning("%s is late: no record for %.1f s more than two intervals%s", key, late[key], why)
        for key in sorted(self._late - behind):
            if key in late:
                log.info("%s publishes on time again", key)
        self._late = behind

    def status(self) -> str:
        """Prometheus' text format: the fleet's size and each cluster's state."""
        now = time.monotonic()
        lines = ["# HELP quorum_collector_clusters Clusters this collector watches.",
                 "# TYPE quorum_collector_clusters gauge", f"quorum_collector_clusters {len(self.watches)}",
                 "# HELP quorum_collector_cluster_late_seconds How far a cluster's records are behind two "
                 "intervals (0: on time).", "# TYPE quorum_collector_cluster_late_seconds gauge"]
        watches = sorted(self.watches.items())
        for key, (watch, _) in watches:
            lines.append(f'quorum_collector_cluster_late_seconds{{cluster="{_label(key)}"}} {watch.late_s(now):.3f}')
        lines += ["# HELP quorum_collector_cluster_answering Whether the cluster's last poll was answered.",
                  "# TYPE quorum_collector_cluster_answering gauge"]
        for key, (watch, _) in watches:
            lines.append(f'quorum_collector_cluster_answering{{cluster="{_label(key)}"}} {int(watch.answering)}')
        return "\n".join(lines) + "\n"


def _make_room(clusters: list[WatchedCluster]) -> None:
    """The open-files limit raised for a connection to every node and every metrics endpoint of
    the fleet (and the controllers asked while brokers are blind); said when the hard limit is lower."""
    needed = FILES_BASE + sum(2 * len(endpoints(c.bootstrap_server or c.bootstrap_controller or ""))
                              + len(c.node_metrics) for c in clusters)
    soft, hard = raise_soft_limit(needed)
    if soft < needed:
        log.warning("%d cluster(s) need about %d open files, and the hard limit is %d: raise it (ulimit -Hn, "
                    "LimitNOFILE=) or shard the fleet (--shard)", len(clusters), needed, hard)


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
