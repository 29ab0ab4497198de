"""After every fault the stack went through: no password, JAAS config or store password of the
secured stack appears in any log, state file, process's command line, health event or dead
letter, nor in what Prometheus scraped."""
from __future__ import annotations

import json
import re
import subprocess
import urllib.request
from pathlib import Path

from quorum.kafka_client import java_properties

from .conftest import health_events


def stack_secrets(state) -> set[str]:
    """Every password the stack's credentials hold: the principals', the stores'."""
    directory = Path(state["credentials"])
    found = {(directory / "tls" / "password").read_text().strip()}
    for path in directory.glob("*.properties"):
        props = java_properties.load(path)
        found |= {v for k, v in props.items() if "password" in k}
        found |= set(re.findall(r'password="([^"]+)"', props.get("sasl.jaas.config", "")))
    return {s for s in found if s}


def test_no_secret_of_the_secured_stack_leaks_anywhere(stack):
    run_dir, state = stack
    secrets = stack_secrets(state)
    assert len(secrets) >= 4  # three principals, the admin, the stores
    places: dict[str, str] = {}
    credentials = Path(state["credentials"])
    for path in run_dir.rglob("*"):
        # the credentials themselves, and Kafka's own config and storage (its server.properties
        # holds its passwords, readable by its owner alone, as any Kafka's does)
        if path.is_file() and credentials not in path.parents and (run_dir / "kafka") not in path.parents \
                and path.stat().st_size < 50_000_000:
            places[str(path.relative_to(run_dir))] = path.read_bytes().decode("utf-8", "replace")
    places["ps"] = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    places["health events"] = json.dumps(health_events(state))
    with urllib.request.urlopen(f"{state['urls']['pushgateway']}/metrics", timeout=10) as r:
        places["pushgateway"] = r.read().decode()
    leaks = [(where, secret[:3] + "...") for where, text in places.items() for secret in secrets if secret in text]
    assert not leaks, leaks
    assert (credentials.stat().st_mode & 0o077) == 0, "the credentials directory is readable by others"
