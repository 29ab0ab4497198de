"""What one run of the local stack leaves in its run directory, and its clearing before the next.

Each run starts a new Kafka cluster and a new quorum, so a checkpoint's offsets, the nodes' logs,
the pushed verdicts and the stored series of a previous run describe a cluster that is gone: the
job would plan offsets the new topic never had, and the Pushgateway would serve the old run's
last batch time (QuorumMonitorSilent)."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable

NOTIFICATIONS_FILE = "alert-notifications.jsonl"  # every alert Alertmanager notified (the nemesis reads it)
PER_RUN_STATE = ("kafka", "kafka-quorum", "credentials", "checkpoints", "dead-letters", "nodes", "logs",
                 "pushgateway.data", "prometheus-data", "alertmanager-data", "job.yaml", "prometheus.yml",
                 "alertmanager.yml", "control.sock", NOTIFICATIONS_FILE)


def clear_previous_run(run_dir: Path, say: Callable[[str], None] = lambda text: None) -> None:
    """Removes only the names this launcher creates, never anything else in the directory."""
    found = [name for name in PER_RUN_STATE if (run_dir / name).exists()]
    if not found:
        return
    say(f"clearing the previous run's state in {run_dir} ({', '.join(found)}): each run starts a new cluster")
    for name in found:
        path = run_dir / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
