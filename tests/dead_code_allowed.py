"""Vulture's whitelist: names in quorum/, streaming/ and deploy/ that are used where vulture cannot
see it (a framework's callback, a library reading an attribute, a wire or metrics field).

Not imported by anything: tests/structure/test_dead_code.py hands it to vulture beside the code.
Each line names one object; the comment says who uses it.
"""
from vulture.whitelist_utils import Whitelist

_ = Whitelist()

# --- framework callbacks ------------------------------------------------------------------------
_.do_POST               # deploy/alert_console.py: http.server calls it for a POST (Alertmanager's webhook)
_.log_message           # deploy/alert_console.py, streaming/sinks/exposition_http.py: http.server's access log, silenced
_.handle_error          # streaming/sinks/metrics_server.py: socketserver calls it when a request raises
_.daemon_threads        # streaming/sinks/metrics_server.py: ThreadingMixIn reads it (request threads do not block exit)
_.connection_made       # quorum/kafka_watch/metrics_connection.py: asyncio.Protocol callback
_.data_received         # quorum/kafka_watch/metrics_connection.py: asyncio.Protocol callback
_.eof_received          # quorum/kafka_watch/metrics_connection.py: asyncio.Protocol callback
_.connection_lost       # quorum/kafka_watch/metrics_connection.py: asyncio.Protocol callback
_.handleInputRows       # streaming/health/processor.py, buckets.py: PySpark's StatefulProcessor (transformWithState) calls it
_.handleExpiredTimer    # streaming/health/processor.py, buckets.py: PySpark's StatefulProcessor calls it on a timer
_.expiredTimerInfo      # the parameter of handleExpiredTimer: PySpark's signature, passed by name
_.onQueryStarted        # streaming/progress_listener.py: Spark's StreamingQueryListener callback (through py4j)
_.onQueryProgress       # streaming/progress_listener.py: Spark's StreamingQueryListener callback
_.onQueryIdle           # streaming/progress_listener.py: Spark's StreamingQueryListener callback
_.onQueryTerminated     # streaming/progress_listener.py: Spark's StreamingQueryListener callback
_.Java                  # streaming/progress_listener.py: py4j reads the nested Java class to learn the interface
_.implements            # streaming/progress_listener.py: py4j's list of the Java interfaces implemented

# --- dispatch by name ---------------------------------------------------------------------------
_._on_tick              # quorum/sim/cluster.py: getattr(self, "_on_" + kind) runs the simulator's events
_._on_flush             # quorum/sim/cluster.py: "_on_" + kind dispatch
_._on_client            # quorum/sim/cluster.py: "_on_" + kind dispatch
_._on_noop              # quorum/sim/cluster.py: "_on_" + kind dispatch
_._on_graceful_stop     # quorum/sim/faults.py: scheduled as "graceful_stop", run by the "_on_" + kind dispatch
_._on_fault             # quorum/sim/faults.py: scheduled as "fault", run by the "_on_" + kind dispatch
_._on_deliver           # quorum/sim/network.py: scheduled as "deliver", run by the "_on_" + kind dispatch
_._on_heal              # quorum/sim/network.py: scheduled as "heal", run by the "_on_" + kind dispatch

# --- attributes a library reads -----------------------------------------------------------------
_.API_VERSION           # quorum/wire/codec.py, quorum/kafka_client/kafka_login_probe.py: kafka-python's Request/Response encode in this version
_._header               # quorum/node/cluster_info.py: kafka-python's response header, cleared so the body is re-headed
_.id_val                # deploy/grafana/build_dashboard.py: the Grafana SDK serializes it as the panel's "id"

# --- wire, record and metrics fields ------------------------------------------------------------
_.OFFSET_OUT_OF_RANGE       # quorum/raft/messages.py Errors: a Kafka error code the protocol can carry on the wire
_.INCONSISTENT_VOTER_SET    # quorum/raft/messages.py Errors: a Kafka error code the protocol can carry on the wire
_.max_timestamp_ms          # quorum/storage/record_batches.py BatchInfo: a field of the record batch header as parsed
_.election_latency_avg      # quorum/raft/metrics.py RaftMetrics: Kafka's raft-metrics name, part of the metrics snapshot
_.fetch_records_rate        # quorum/raft/metrics.py RaftMetrics: Kafka's raft-metrics name, part of the metrics snapshot
_.poll_idle_ratio_avg       # quorum/raft/metrics.py RaftMetrics: Kafka's raft-metrics name, part of the metrics snapshot
_.number_unknown_voter_connections  # quorum/raft/metrics.py RaftMetrics: Kafka's raft-metrics name, part of the metrics snapshot
