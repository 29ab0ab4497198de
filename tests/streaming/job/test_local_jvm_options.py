"""A local-mode session's JVM runs with the job's memory settings (LOCAL_JVM_OPTIONS, two malloc
arenas) and binds to loopback (SPARK_LOCAL_IP); a cluster's and spark-submit's JVMs, and a job config or an environment that names its
own, are left alone."""
from __future__ import annotations

import os

import pytest

from streaming.spark_session import DEFAULT_JAVA_OPTIONS, LOCAL_JVM_OPTIONS, jvm_conf, prepare_environment


def test_the_test_sessions_jvm_runs_the_serial_collector(spark):
    beans = spark._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    names = {bean.getName() for bean in beans}
    assert names == {"Copy", "MarkSweepCompact"}  # HotSpot's serial collector, young and old


def test_the_test_sessions_jvm_allocates_from_two_malloc_arenas(spark):
    assert spark._jvm.java.lang.System.getenv("MALLOC_ARENA_MAX") == "2"


@pytest.mark.parametrize("name, local_value", [("SPARK_LOCAL_IP", "127.0.0.1"), ("MALLOC_ARENA_MAX", "2")])
@pytest.mark.parametrize("master", ["local[2]", "spark://10.0.0.5:7077", None])
def test_the_local_environment_is_set_for_local_masters_only(monkeypatch, name, local_value, master):
    monkeypatch.delenv(name, raising=False)
    prepare_environment(master)
    assert os.environ.get(name) == (local_value if master == "local[2]" else None)


@pytest.mark.parametrize("name, own", [("SPARK_LOCAL_IP", "10.9.8.7"), ("MALLOC_ARENA_MAX", "4")])
def test_an_operators_own_environment_is_kept(monkeypatch, name, own):
    monkeypatch.setenv(name, own)
    prepare_environment("local[2]")
    assert os.environ[name] == own


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
