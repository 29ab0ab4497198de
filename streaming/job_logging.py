"""The job's log, written for an operator: the job's own lines at the chosen level, Spark's WARN
and above, no py4j chatter, no progress bars, and one line per micro-batch of the health query:

    batch 42: 118 records, 0 dead letters, 1 quorum, 1 unhealthy (local-quorum degraded), 640 ms

`configure()` sets up Python's logging (called by `streaming run`); `spark_conf()` is what the
Spark session needs for its JVM side (log4j configuration, no console progress); `batch_line()`
is the per-batch line, from the query listener's progress event and the writer's snapshot.
"""
from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable


FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
BATCH_LOGGER = "streaming.batches"

# Spark's JVM loggers: WARN and above, to stderr, in the same shape as the job's own lines
LOG4J2_PROPERTIES = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{yyyy-MM-dd HH:mm:ss,SSS} %p spark.%c{1}: %m%n%ex
"""


def configure(level: str = "INFO") -> None:
    """The job's own loggers at `level`; py4j's (one INFO line per call into the JVM) at WARNING."""
    logging.basicConfig(level=level, format=FORMAT, force=True)
    logging.getLogger("py4j").setLevel(logging.WARNING)


def log4j_config_path() -> Path:
    """The log4j2 configuration for the driver's JVM, written once per machine (same content)."""
    path = Path(tempfile.gettempdir()) / "quorum-health-log4j2.properties"
    if not path.exists() or path.read_text() != LOG4J2_PROPERTIES:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(LOG4J2_PROPERTIES)
        tmp.replace(path)
    return path


def spark_conf(conf: dict[str, str]) -> dict[str, str]:
    """`conf` (the job's `spark.conf`) plus the settings that keep Spark's output to WARN and
    above without progress bars. A log4j setting of the job's own config wins."""
    out = {"spark.ui.showConsoleProgress": "false", **conf}
    java_options = out.get("spark.driver.extraJavaOptions", "")
    if "log4j2.configurationFile" not in java_options:
        option = f"-Dlog4j2.configurationFile=file:{log4j_config_path()}"
        out["spark.driver.extraJavaOptions"] = f"{java_options} {option}".strip()
    return out


def batch_line(progress: dict[str, Any], observed: dict[str, Any] | None, quorums: Iterable[dict[str, Any]],
               dead: int = 0) -> str:
    """One micro-batch in a line: its id, records read, dead letters (records failing the event
    contract: `dead`, counted by the batch writer), quorums known, the unhealthy ones by name and
    status, how long it took."""
    observed = observed or {}
    records = int(observed.get("records") or progress.get("numInputRows") or 0)
    quorums = list(quorums)
    unhealthy = sorted((q["cluster_id"], q["status"]) for q in quorums if q.get("status") != "healthy")
    duration_ms = int((progress.get("durationMs") or {}).get("triggerExecution") or 0)
    named = ", ".join(f"{cluster} {status}" for cluster, status in unhealthy[:5])
    named += ", ..." if len(unhealthy) > 5 else ""
    return (f"batch {progress.get('batchId')}: {records} records, {dead} dead letters, "
            f"{_count(len(quorums), 'quorum')}, {len(unhealthy)} unhealthy" + (f" ({named})" if named else "")
            + f", {duration_ms} ms")


# A batch this many trigger intervals long gets a second line saying where its time went: the
# first batch after a (re)start is several seconds, and a restart's time back is its sum
SLOW_BATCH_TRIGGERS = 3


def batch_time_line(progress: dict[str, Any]) -> str:
    """Where a micro-batch's time went, as Spark's progress splits it (the largest part first):

        batch 42 took 9069 ms: addBatch 6120, queryPlanning 1450, latestOffset 890, walCommit 310, ..."""
    parts = dict(progress.get("durationMs") or {})
    total = int(parts.pop("triggerExecution", 0) or 0)
    named = ", ".join(f"{name} {int(ms)}" for name, ms in sorted(parts.items(), key=lambda kv: -kv[1]))
    return f"batch {progress.get('batchId')} took {total} ms: {named or 'no parts reported'}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
