"""Against real servers: a Prometheus that scrapes a Pushgateway (honor_labels) and the driver's
/metrics exporter; PromQL must see the flagged replica, and no longer see a vanished one."""
from __future__ import annotations

import json
import urllib.parse
import urllib.request

import pytest

from prometheus_tools import Server, http_get, promql, wait_for
from quorum.local_kafka.loopback_ports import free_port
from streaming.health.config import HealthConfig
from streaming.sinks import SinkConfig, make_batch_writer
from streaming.sinks.batch_writer import status_changed

from .health_rows import ScriptedQuorum

FLAGGED = 'quorum_replica_status{cluster="c1", status="unreachable"} == 1'


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    work = tmp_path_factory.mktemp("prometheus")
    exporter_port = free_port()
    # no persistence: Debian's default file is shared by every Pushgateway on the machine
    with Server("prometheus-pushgateway", lambda addr: [f"--web.listen-address={addr}", "--persistence.file="],
                work) as gateway:
        config = work / "prometheus.yml"
        config.write_text(json.dumps({  # JSON is YAML
            "global": {"scrape_interval": "1s"},
            "scrape_configs": [
                {"job_name": "pushgateway", "honor_labels": True,
                 "static_configs": [{"targets": [gateway.address]}]},
                {"job_name": "exporter", "static_configs": [{"targets": [f"127.0.0.1:{exporter_port}"]}]},
            ]}))
        args = lambda addr: [f"--config.file={config}", f"--storage.tsdb.path={work / 'data'}",
                             f"--web.listen-address={addr}"]
        with Server("prometheus", args, work) as prometheus:
            yield gateway, prometheus, exporter_port


def gateway_series(gateway: Server, *matchers: str) -> list[str]:
    """Sample lines the Pushgateway holds that contain every matcher (only this test's groups:
    a free port may have been someone else's gateway a moment ago, with pushers still at it)."""
    lines = http_get(f"{gateway.url}/metrics").decode().splitlines()
    return [ln for ln in lines if not ln.startswith("#") and all(m in ln for m in matchers)]


def flagged_with_observer() -> tuple[ScriptedQuorum, list[dict]]:
    """c1: voter 3 unreachable, observer 4 still fetching."""
    q = ScriptedQuorum("c1", observers=(4,))
    q.rows(3000)
    q.script.mode[3] = "silent"
    return q, q.rows(4000)


def observer_vanishes(q: ScriptedQuorum) -> list[dict]:
    """Observer 4 stops fetching; after 300 s the tracker forgets it (as the leader does)."""
    q.script.mode[4] = "silent"
    rows = q.rows(301_000, proc_ms=2000)
    assert any(r["kind"] == "forget" and r["replica_id"] == 4 for r in rows)
    return rows


def test_pushgateway_mode_prometheus_sees_the_flagged_replica_then_not_once_it_vanished(servers):
    gateway, prometheus, _ = servers
    writer = make_batch_writer(SinkConfig.from_dict({"prometheus": {"pushgateway_url": gateway.url}}),
                               HealthConfig())
    q, rows = flagged_with_observer()
    writer.monitor.record_input(len(rows))
    writer.write_rows(rows + ScriptedQuorum("c2").rows(3000), batch_id=0)
    assert writer.flush()
    [series] = wait_for(lambda: promql(prometheus, FLAGGED), 30, "the flagged replica in Prometheus")
    labels = series["metric"]
    assert (labels["job"], labels["replica"], labels["role"]) == ("quorum_health", "3", "voter")
    assert promql(prometheus, 'quorum_monitor_input_stalled{cluster="_monitor"}')
    assert writer.monitor.push_failures_total == 0

    assert promql(prometheus, 'quorum_replica_status{cluster="c1", replica="4"}')

    # Observer 4 forgotten: the PUT replaces the job's group, so its series go.
    writer.write_rows(observer_vanishes(q), batch_id=1)
    assert writer.flush()
    assert not gateway_series(gateway, 'cluster="c1"', 'replica="4"')
    wait_for(lambda: not promql(prometheus, 'quorum_replica_status{cluster="c1", replica="4"}'), 30,
             "observer 4's series to disappear")
    assert promql(prometheus, FLAGGED)  # the rest of the cluster is still there
    assert promql(prometheus, 'quorum_replica_status{cluster="c2", replica="3"}')  # other clusters untouched

    # Quorum c2 forgotten by the processor (silent past quorum_forget_ms): its series go.
    forget = {"kind": "forget", "cluster_id": "c2", "topic": "__cluster_metadata", "partition": 0, "seq": 10**6,
              "now_ms": 0, "proc_ms": 3000, "last_input_proc_ms": 1000, "silent": True, "replica_id": None}
    writer.write_rows([forget] + q.rows(1000, proc_ms=3000), batch_id=2)
    assert writer.flush()
    assert not gateway_series(gateway, 'cluster="c2"') and gateway_series(gateway, 'cluster="c1"')
    writer.close()


def test_exporter_mode_prometheus_scrapes_the_driver_and_vanished_series_go(servers):
    _, prometheus, exporter_port = servers
    writer = make_batch_writer(SinkConfig.from_dict(
        {"prometheus": {"mode": "exporter", "exporter_host": "127.0.0.1", "exporter_port": exporter_port}}),
        HealthConfig())
    try:
        q, rows = flagged_with_observer()
        writer.write_rows(rows, batch_id=0)
        query = FLAGGED.replace('cluster="c1"', 'job="exporter", cluster="c1"')
        [series] = wait_for(lambda: promql(prometheus, query), 30, "the flagged replica scraped from the driver")
        assert series["metric"]["replica"] == "3"
        assert promql(prometheus, 'quorum_monitor_last_batch_timestamp_seconds{job="exporter"}')
        assert promql(prometheus, 'quorum_replica_status{job="exporter", replica="4"}')
        writer.write_rows(observer_vanishes(q), batch_id=1)
        wait_for(lambda: not promql(prometheus, 'quorum_replica_status{job="exporter", replica="4"}'), 30,
                 "observer 4's series to disappear from the exporter")
        assert promql(prometheus, query)
    finally:
        writer.close()


def pushed_groups(gateway: Server, job: str) -> list[dict[str, str]]:
    """The grouping labels of the gateway's groups of one job."""
    groups = json.loads(http_get(f"{gateway.url}/api/v1/metrics"))["data"]
    return [g["labels"] for g in groups if g["labels"].get("job") == job]


def test_every_cluster_and_the_monitor_go_in_one_group_of_the_job(servers):
    gateway = servers[0]
    writer = make_batch_writer(SinkConfig.from_dict({"prometheus": {"pushgateway_url": gateway.url,
                                                                    "job": "many_clusters"}}), HealthConfig())
    try:
        clusters = [f"many-{c}" for c in range(30)]
        writer.write_rows([r for c in clusters for r in ScriptedQuorum(c).rows(2000)], batch_id=0)
        assert writer.flush()
        assert writer.monitor.push_failures_total == 0 and not writer.prometheus.pending
        pushed = {line.split('cluster="')[1].split('"')[0]
                  for line in gateway_series(gateway, 'job="many_clusters"', "quorum_status{")}
        assert pushed == set(clusters)
        assert gateway_series(gateway, 'job="many_clusters"', "quorum_monitor_input_stalled{", 'cluster="_monitor"')
        assert pushed_groups(gateway, "many_clusters") == [{"job": "many_clusters"}]
    finally:
        writer.close()


def test_an_upgrade_deletes_the_jobs_groups_per_cluster_and_nothing_else(servers):
    """Before, the job pushed a group per cluster; their series are the one group's series, which
    the gateway refuses to hold twice, so they go before the first push. Groups of other jobs, and
    of this job under other grouping keys, stay."""
    gateway = servers[0]

    def put(path: str, body: str) -> None:
        request = urllib.request.Request(f"{gateway.url}/metrics/{path}", data=body.encode(), method="PUT")
        urllib.request.urlopen(request, timeout=5).read()
    old_c1 = "# TYPE quorum_leader_id gauge\nquorum_leader_id{partition=\"__cluster_metadata-0\"} 1\n"
    put("job/upgrade/cluster/c1", old_c1)
    put("job/upgrade/cluster/c9", old_c1)
    put("job/upgrade/cluster/_monitor", "# TYPE quorum_monitor_input_stalled gauge\nquorum_monitor_input_stalled 0\n")
    put("job/upgrade/instance/other", "# TYPE kept gauge\nkept 1\n")
    put("job/another_job/cluster/c1", old_c1)

    writer = make_batch_writer(SinkConfig.from_dict({"prometheus": {"pushgateway_url": gateway.url,
                                                                    "job": "upgrade"}}), HealthConfig())
    try:
        writer.write_rows(ScriptedQuorum("c1").rows(2000), batch_id=0)
        assert writer.flush(30)
        assert writer.monitor.push_failures_total == 0 and writer.prometheus.cluster_groups_deleted
        assert sorted(map(sorted, (g.items() for g in pushed_groups(gateway, "upgrade")))) == [
            [("instance", "other"), ("job", "upgrade")], [("job", "upgrade")]]
        assert pushed_groups(gateway, "another_job") == [{"job": "another_job", "cluster": "c1"}]
        assert not gateway_series(gateway, 'job="upgrade"', 'cluster="c9"')
        assert gateway_series(gateway, 'job="upgrade"', 'cluster="c1"', "quorum_status{")
    finally:
        writer.close()


def test_pushgateway_down_is_retried_counted_and_never_fatal():
    dead = f"http://127.0.0.1:{free_port()}"
    writer = make_batch_writer(SinkConfig.from_dict(
        {"prometheus": {"pushgateway_url": dead, "push_attempts": 3, "retry_backoff_s": 0.05}}), HealthConfig())
    backoffs: list[float] = []
    writer.prometheus.sleep = backoffs.append  # record the waits between tries instead of waiting
    rows = [r for c in range(20) for r in ScriptedQuorum(f"c{c}").rows(2000)]
    writer.write_rows(rows, batch_id=0)
    assert writer.flush()
    writer.write_rows([], batch_id=1)
    assert writer.flush()
    # One failed round counted per batch, whatever the number of clusters; the gateway stays
    # behind (pending) for the next round; three tries a round, the waits doubling.
    assert writer.monitor.push_failures_total == 2
    assert writer.prometheus.pending
    assert backoffs == [0.05, 0.1] * 2


def test_a_gateway_that_holds_its_answers_holds_up_the_metrics_not_the_batch():
    """The pusher works off the batch: while the gateway sits on a PUT, batches go on, and once it
    answers, a round pushes the newest state of everything."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    received, release, pushed = threading.Event(), threading.Event(), []

    class HoldingGateway(BaseHTTPRequestHandler):
        def do_GET(self):  # the groups to clean up: none
            body = b'{"status": "success", "data": []}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_PUT(self):
            body = self.rfile.read(int(self.headers["Content-Length"])).decode()
            received.set()
            release.wait(60)
            pushed.append((urllib.parse.unquote(self.path), body))
            self.send_response(202)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), HoldingGateway)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    writer = make_batch_writer(SinkConfig.from_dict(
        {"prometheus": {"pushgateway_url": f"http://127.0.0.1:{server.server_port}", "push_timeout_s": 30}}),
        HealthConfig())
    try:
        writer.write_rows(ScriptedQuorum("c1").rows(2000), batch_id=0)
        assert received.wait(30)  # c1's round is at the gateway, held there
        writer.write_rows(ScriptedQuorum("c2").rows(2000), batch_id=1)  # returns with c1's PUT still held
        assert not writer.flush(0.2) and pushed == []
        release.set()
        assert writer.flush(30)
        assert [path for path, _ in pushed] == ["/metrics/job/quorum_health"] * 2
        assert all(f'cluster="{c}"' in pushed[-1][1] for c in ("c1", "c2", "_monitor"))
        assert writer.monitor.push_failures_total == 0
    finally:
        release.set()
        writer.close()
        server.shutdown()


def test_values_that_only_moved_wait_for_the_push_interval_and_a_changed_status_goes_at_once(servers):
    """Against the real Pushgateway, with a 60 s interval: the first round goes at once; a batch
    in which c1's values only moved leaves the gateway behind and its push time unchanged; a
    batch in which c2's voter turns unreachable starts a round at once, which takes c1's newest
    values along; a later batch in which values only moved waits again."""
    import time

    gateway = servers[0]
    writer = make_batch_writer(SinkConfig.from_dict({"prometheus": {
        "pushgateway_url": gateway.url, "job": "interval", "push_interval_ms": 60_000}}), HealthConfig())

    def push_time() -> float | None:
        lines = gateway_series(gateway, 'job="interval"', "push_time_seconds{")
        return float(lines[0].rsplit(" ", 1)[1]) if lines else None

    def c1_high_watermark() -> list[str]:
        return gateway_series(gateway, 'job="interval"', "quorum_high_watermark{", 'cluster="c1"')

    try:
        c1, c2 = ScriptedQuorum("c1"), ScriptedQuorum("c2")
        writer.write_rows(c1.rows(2000) + c2.rows(2000), batch_id=0)
        first = wait_for(push_time, 30, "the first round")
        first_hw = c1_high_watermark()

        moved = c1.rows(3000)
        assert moved and not status_changed(moved)
        writer.write_rows(moved, batch_id=1)
        time.sleep(1.0)  # an absence to observe: nothing may be pushed within the interval
        assert push_time() == first and writer.prometheus.pending and c1_high_watermark() == first_hw

        c2.script.mode[3] = "silent"
        flagged = c2.rows(7000)
        assert status_changed(flagged) and {e["cluster_id"] for e in flagged if e["kind"] == "transition"} == {"c2"}
        started = time.monotonic()
        writer.write_rows(flagged, batch_id=2)
        wait_for(lambda: gateway_series(gateway, 'job="interval"', 'cluster="c2"', 'status="unreachable"', "} 1"),
                 20, "c2's unreachable voter at the gateway")
        assert time.monotonic() - started < 20  # not the 60 s interval
        assert writer.flush(30) and not writer.prometheus.pending
        second = push_time()
        assert second > first and c1_high_watermark() != first_hw  # c1's newest values went along

        writer.write_rows(c1.rows(1000), batch_id=3)
        time.sleep(1.0)  # the interval runs from the urgent round
        assert push_time() == second and writer.prometheus.pending
        assert writer.monitor.push_failures_total == 0
    finally:
        writer.close()


def test_a_fleet_pushed_as_one_group_is_told_to_use_the_exporter(monkeypatch, caplog):
    from streaming.sinks import pushgateway
    monkeypatch.setattr(pushgateway, "FLEET_QUORUMS", 5)
    dead = f"http://127.0.0.1:{free_port()}"
    writer = make_batch_writer(SinkConfig.from_dict(
        {"prometheus": {"pushgateway_url": dead, "push_attempts": 1}}), HealthConfig())
    advice = lambda: [r.getMessage() for r in caplog.records if "sink.prometheus.mode: exporter" in r.getMessage()]
    writer.write_rows([r for c in range(5) for r in ScriptedQuorum(f"c{c}").rows(2000)], batch_id=0)
    assert writer.flush()
    assert advice() == []  # at the bound: nothing to say
    writer.write_rows([r for c in range(5, 8) for r in ScriptedQuorum(f"c{c}").rows(2000)], batch_id=1)
    assert writer.flush()
    writer.write_rows([], batch_id=2)
    assert writer.flush()
    assert len(advice()) == 1 and "all 8 quorums' series" in advice()[0]  # said once, not every round
    writer.write_rows([r for c in range(8, 16) for r in ScriptedQuorum(f"c{c}").rows(2000)], batch_id=3)
    assert writer.flush()
    assert len(advice()) == 2 and "all 16 quorums' series" in advice()[1]  # again once it doubled
