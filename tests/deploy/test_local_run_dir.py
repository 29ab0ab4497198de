"""`deploy/run-local` started again on a run directory it used before: each run starts a new Kafka
cluster and quorum, so everything the previous run left (Kafka's data, the checkpoint's offsets,
the nodes' logs, the Pushgateway's and Prometheus's stored series) goes, and nothing else in the
directory is touched."""
from __future__ import annotations

from deploy.stack_run_dir import PER_RUN_STATE, clear_previous_run


def test_a_second_run_starts_without_the_previous_runs_state_and_keeps_everything_else(tmp_path):
    (tmp_path / "checkpoints" / "health" / "offsets").mkdir(parents=True)
    (tmp_path / "checkpoints" / "health" / "offsets" / "41").write_text('{"quorum-events":{"4":1200}}')
    (tmp_path / "nodes" / "data-1").mkdir(parents=True)
    (tmp_path / "kafka" / "data").mkdir(parents=True)
    (tmp_path / "pushgateway.data").write_bytes(b"last batch 3 hours ago")
    (tmp_path / "job.yaml").write_text("job: {}")
    (tmp_path / "operator-notes.txt").write_text("mine")
    (tmp_path / "checkpoints-backup").mkdir()

    clear_previous_run(tmp_path)

    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoints-backup", "operator-notes.txt"]
    assert (tmp_path / "operator-notes.txt").read_text() == "mine"


def test_a_fresh_directory_is_left_as_it_is(tmp_path):
    clear_previous_run(tmp_path)
    assert list(tmp_path.iterdir()) == []
    assert "stack.json" not in PER_RUN_STATE  # a running stack's state file makes `up` refuse instead
