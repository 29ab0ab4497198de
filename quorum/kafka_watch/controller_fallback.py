"""The brokers' path to DescribeQuorum, and the controllers' own while the brokers give no answer.

A broker answers DescribeQuorum by forwarding it to the controller it believes leads. When
that controller hangs or is cut off, the broker waits out its own request timeout (tens of
seconds) before it forwards to the new leader, and every poll through it times out meanwhile,
though the controllers elected a new leader within seconds: the collector would be blind to
the very fault it watches. So the poller remembers the controllers' endpoints that each
DescribeQuorum v2 answer names (`nodes`, the voters' controller listeners), and after a poll
through the brokers without an answer it asks those controllers directly as well, side by
side with the brokers, the first answer winning. Once the brokers answer again, the
controllers are no longer asked.

The controllers are asked with the brokers' client properties (TLS, SASL: controller_poller
speaks them). Controllers that refuse them (a controller listener with a mechanism or a
truststore of its own) are named once in the log, and the polls go on through the brokers
alone; `--bootstrap-controller` with the controllers' own `--command-config` asks them directly.
A refusal of the collector's own credentials or rights through the brokers is not a blind path:
it is reported, never worked around.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any

from quorum.kafka_client import kafka_failures
from quorum.kafka_watch.controller_poller import ControllerQuorumPoller
from quorum.kafka_watch.poll_outcome import PollOutcome

log = logging.getLogger("quorum.kafka_watch.collector")


def controller_endpoints(info) -> tuple[str, ...]:
    """host:port of each voter's first controller listener, as a v2 answer names them."""
    voters = {v.replica_id for v in info.voters}
    return tuple(sorted(f"{ls[0].host}:{ls[0].port}" for node, ls in info.nodes.items() if node in voters and ls))


class ControllerFallback:
    """The same contract as brokers_poller.QuorumPoller (poll never raises, never outlasts the
    timeout), around one: `brokers`."""

    def __init__(self, brokers):
        self.brokers = brokers
        self.bootstrap = brokers.bootstrap
        self.timeout_ms = brokers.timeout_ms
        self._controllers: ControllerQuorumPoller | None = None
        self._endpoints: tuple[str, ...] = ()
        self._blind = False  # the last poll through the brokers gave no answer
        self._refused: str | None = None  # what the controllers last said of the client properties
        self._probe: threading.Thread | None = None  # a poll through the brokers still running
        self._lock = threading.Lock()

    @property
    def want_cluster_id(self) -> bool:
        return self.brokers.want_cluster_id

    @want_cluster_id.setter
    def want_cluster_id(self, value: bool) -> None:
        self.brokers.want_cluster_id = value

    def warm_up(self, timeout_s: float) -> str | None:
        return self.brokers.warm_up(timeout_s)

    def poll(self):
        with self._lock:
            controllers = self._controllers if self._blind else None
        if controllers is None:
            return self._through_brokers()
        start = time.monotonic()
        box: dict[str, Any] = {}
        probe = None
        if self._probe is None or not self._probe.is_alive():  # one poll through the brokers at a time
            probe = self._probe = threading.Thread(target=lambda: box.update(outcome=self._through_brokers()),
                                                   name="describe-quorum-brokers", daemon=True)
            probe.start()
        direct = controllers.poll()
        self._note_refusal(direct)
        if direct.info is not None:
            return direct
        if probe is not None:  # the controllers did not answer either: what the brokers said
            probe.join(max(0.0, self.timeout_ms / 1000 - (time.monotonic() - start)))
            if "outcome" in box:
                return box["outcome"]
        if direct.error in kafka_failures.COLLECTOR_SIDE:  # the brokers' path is what is blind
            return PollOutcome(int((time.monotonic() - start) * 1000), error=kafka_failures.TIMEOUT)
        return direct

    def close(self) -> None:
        self.brokers.close()
        with self._lock:
            controllers, self._controllers = self._controllers, None
        if controllers is not None:
            controllers.close()

    def _note_refusal(self, direct) -> None:
        """Logs once that the controllers refuse the brokers' client properties."""
        refused = direct.error if direct.error in kafka_failures.COLLECTOR_SIDE else None
        if refused and refused != self._refused:
            log.warning("the controllers %s refuse the client properties (%s): %s; polls go on through %s alone "
                        "(--bootstrap-controller with the controllers' own --command-config asks them directly)",
                        ",".join(self._endpoints), refused, kafka_failures.explain(refused), self.bootstrap)
        self._refused = refused

    def _through_brokers(self):
        outcome = self.brokers.poll()
        if outcome.info is not None:
            self._learn(outcome.info)
            if self._blind:
                log.info("DescribeQuorum answers through %s again: the controllers are no longer asked directly",
                         self.bootstrap)
            self._blind = False
        elif outcome.error not in kafka_failures.COLLECTOR_SIDE and self._endpoints and not self._blind:
            log.warning("DescribeQuorum through %s: no answer (%s); asking the controllers %s directly as well "
                        "until the brokers answer again", self.bootstrap, outcome.error, ",".join(self._endpoints))
            self._blind = True
        return outcome

    def _learn(self, info) -> None:
        endpoints = controller_endpoints(info)
        if not endpoints or endpoints == self._endpoints:
            return
        replaced = ControllerQuorumPoller(",".join(endpoints), timeout_ms=self.timeout_ms,
                                          client_config=self.brokers.client_config, topic=self.brokers.topic, partition=self.brokers.partition,
                                          want_cluster_id=False)
        with self._lock:
            old, self._controllers, self._endpoints = self._controllers, replaced, endpoints
        if old is not None:
            threading.Thread(target=old.close, name="controllers-close", daemon=True).start()
