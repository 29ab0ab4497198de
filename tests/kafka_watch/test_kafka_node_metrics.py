"""A Kafka node's JMX exporter answer as the collector reads it: the state label, Kafka 4.x's
state names mapped onto the contract, KIP-835's gauges for controllers and brokers, and an
answer without raft-metrics refused with a message that says what to check. (The real endpoints
are read in tests/kafka_quorum.)"""
from __future__ import annotations

import pytest

from quorum.kafka_watch.kafka_node_metrics import NodeMetricsError, metrics_record

CONTROLLER = """\
# HELP kafka_server_raft_metrics_current_state raft-metrics current-state
# TYPE kafka_server_raft_metrics_current_state gauge
kafka_server_raft_metrics_current_state{state="%s"} 1.0
kafka_server_raft_metrics_current_epoch 7.0
kafka_server_raft_metrics_current_leader %s
kafka_server_raft_metrics_log_end_offset 120.0
kafka_server_raft_metrics_high_watermark 118.0
kafka_server_raft_metrics_commit_latency_avg NaN
kafka_controller_kafkacontroller_value{name="LastAppliedRecordOffset"} 117.0
kafka_controller_kafkacontroller_value{name="LastAppliedRecordTimestamp"} 1.7000000005E12
kafka_controller_kafkacontroller_value{name="LastAppliedRecordLagMs"} 40.0
kafka_controller_kafkacontroller_value{name="LastCommittedRecordOffset"} %s
"""
BROKER = """\
kafka_server_raft_metrics_current_state{state="observer"} 1.0
kafka_server_raft_metrics_current_epoch 7.0
kafka_server_raft_metrics_current_leader 2.0
kafka_server_raft_metrics_log_end_offset 118.0
kafka_server_raft_metrics_high_watermark 118.0
kafka_server_broker_metadata_metrics_last_applied_record_offset 117.0
kafka_server_broker_metadata_metrics_last_applied_record_timestamp 1.7000000005E12
kafka_server_broker_metadata_metrics_last_applied_record_lag_ms 12.0
"""


@pytest.mark.parametrize("kafka_state, state", [
    ("leader", "leader"), ("follower", "follower"), ("prospective", "prospective"),
    ("prospective-voted", "prospective"), ("unattached-voted", "voted"), ("unattached", "unattached"),
    ("candidate", "candidate"), ("resigned", "resigned"),
])
def test_a_controllers_answer_becomes_its_metrics_record(kafka_state, state):
    m = metrics_record(CONTROLLER % (kafka_state, "2.0", "118.0"), "c1", 3, 1_700_000_000_600, (1, 2, 3))
    assert (m.node_id, m.state, m.epoch, m.leader_id, m.log_end_offset, m.high_watermark) == (3, state, 7, 2, 120, 118)
    assert (m.last_applied_offset, m.last_applied_timestamp_ms, m.last_applied_lag_ms, m.last_committed_offset) == \
        (117, 1_700_000_000_500, 40, 118)
    assert m.voter_set == (1, 2, 3) and m.time_ms == 1_700_000_000_600


def test_a_node_without_a_leader_and_gauges_read_at_two_instants_still_give_a_valid_record():
    m = metrics_record(CONTROLLER % ("prospective", "-1.0", "116.0"), "c1", 3, 1, ())
    assert m.leader_id == -1 and m.last_committed_offset == -1  # applied 117 > committed 116: not both true


def test_a_brokers_answer_uses_its_broker_metadata_gauges():
    m = metrics_record(BROKER, "c1", 4, 1, (1, 2, 3))
    assert (m.state, m.last_applied_offset, m.last_applied_lag_ms, m.last_committed_offset) == ("observer", 117, 12, -1)


def test_an_answer_without_raft_metrics_says_what_to_check():
    with pytest.raises(NodeMetricsError, match="no raft-metrics.*kafka-jmx-exporter.yml"):
        metrics_record("jvm_memory_bytes_used 1.0\n", "c1", 3, 1, ())


# --- the reader: one endpoint that hangs or refuses delays no other node's view ------------------

class Endpoints:
    """Three loopback endpoints: one serving a controller's answer over HTTP, one that accepts
    connections and never answers (a frozen JVM's agent), one where nothing listens."""

    def __enter__(self):
        import http.server
        import socket
        import threading
        body = (CONTROLLER % ("follower", "2.0", "118.0")).encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.hung = socket.socket()
        self.hung.bind(("127.0.0.1", 0))
        self.hung.listen(16)
        from quorum.local_kafka.loopback_ports import free_port
        self.urls = {1: f"http://127.0.0.1:{self.http.server_port}/metrics",
                     2: f"http://127.0.0.1:{self.hung.getsockname()[1]}/metrics",
                     3: f"http://127.0.0.1:{free_port()}/metrics"}
        return self

    def __exit__(self, *exc):
        self.http.shutdown()
        self.hung.close()


def test_a_hung_endpoint_delays_no_other_nodes_view_and_a_refusing_one_is_named():
    import asyncio
    import time
    from quorum.kafka_watch.kafka_node_metrics import WAIT_FRACTION
    from quorum.kafka_watch.node_scrapes import NodeScrapes
    timeout_ms = 1000

    async def rounds(urls: dict[int, str]) -> list:
        reader = NodeScrapes(urls, timeout_ms)
        out = []
        try:
            for _ in range(4):
                started = time.monotonic()
                records, errors, refusing = await reader.finish(reader.begin(), "c1", (1, 2, 3))
                out.append((time.monotonic() - started, records, errors, refusing))
        finally:
            reader.close()
        return out

    with Endpoints() as e:
        for round_, (took, records, errors, refusing) in enumerate(asyncio.run(rounds(e.urls))):
            print(f"round {round_}: {took * 1000:.0f} ms, records of {[r.node_id for r in records]}, "
                  f"errors {errors}")
            assert [r.node_id for r in records] == [1] and set(errors) == {2, 3} and refusing == [3]
            assert took <= WAIT_FRACTION * timeout_ms / 1000 + 0.2
