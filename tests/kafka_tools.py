"""Apache Kafka's own command-line tools, run from the jars deploy/setup.sh fetched, as a
reference for the project's commands."""
from __future__ import annotations

import subprocess

from quorum import jvm

METADATA_QUORUM = "org.apache.kafka.tools.MetadataQuorumCommand"


def kafka_tool(main_class: str, *args: str, timeout_s: float = 60) -> subprocess.CompletedProcess:
    """Run one of Kafka's tools with the broker's class path; its log goes nowhere."""
    return subprocess.run([jvm.java(), "-Xmx256m", "-Dlog4j2.level=OFF", "-cp", jvm.classpath(jvm.KAFKA),
                           main_class, *args], capture_output=True, text=True, timeout=timeout_s)


def metadata_quorum(bootstrap: str, *args: str) -> str:
    """`kafka-metadata-quorum --bootstrap-server BOOTSTRAP describe ARGS`'s output."""
    out = kafka_tool(METADATA_QUORUM, "--bootstrap-server", bootstrap, "describe", *args)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout
