"""Build the SparkSession the job and the tests use, with the settings this job needs."""
from __future__ import annotations

import os
import sys

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def prepare_environment() -> None:
    """PySpark's Python workers connect back to the JVM on the local address; pin both to
    loopback and to this interpreter so workers start the same environment as the driver."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def build_spark(master: str = "local[*]", app_name: str = "quorum-health", shuffle_partitions: int = 2,
                extra_conf: dict[str, str] | None = None):
    prepare_environment()
    from pyspark.sql import SparkSession
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.sql.streaming.stateStore.providerClass", ROCKSDB_PROVIDER)
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.enabled", "false")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true"))
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
