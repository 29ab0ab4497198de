"""A local-mode session's JVM runs with the job's memory settings (LOCAL_JVM_OPTIONS); a cluster's
and spark-submit's JVMs, and a job config that names its own, are left alone."""
from __future__ import annotations

import pytest

from streaming.spark_session import DEFAULT_JAVA_OPTIONS, LOCAL_JVM_OPTIONS, jvm_conf


def test_the_test_sessions_jvm_runs_the_serial_collector(spark):
    beans = spark._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    names = {bean.getName() for bean in beans}
    assert names == {"Copy", "MarkSweepCompact"}  # HotSpot's serial collector, young and old


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]"])
def test_local_masters_get_the_options(master, monkeypatch):
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    assert jvm_conf(master) == {DEFAULT_JAVA_OPTIONS: LOCAL_JVM_OPTIONS}


def test_a_cluster_spark_submit_or_the_configs_own_options_are_left_alone(monkeypatch):
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    assert jvm_conf("spark://10.0.0.5:7077") == {}
    assert jvm_conf("local[2]", {DEFAULT_JAVA_OPTIONS: "-XX:+UseG1GC"}) == {}
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "4040")
    assert jvm_conf("local[2]") == {}
