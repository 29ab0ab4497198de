"""An admin client bootstrapped from whichever bootstrap server answers first.

kafka-python bootstraps from one server at a time and waits out its whole bootstrap timeout on a
server that accepts connections and answers nothing (a frozen process, a long GC pause). That
is the moment an operator runs `quorum describe`, so the bootstrap is hedged as DescribeQuorum
is: the first server is asked, and each hedge delay without a bootstrapped client another one
is asked beside it; a server that refuses or fails is followed by the next at once. The first
client bootstrapped wins, and the others are closed as they finish (each ends by its own
bootstrap timeout, so no thread outlives the race by more than that)."""
from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

# a healthy bootstrap is a few round trips (TCP, TLS, SASL, ApiVersions, Metadata): waiting
# longer than this on one server before asking the next costs more than an extra connection
MAX_HEDGE_S = 1.0


@dataclass(frozen=True)
class Bootstrapped:
    admin: Any
    server: int               # the index of the server it bootstrapped from
    silent: tuple[int, ...]   # the servers asked that had not answered by then


class BootstrapFailed(Exception):
    """No server bootstrapped a client: `cause` is the last server's failure (None: time ran out
    with a server still silent)."""

    def __init__(self, cause: BaseException | None):
        super().__init__(str(cause) if cause is not None else "no bootstrap server answered in time")
        self.cause = cause


def hedge_delay_s(timeout_ms: int, fraction: float) -> float:
    return min(MAX_HEDGE_S, timeout_ms * fraction / 1000)


class BootstrapRace:
    """`make(server, timeout_ms)` builds a bootstrapped client or raises; `run` asks `servers`
    from `first` on, in order, hedged by `hedge_s`, within `timeout_s`."""

    def __init__(self, servers: list[str], make: Callable[[str, int], Any], hedge_s: float):
        self.servers = servers
        self.make = make
        self.hedge_s = hedge_s
        self._results: queue.Queue = queue.Queue()
        self._settled = False
        self._lock = threading.Lock()

    def run(self, first: int, timeout_s: float) -> Bootstrapped:
        deadline = time.monotonic() + timeout_s
        order = [(first + i) % len(self.servers) for i in range(len(self.servers))]
        asked = [self._start(order[0], deadline)]
        asked_at = time.monotonic()
        failed: dict[int, BaseException] = {}
        try:
            while True:
                waiting = [i for i in asked if i not in failed]
                more = len(asked) < len(order)
                now = time.monotonic()
                if more and (not waiting or now >= asked_at + self.hedge_s):
                    asked.append(self._start(order[len(asked)], deadline))
                    asked_at = now
                    continue
                if not waiting or now >= deadline:
                    raise BootstrapFailed(None if waiting else failed[asked[-1]])
                wait = min(deadline, asked_at + self.hedge_s) if more else deadline
                try:
                    server, admin, error = self._results.get(timeout=max(0.0, wait - now))
                except queue.Empty:
                    continue
                if admin is not None:
                    return Bootstrapped(admin, server, tuple(i for i in waiting if i != server))
                failed[server] = error
        finally:
            self._settle()

    def _start(self, server: int, deadline: float) -> int:
        budget_ms = max(1, int((deadline - time.monotonic()) * 1000))
        threading.Thread(target=self._bootstrap, args=(server, budget_ms), name="bootstrap-race",
                         daemon=True).start()
        return server

    def _bootstrap(self, server: int, budget_ms: int) -> None:
        try:
            admin = self.make(self.servers[server], budget_ms)
        except Exception as e:  # noqa: BLE001 - a server's failure is the race's to report
            self._results.put((server, None, e))
            return
        with self._lock:
            if not self._settled:
                self._results.put((server, admin, None))
                return
        admin.close()  # the race is over: another server won, or time ran out

    def _settle(self) -> None:
        """No result is taken after this: clients that arrived meanwhile are closed."""
        with self._lock:
            self._settled = True
        while True:
            try:
                _, admin, _ = self._results.get_nowait()
            except queue.Empty:
                return
            if admin is not None:
                threading.Thread(target=admin.close, name="admin-close", daemon=True).start()
