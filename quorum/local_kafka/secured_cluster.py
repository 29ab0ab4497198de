"""A secured Kafka whose controller runs apart from its broker: one controller (node 1, its
CONTROLLER listener SASL_SSL) and one broker (node 2), each made by secured_kafka.py with the
same users, passwords and certificates. Freezing the broker (SIGSTOP) leaves the controllers'
path answering: what a collector meets when every broker of a cluster hangs.

  with SecuredCluster(users=("collector",), base_dir=tmp) as cluster:
      cluster.bootstrap              # the broker's SASL_SSL listener
      cluster.controller_bootstrap   # the controller's, for `--bootstrap-controller`
"""
from __future__ import annotations

import os
import signal
from pathlib import Path

from quorum.local_kafka.local_certificates import Certificates
from quorum.local_kafka.secured_kafka import SecuredKafka

CONTROLLER_HEAP = "256m"
BROKER_HEAP = "512m"


class SecuredCluster:
    """The controller and the broker; a context manager."""

    def __init__(self, base_dir: str | os.PathLike, users: tuple[str, ...] = (),
                 certificates: Certificates | None = None):
        base = Path(base_dir)
        self.controller = SecuredKafka(users, certificates, role="controller", data_dir=base / "controller-1",
                                       heap=CONTROLLER_HEAP)
        self.broker = SecuredKafka(role="broker", controller=self.controller, data_dir=base / "broker-2",
                                   heap=BROKER_HEAP)

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    @property
    def controller_bootstrap(self) -> str:
        return self.controller.controller_bootstrap

    @property
    def cluster_id(self) -> str:
        return self.controller.cluster_id

    def properties(self, user: str, **kwargs) -> dict[str, str]:
        return self.controller.properties(user, **kwargs)

    def start(self) -> "SecuredCluster":
        self.controller.start()
        try:
            self.broker.start()
        except BaseException:
            self.controller.stop(keep_files=True)
            raise
        return self

    def freeze_broker(self) -> None:
        os.kill(self.broker.pid, signal.SIGSTOP)

    def resume_broker(self) -> None:
        os.kill(self.broker.pid, signal.SIGCONT)

    def stop(self) -> None:
        self.broker.stop()
        self.controller.stop()

    def __enter__(self) -> "SecuredCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
