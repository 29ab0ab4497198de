"""Decoding's rejects of a micro-batch, one JSON-lines file per batch: kept once, on any file system."""
from __future__ import annotations

import json

import pytest

from streaming.health.config import HealthConfig
from streaming.health.schema import DEAD_LETTER_KEY, DEAD_LETTER_KIND
from streaming.sinks.batch_writer import HealthBatchWriter
from streaming.sinks.config import SinkConfig
from streaming.sinks.dead_letters import DeadLetterFiles, batch_file_name

LINES = [json.dumps({"reason": "invalid_json", "field": "record", "offset": i}) for i in range(3)]


def dead_letter_row(line: str) -> dict:
    return {"kind": DEAD_LETTER_KIND, "cluster_id": DEAD_LETTER_KEY[0], "topic": DEAD_LETTER_KEY[1],
            "partition": DEAD_LETTER_KEY[2], "status": json.loads(line)["reason"], "dead_letter": line}


def test_a_batch_replayed_rewrites_its_own_file_so_each_reject_is_kept_once(tmp_path):
    files = DeadLetterFiles(str(tmp_path / "dead"))
    files.write(7, LINES)
    files.write(7, LINES)  # the same batch again, after a restart
    files.write(8, [])     # a batch without rejects leaves no file
    assert sorted(p.name for p in (tmp_path / "dead").iterdir()) == [batch_file_name(7)]
    assert (tmp_path / "dead" / batch_file_name(7)).read_text().splitlines() == LINES


def test_the_writer_takes_dead_letter_rows_out_of_the_batch_before_the_snapshot_sees_them(tmp_path):
    writer = HealthBatchWriter(SinkConfig.from_dict({"prometheus": {"mode": "off"}}), HealthConfig(),
                               dead_letter_dir=str(tmp_path / "dead"))
    writer.write_rows([dead_letter_row(line) for line in LINES], batch_id=3)
    assert writer.snapshot.views() == []
    assert (tmp_path / "dead" / batch_file_name(3)).read_text().splitlines() == LINES
    # counted by reason for the job's own metrics, and for the batch's log line
    assert writer.monitor.invalid_records_total == {"invalid_json": 3} and writer.dead_letters_in(3) == 3


def test_without_a_dead_letter_path_the_rows_are_dropped_not_shown_as_quorums():
    writer = HealthBatchWriter(SinkConfig.from_dict({"prometheus": {"mode": "off"}}), HealthConfig())
    writer.write_rows([dead_letter_row(LINES[0])], batch_id=1)
    assert writer.snapshot.views() == []
    assert writer.monitor.invalid_records_total == {"invalid_json": 1}


@pytest.mark.spark
def test_a_path_with_a_scheme_is_written_through_hadoops_file_system(spark, tmp_path):
    files = DeadLetterFiles(f"file://{tmp_path}/dead/")
    files.write(12, LINES, spark)
    files.write(12, LINES[:1], spark)  # replayed: replaced, not appended
    assert sorted(p.name for p in (tmp_path / "dead").iterdir()) == [batch_file_name(12)]
    assert (tmp_path / "dead" / batch_file_name(12)).read_text().splitlines() == LINES[:1]


def test_a_path_with_a_scheme_needs_spark():
    with pytest.raises(ValueError, match="Hadoop"):
        DeadLetterFiles("s3a://bucket/dead").write(1, LINES)


def test_records_the_state_machine_refuses_go_under_stateful_one_file_per_batch(tmp_path):
    writer = HealthBatchWriter(SinkConfig.from_dict({"prometheus": {"mode": "off"}}), HealthConfig(),
                               dead_letter_dir=str(tmp_path / "dead"))
    refused = {"kind": "rejected", "cluster_id": "c1", "topic": "__cluster_metadata", "partition": 0, "seq": 1,
               "event_seq": 1, "now_ms": 1000, "proc_ms": 1000, "last_input_proc_ms": 1000, "silent": False,
               "replica_id": None, "status": "implausible_epoch", "reason": "fetch from node 1 claims epoch 9999"}
    writer.write_rows([refused], batch_id=4)
    writer.write_rows([refused], batch_id=4)  # replayed
    [line] = (tmp_path / "dead" / "stateful" / batch_file_name(4)).read_text().splitlines()
    assert json.loads(line)["reason"] == "implausible_epoch" and json.loads(line)["cluster_id"] == "c1"
    assert writer.monitor.invalid_records_total == {"implausible_epoch": 2}
