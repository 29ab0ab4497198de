"""The node-metrics samples are read by hand for speed (a collector reads every node of a fleet
every second): every line is read exactly as prometheus_client's parser reads it, escapes, label
order, trailing commas, special values and timestamps included."""
import math

from quorum.kafka_watch.kafka_node_metrics import WANTED, _parsed, record_samples, samples

EXPOSITION = """# HELP kafka_server_raft_metrics_current_state raft-metrics current-state
# TYPE kafka_server_raft_metrics_current_state gauge
kafka_server_raft_metrics_current_state{state="follower"} 1.0
kafka_server_raft_metrics_current_state{state="leader",} 0.0
kafka_server_raft_metrics_current_epoch 5.0
kafka_server_raft_metrics_log_end_offset 1.2E7
kafka_controller_kafkacontroller_value{name="LastAppliedRecordOffset",} 118.0
kafka_controller_kafkacontroller_value{b="2", a="1"} NaN
kafka_controller_kafkacontroller_value{name="Esc\\"aped"} 3.0
kafka_server_raft_metrics_high_watermark -Inf
kafka_server_broker_metadata_metrics_last_applied_record_offset 7.0 1700000000000
jvm_memory_bytes_used{area="heap"} 1.0
"""


def test_samples_read_by_hand_are_those_prometheus_clients_parser_reads():
    full: dict[str, float] = {}
    for line in EXPOSITION.splitlines():
        if line.startswith(WANTED):
            full.update(_parsed(line))
    fast = samples(EXPOSITION)
    assert fast.keys() == full.keys() and len(fast) == 9
    assert all(math.isnan(fast[k]) and math.isnan(full[k]) or fast[k] == full[k] for k in fast)
    assert fast['kafka_controller_kafkacontroller_value{a="1",b="2"}'] != 0  # labels sorted, NaN kept


def test_a_records_samples_are_exactly_the_series_it_reads():
    """record_samples() reads only the series metrics_record uses: a name that merely begins
    like one, another KafkaController value and the HELP lines are left, whatever the labels'
    order, and the first line is read as any other."""
    exposition = ("kafka_server_raft_metrics_current_leader 2.0\n" + EXPOSITION
                  + "kafka_server_raft_metrics_current_epoch_total 9.0\n"
                  + 'kafka_controller_kafkacontroller_value{name="ActiveBrokerCount"} 3.0\n'
                  + 'kafka_controller_kafkacontroller_value{kind="x",name="LastAppliedRecordLagMs"} 4.0\r\n'
                  + "kafka_server_broker_metadata_metrics_last_applied_record_lag_ms 2.0")
    read = record_samples(exposition)
    assert read == {'kafka_server_raft_metrics_current_state{state="follower"}': 1.0,
                    'kafka_server_raft_metrics_current_state{state="leader"}': 0.0,
                    "kafka_server_raft_metrics_current_leader": 2.0,
                    "kafka_server_raft_metrics_current_epoch": 5.0,
                    "kafka_server_raft_metrics_log_end_offset": 1.2e7,
                    'kafka_controller_kafkacontroller_value{name="LastAppliedRecordOffset"}': 118.0,
                    'kafka_controller_kafkacontroller_value{kind="x",name="LastAppliedRecordLagMs"}': 4.0,
                    "kafka_server_raft_metrics_high_watermark": -math.inf,
                    "kafka_server_broker_metadata_metrics_last_applied_record_offset": 7.0,
                    "kafka_server_broker_metadata_metrics_last_applied_record_lag_ms": 2.0}
    everything = samples(exposition)
    assert all(everything[key] == value for key, value in read.items())
