"""Build the SparkSession the job and the tests use, with the settings this job needs."""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from streaming.checkpoint_files import hadoop_path

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
# call is a round trip) over a Unix domain socket instead of loopback TCP: a round trip takes
# 0.87 x the TCP one, and the worker's own CPU per call 30-51 us against 47-78. Worker and JVM are on
# the same host in every deployment (executor and its workers); a job's `spark.conf` can turn it off.
UNIX_SOCKETS = "spark.python.unix.domain.socket.enabled"
# HotSpot does not compile a method of more than 8,000 bytes of bytecode (HugeMethodLimit): it
# runs interpreted for ever. Spark's limit for a whole-stage-codegen method is 65,535 by default.
# With Spark's limit at HotSpot's, Spark runs a larger stage without whole-stage codegen, on
# generated projections split into small methods the JIT compiles (Spark's own advice for
# HotSpot). Spark 4.2 compiles the decoding stage (route_records) into 4,362 bytes, under the
# limit; a stage that grows past it (Spark 4.1 compiled the same stage into 10,943 bytes and ran
# it interpreted, doubling the batch time at 4,500 events/s) is still compiled.
HUGE_METHOD_LIMIT = "spark.sql.codegen.hugeMethodLimit"
HOTSPOT_HUGE_METHOD_LIMIT = 8000
# In local mode the whole job runs in the one JVM this process starts, with Spark's 1 GB heap.
# HotSpot picks G1 on a machine of 2 cores or more, which commits heap it seldom gives back
# (577 MB with 266 in use), keeps ~60 MB of its own bookkeeping, and starts from an initial heap
# of 1/64 of the machine's memory. The serial collector from a small initial heap keeps the JVM
# near what it uses (~100 MB live watching one quorum). Measured with
# `benchmarks/job_startup.py --runs job --warm-seconds 180`, the job watching 1
# quorum for 3 minutes: the JVM's memory went from 873 MB to 733, its CPU once warm 0.24 to 0.22
# CPU s per s (a young collection a second, ~8 ms). Tighter heap bounds (MaxHeapFreeRatio=30)
# took it to 643 MB but ran a full collection every 8 s: +0.04 CPU s per s.
# Spark prepends these to spark.driver.extraJavaOptions, so an option given there wins.
LOCAL_JVM_OPTIONS = "-XX:+UseSerialGC -Xms32m"
DEFAULT_JAVA_OPTIONS = "spark.driver.defaultJavaOptions"
# glibc gives each thread that allocates natively (RocksDB, compression, Netty) an arena of its
# own, up to 8 per core, each holding on to what it once used: watching 2,000 quorums the local
# JVM held some 300 MB in a dozen of them. Two arenas took its memory from 1,089-1,095 MB to
# 1,032 (`benchmarks/fleet_job.py --sizes 2000`, with MALLOC_ARENA_MAX=2 and without, the same
# hour) at the same CPU. An operator's own setting is kept; executors on a cluster take theirs
# from spark.executorEnv.MALLOC_ARENA_MAX.
MALLOC_ARENAS = ("MALLOC_ARENA_MAX", "2")
LOOPBACK = "127.0.0.1"
# the driver's addresses: pinned to loopback in local mode only
ADDRESS_KEYS = ("spark.driver.bindAddress", "spark.driver.host")


def is_local_master(master: str) -> bool:
    """`local`, `local[N]`, `local[*]`, `local[N,F]`, `local-cluster[...]`: everything in this process
    (or on this machine)."""
    return master == "local" or master.startswith(("local[", "local-cluster["))


REDACTION_REGEX = "(?i)secret|password|token|access[.]key|jaas"  # Spark's default, and JAAS configs
OPTIONS_REDACTION_REGEX = "(?i)url|jaas|password|keystore[.]key"


def address_conf(master: str, conf: dict[str, str] | None = None) -> dict[str, str]:
    """The address settings to add. In local mode the driver and its executors talk over loopback
    (a machine whose hostname resolves to an unreachable address still works); on a cluster
    nothing is added, since executors on other hosts must reach the driver at a routable address.
    A setting given in `conf` (the job config's `spark.conf`) always wins."""
    if not is_local_master(master):
        return {}
    given = conf or {}
    return {key: LOOPBACK for key in ADDRESS_KEYS if key not in given}


def jvm_conf(master: str, conf: dict[str, str] | None = None) -> dict[str, str]:
    """The JVM options of a local-mode session this process starts (LOCAL_JVM_OPTIONS); nothing on
    a cluster, under spark-submit (its JVM is already running), or when the job's `spark.conf`
    sets spark.driver.defaultJavaOptions itself."""
    if not is_local_master(master) or "PYSPARK_GATEWAY_PORT" in os.environ or DEFAULT_JAVA_OPTIONS in (conf or {}):
        return {}
    return {DEFAULT_JAVA_OPTIONS: LOCAL_JVM_OPTIONS}


def prepare_environment(master: str | None = None) -> None:
    """PySpark's Python workers start this interpreter, so they import what the driver imports. In
    local mode the JVM this process starts also binds to loopback (SPARK_LOCAL_IP) and allocates
    natively from two arenas (MALLOC_ARENAS); on a cluster, or with the master not known yet, the
    environment's own are kept."""
    if master is not None and is_local_master(master):
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
        os.environ.setdefault(*MALLOC_ARENAS)
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


def _artifact(jar_name: str) -> str:
    """A jar's artifact name without its version: `kafka-clients-3.9.2.jar` -> `kafka-clients`."""
    return re.sub(r"-\d+(\.\d+)+([-.]\w+)*\.jar$", "", jar_name)


def connector_jars() -> list[str]:
    """The Kafka connector's jars deploy/setup.sh fetched, less those PySpark already ships (its
    own versions of Hadoop's client, Scala, SLF4J and the codecs stay the ones Spark runs on)."""
    import pyspark
    from quorum import jvm
    shipped = {_artifact(jar.name) for jar in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return [str(jar) for jar in jvm.jars(jvm.SPARK_KAFKA) if _artifact(jar.name) not in shipped]


def connector_conf(master: str, conf: dict[str, str] | None = None) -> dict[str, str]:
    """How a session this process starts gets Spark's Kafka connector. Nothing when the session is
    spark-submit's (its --packages brings it) or the config names jars or packages itself; else the
    jars deploy/setup.sh fetched, or, where they were never fetched, the package from Maven Central
    (Spark's Ivy resolution, which looks in the local Maven cache first)."""
    given = conf or {}
    if "PYSPARK_GATEWAY_PORT" in os.environ or "spark.jars.packages" in given or "spark.jars" in given:
        return {}
    from quorum.jvm import JvmPartsMissing
    try:
        return {"spark.jars": ",".join(connector_jars())}
    except JvmPartsMissing:
        import pyspark
        from streaming.source import connector_package
        return {"spark.jars.packages": connector_package(pyspark.__version__)}


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
               .config(HUGE_METHOD_LIMIT, str(HOTSPOT_HUGE_METHOD_LIMIT))
               # the source's Kafka options hold a JAAS config with a password: Spark's plans, UI
               # and logs show options and settings matching these as *********(redacted)
               .config("spark.redaction.regex", REDACTION_REGEX)
               .config("spark.sql.redaction.options.regex", OPTIONS_REDACTION_REGEX))
    for key, value in {**address_conf(master, extra_conf), **connector_conf(master, extra_conf),
                       **jvm_conf(master, extra_conf), **(extra_conf or {})}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def is_local_path(location: str) -> bool:
    """A checkpoint on this machine's disk: a plain path or a file: URI."""
    from urllib.parse import urlparse
    scheme = urlparse(location).scheme
    return scheme in ("", "file")


def use_local_checkpoint_manager(spark, checkpoint_location: str) -> None:
    """For a checkpoint on local disk, the rename-based checkpoint file manager (see
    LOCAL_CHECKPOINT_FILE_MANAGER), unless the session already names one, and no checksum files
    (`skip_local_checksums`)."""
    if not is_local_path(checkpoint_location):
        return
    if spark.conf.get(CHECKPOINT_FILE_MANAGER, "") == "":
        spark.conf.set(CHECKPOINT_FILE_MANAGER, LOCAL_CHECKPOINT_FILE_MANAGER)
    skip_local_checksums(spark)


def local_file_system(spark):
    """The JVM's Hadoop file system for `file:` paths, the one instance every local path of this
    process uses. Whatever class `fs.file.impl` names: one without checksums ignores
    `setWriteChecksum`."""
    return hadoop_path(spark, "file:///")[1]


def skip_local_checksums(spark) -> None:
    """Local files written without a `.crc` file beside each. Without Hadoop's native library,
    Hadoop forks `chmod` to set a local file's permissions, and a checksum file is one more file
    whose permissions it sets. The job writes the offset and commit log entries and each state
    partition's changelog every micro-batch: measured on the idle job watching 1 quorum, the
    processes it started went from 24 to 14 a second, the CPU of those and of the JVM's thread
    that reaps them from 0.043 to 0.013 CPU s per s, each log entry's write from 10-11 ms to 7
    and the state store's load from 27 to 17 ms a batch. A checksum already there is still
    checked on read and removed when its file is written again; HDFS and S3 keep their own."""
    local_file_system(spark).setWriteChecksum(False)
