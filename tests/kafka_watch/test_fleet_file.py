"""The fleet file of `quorum collect --fleet`: every entry checked as the single-cluster flags
are, a faulty file refused whole naming the entry and the key, and shards that split a fleet with
no overlap and no gap, alike on every replica."""
from __future__ import annotations

import pytest

from quorum.config_file import ConfigFileError
from quorum.kafka_watch.fleet_file import WatchedCluster, in_shard, load_fleet, parse_shard, shard_of

GOOD = """
interval_ms: 1000
clusters:
  - cluster_id: payments
    bootstrap_server: k-1:9092,k-2:9092
    command_config: payments.properties
    node_metrics: {1: "http://k-1:7071/metrics", 2: "https://k-2:7071/metrics"}
  - cluster_id: search
    bootstrap_controller: c-1:9093
    interval_ms: 500
"""


def load(tmp_path, text: str, unreachable_after_ms: int = 2000) -> list[WatchedCluster]:
    (tmp_path / "payments.properties").write_text("security.protocol=SSL\n")
    (tmp_path / "fleet.yaml").write_text(text)
    return load_fleet(tmp_path / "fleet.yaml", unreachable_after_ms, 1000)


def test_a_fleet_file_gives_each_cluster_its_path_files_endpoints_and_own_interval(tmp_path):
    payments, search = load(tmp_path, GOOD)
    assert (payments.cluster_id, payments.bootstrap_server, payments.bootstrap_controller) == \
        ("payments", "k-1:9092,k-2:9092", None)
    assert payments.command_config == str(tmp_path / "payments.properties")  # read from the file's directory
    assert payments.node_metrics == ((1, "http://k-1:7071/metrics"), (2, "https://k-2:7071/metrics"))
    assert (payments.interval_ms, payments.timeout_ms) == (1000, 1000)
    assert (search.bootstrap_controller, search.interval_ms, search.timeout_ms) == ("c-1:9093", 500, 500)
    assert load(tmp_path, GOOD) == [payments, search]  # equal entries: a reload leaves them running


@pytest.mark.parametrize("change, named", [
    (("  - cluster_id: search\n", "  - bootstrap_server: x:1\n"), "clusters[1].cluster_id: every cluster needs its id"),
    (("    bootstrap_controller: c-1:9093\n", "    bootstrap_controller: c-1:9093\n    bootstrap_server: b:1\n"),
     "clusters[1] (search): give bootstrap_server or bootstrap_controller"),
    (("cluster_id: search", "cluster_id: payments"), "clusters[1].cluster_id: payments is listed twice"),
    (("    interval_ms: 500\n", "    interval_ms: 1500\n"), "clusters[1] (search): interval 1500 ms"),
    (("    interval_ms: 500\n", "    interval_ms: 500\n    timeout_ms: 800\n"), "the timeout 800 ms is longer"),
    (("    interval_ms: 500\n", "    interval_ms: 500\n    brokers: x\n"), "clusters[1].brokers: unknown"),
    (("payments.properties", "missing.properties"), "command_config: "),
    (('1: "http://k-1:7071/metrics"', '1: "k-1:7071"'), "node_metrics: expected NODE_ID=http"),
    (("k-1:9092,k-2:9092", "k-1,k-2"), "expected HOST:PORT"),
])
def test_a_faulty_entry_refuses_the_whole_file_naming_the_entry_and_the_key(tmp_path, change, named):
    with pytest.raises(ConfigFileError) as refused:
        load(tmp_path, GOOD.replace(*change))
    print(refused.value)
    assert named in str(refused.value) and str(tmp_path / "fleet.yaml") in str(refused.value)


def test_a_file_without_clusters_is_refused(tmp_path):
    with pytest.raises(ConfigFileError, match="clusters: expected a list"):
        load(tmp_path, "interval_ms: 1000\n")


def test_shards_split_a_fleet_with_no_overlap_and_no_gap():
    fleet = [WatchedCluster(f"cluster-{i:04d}", "b:1", None, 1000, 1000) for i in range(1000)]
    for n in (1, 2, 3, 7):
        shards = [in_shard(fleet, (k, n)) for k in range(n)]
        ids = [c.cluster_id for shard in shards for c in shard]
        assert sorted(ids) == sorted(c.cluster_id for c in fleet)  # every cluster in exactly one shard
        assert min(map(len, shards)) > 1000 / n * 0.8  # and the shards are about even
    assert in_shard(fleet, None) == fleet


def test_a_clusters_shard_is_the_same_in_every_process():
    import os
    import subprocess
    import sys
    ids = ["payments", "search", "MkU3OEVBNTcwNTJENDM2Qg"]
    here = [shard_of(cid, 3) for cid in ids]
    for seed in ("1", "2"):  # Python's own hash() of a string differs with the seed
        code = f"from quorum.kafka_watch.fleet_file import shard_of; print([shard_of(c, 3) for c in {ids!r}])"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONHASHSEED": seed}).stdout
        assert out.strip() == str(here)


@pytest.mark.parametrize("text", ["3/3", "1", "a/2", "-1/2", "1/0"])
def test_a_shard_outside_its_count_is_refused(text):
    with pytest.raises(ValueError, match="0 <= K < N"):
        parse_shard(text)
