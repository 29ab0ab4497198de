"""Build the SparkSession the job and the tests use, with the settings this job needs."""
from __future__ import annotations

import os
import sys

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
# Each micro-batch commits every state partition. With changelog checkpointing a commit writes the
# changed keys; without it, a RocksDB snapshot is uploaded every time (measured on local[2], 8
# partitions: the state commit went from about 800 ms a batch, summed over partitions, to 500).
CHANGELOG_CHECKPOINTING = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
CHECKPOINT_FILE_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"
# Spark's default manager goes through Hadoop's FileContext, which on a local disk without
# Hadoop's native library forks `readlink` for every rename (and there are several per batch).
# The FileSystem one renames with rename(2), as atomic on a local disk; used for local checkpoints.
LOCAL_CHECKPOINT_FILE_MANAGER = \
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
# Python workers talk to their JVM (the health processor's state server above all: every state
# call is a round trip) over a Unix domain socket instead of loopback TCP. Measured by
# benchmarks/state_round_trip.py: a round trip 0.87 x the TCP one (and, timed once with the
# worker's thread CPU clock, its own CPU per call 30-51 us against 47-78). Worker and JVM are on
# the same host in every deployment (executor and its workers); a job's `spark.conf` can turn it off.
UNIX_SOCKETS = "spark.python.unix.domain.socket.enabled"
# HotSpot does not compile a method of more than 8,000 bytes of bytecode (HugeMethodLimit): it
# runs interpreted for ever. Spark's limit for a whole-stage-codegen method is 65,535 by default,
# and the decoding stage's (route_records: the fast path's checks, the routing of the rest) is
# 10,943 bytes, so it ran interpreted: 16% of the JVM's samples in Java Flight Recorder at 6,000
# events/s from 200 clusters. With Spark's limit at HotSpot's, Spark runs such a stage without
# whole-stage codegen, on generated projections split into small methods the JIT compiles (Spark's
# own advice for HotSpot). Measured with benchmarks/batch_breakdown.py --clusters 200 --rate 4500:
# batch median 2,238 -> 1,126 ms, longest 5,765 -> 2,296 ms.
HUGE_METHOD_LIMIT = "spark.sql.codegen.hugeMethodLimit"
HOTSPOT_HUGE_METHOD_LIMIT = 8000
LOOPBACK = "127.0.0.1"
# the driver's addresses: pinned to loopback in local mode only
ADDRESS_KEYS = ("spark.driver.bindAddress", "spark.driver.host")


def is_local_master(master: str) -> bool:
    """`local`, `local[N]`, `local[*]`, `local[N,F]`, `local-cluster[...]`: everything in this process
    (or on this machine)."""
    return master == "local" or master.startswith(("local[", "local-cluster["))


def address_conf(master: str, conf: dict[str, str] | None = None) -> dict[str, str]:
    """The address settings to add. In local mode the driver and its executors talk over loopback
    (a machine whose hostname resolves to an unreachable address still works); on a cluster
    nothing is added, since executors on other hosts must reach the driver at a routable address.
    A setting given in `conf` (the job config's `spark.conf`) always wins."""
    if not is_local_master(master):
        return {}
    given = conf or {}
    return {key: LOOPBACK for key in ADDRESS_KEYS if key not in given}


def prepare_environment(master: str | None = None) -> None:
    """PySpark's Python workers start this interpreter, so they import what the driver imports. In
    local mode the JVM this process starts also binds to loopback (SPARK_LOCAL_IP); on a cluster, or
    with the master not known yet, the environment's own address is kept."""
    if master is not None and is_local_master(master):
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def spark_requirement():
    """pyproject's pyspark requirement (the version floor's one home), from the installed project's
    metadata; None when the code runs from a zip without it."""
    from importlib import metadata
    from packaging.requirements import Requirement
    try:
        requirements = metadata.requires("quorum-health-monitor") or []
    except metadata.PackageNotFoundError:
        return None
    return next((r for r in map(Requirement, requirements) if r.name == "pyspark"), None)


def check_spark_version(version: str) -> None:
    """Refuse a Spark the job cannot run on, saying which it needs, rather than failing later on a
    missing API (the row-based transformWithState is new in 4.1.0)."""
    requirement = spark_requirement()
    if requirement is not None and not requirement.specifier.contains(version, prereleases=True):
        raise RuntimeError(f"the quorum health job needs pyspark{requirement.specifier}, "
                           f"but pyspark {version} is installed")


def submitted_master() -> str | None:
    """spark-submit's --master when spark-submit launched this process: its JVM is already running
    with it as a system property (a pure-Python SparkConf() does not see it)."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return None
    from pyspark import SparkContext
    SparkContext._ensure_initialized()
    return SparkContext._jvm.java.lang.System.getProperty("spark.master")


def build_spark(master: str = "local[*]", app_name: str = "quorum-health", shuffle_partitions: int = 2,
                extra_conf: dict[str, str] | None = None):
    """The session on `master`; under spark-submit, spark-submit's --master wins."""
    master = submitted_master() or master
    prepare_environment(master)
    import pyspark
    check_spark_version(pyspark.__version__)
    from pyspark.sql import SparkSession
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.sql.streaming.stateStore.providerClass", ROCKSDB_PROVIDER)
               .config(CHANGELOG_CHECKPOINTING, "true")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .config(UNIX_SOCKETS, "true")
               .config(HUGE_METHOD_LIMIT, str(HOTSPOT_HUGE_METHOD_LIMIT)))
    for key, value in {**address_conf(master, extra_conf), **(extra_conf or {})}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def is_local_path(location: str) -> bool:
    """A checkpoint on this machine's disk: a plain path or a file: URI."""
    from urllib.parse import urlparse
    scheme = urlparse(location).scheme
    return scheme in ("", "file")


def use_local_checkpoint_manager(spark, checkpoint_location: str) -> None:
    """For a checkpoint on local disk, the rename-based checkpoint file manager (see
    LOCAL_CHECKPOINT_FILE_MANAGER), unless the session already names one."""
    if is_local_path(checkpoint_location) and spark.conf.get(CHECKPOINT_FILE_MANAGER, "") == "":
        spark.conf.set(CHECKPOINT_FILE_MANAGER, LOCAL_CHECKPOINT_FILE_MANAGER)
