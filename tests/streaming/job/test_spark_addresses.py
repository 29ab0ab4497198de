"""Driver and executor addresses: loopback in local mode only, never forced on a cluster, and an
explicit setting in the job config's `spark.conf` always wins (SPARK_LOCAL_IP: test_local_jvm_options.py)."""
from __future__ import annotations

import pytest

from streaming.spark_session import address_conf, is_local_master

LOOPBACK = {"spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1"}


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local[4,3]", "local-cluster[2,1,1024]"])
def test_local_masters_talk_over_loopback(master):
    assert is_local_master(master)
    assert address_conf(master) == LOOPBACK


@pytest.mark.parametrize("master", ["spark://10.0.0.5:7077", "spark://127.0.0.1:7077", "yarn",
                                    "k8s://https://10.0.0.1:6443", "localhost", "local-ish"])
def test_cluster_masters_keep_their_own_addresses(master):
    assert not is_local_master(master)
    assert address_conf(master) == {}
    assert address_conf(master, {"spark.executor.memory": "2g"}) == {}


def test_an_explicit_setting_wins_in_local_mode():
    assert address_conf("local[2]", {"spark.driver.host": "10.1.2.3"}) == {"spark.driver.bindAddress": "127.0.0.1"}
    both = {"spark.driver.host": "10.1.2.3", "spark.driver.bindAddress": "0.0.0.0"}
    assert address_conf("local[*]", both) == {}


def test_a_spark_below_the_floor_is_refused_naming_both_versions():
    from streaming.spark_session import check_spark_version, spark_requirement
    assert spark_requirement() is not None, "the project's metadata (pip install -e .) names pyspark"
    with pytest.raises(RuntimeError, match=r"needs pyspark==4\.2\.0, but pyspark 4\.0\.1 is installed"):
        check_spark_version("4.0.1")
    import pyspark
    check_spark_version(pyspark.__version__)
