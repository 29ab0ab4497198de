"""The local stack's streaming job configuration: deploy/job.local.yaml (every key documented
there) with this stack's addresses, written to RUN_DIR/job.yaml."""
from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


# what docs/deployment.md ("The job for a fleet") sets for a fleet
FLEET_QUORUM_ROW_REFRESH_MS = 10_000


def write_job_config(run_dir: Path, bootstrap: str, events_topic: str, health_topic: str, pushgateway: str,
                     job_properties: str | None, fleet: bool = False) -> Path:
    """`job_properties`: the job principal's Kafka client properties file (--secure), or None;
    `fleet`: the stack watches a fleet besides its own quorum."""
    config = yaml.safe_load((ROOT / "deploy" / "job.local.yaml").read_text())
    config["spark"]["master"] = "local[*]"
    config["source"].update(bootstrap_servers=bootstrap, topic=events_topic, starting_offsets="earliest")
    config["job"]["checkpoint_location"] = str(run_dir / "checkpoints")
    config["dead_letters"]["path"] = str(run_dir / "dead-letters")
    config["sink"]["prometheus"].update(mode="pushgateway", pushgateway_url=f"http://{pushgateway}")
    config["sink"]["kafka"].update(enabled=True, bootstrap_servers=bootstrap, topic=health_topic)
    if fleet:
        config["health"]["quorum_row_refresh_ms"] = FLEET_QUORUM_ROW_REFRESH_MS
    if job_properties:
        config["source"]["command_config"] = job_properties
        config["sink"]["kafka"]["command_config"] = job_properties
    path = run_dir / "job.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path
