"""Every configuration the project ships is loaded by the real loader that will read it: job
configs (`streaming.config`) and node configs (`quorum.node.config`), wherever they are: YAML files
under `deploy/`, the ConfigMaps of the Kubernetes manifests, and the fenced YAML examples of the
README and `docs/*.md`. Found by glob and by shape, so a config added later is checked too."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from quorum.node.config import from_mapping as node_config
from streaming.config import JobConfig

ROOT = Path(__file__).resolve().parents[2]
JOB_SECTIONS = {f for f in JobConfig.__dataclass_fields__}
NODE_KEYS = {"node.id", "controller.quorum.voters"}
# the StatefulSet's init container fills these in per pod (tests/deploy/test_cluster_mode.py runs it)
POD_PLACEHOLDERS = {"@NODE_ID@": "1", "@HOSTNAME@": "quorum-node-0"}
FENCED_YAML = re.compile(r"^```ya?ml\n(.*?)^```", re.M | re.S)


def kind_of(document) -> str | None:
    """'job', 'node', or None for YAML that is neither (rules, manifests, Prometheus configs)."""
    if not isinstance(document, dict):
        return None
    if NODE_KEYS & document.keys():
        return "node"
    if JOB_SECTIONS & document.keys():
        return "job"
    if isinstance(document.get("clusters"), list):
        return "fleet"
    return None


def documents_in(text: str, where: str):
    """(where, document) for each YAML document in `text`, looking inside ConfigMaps' data."""
    for i, document in enumerate(yaml.safe_load_all(text)):
        if isinstance(document, dict) and document.get("kind") == "ConfigMap":
            for name, value in (document.get("data") or {}).items():
                if name.endswith((".yaml", ".yml", ".template")):
                    for placeholder, value_for_test in POD_PLACEHOLDERS.items():
                        value = value.replace(placeholder, value_for_test)
                    yield from documents_in(value, f"{where} ConfigMap {document['metadata']['name']}/{name}")
        else:
            yield (where if i == 0 else f"{where} #{i}"), document


def shipped_configs() -> list[tuple[str, str, dict]]:
    found = []
    for path in sorted(ROOT.joinpath("deploy").rglob("*.y*ml")):
        for where, document in documents_in(path.read_text(), str(path.relative_to(ROOT))):
            found.append((where, document))
    for path in [ROOT / "README.md", *sorted(ROOT.joinpath("docs").glob("*.md"))]:
        for n, block in enumerate(FENCED_YAML.findall(path.read_text()), 1):
            for where, document in documents_in(block, f"{path.relative_to(ROOT)} yaml block {n}"):
                found.append((where, document))
    return [(where, kind, document) for where, document in found if (kind := kind_of(document))]


CONFIGS = shipped_configs()


@pytest.mark.parametrize("where, kind, document", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_shipped_config_loads(where, kind, document, tmp_path):
    if kind == "job":
        JobConfig.from_dict(document)
    elif kind == "fleet":
        load_fleet_example(document, tmp_path)
    else:
        node_config(document, source=where)


def load_fleet_example(document: dict, tmp_path: Path) -> list:
    """A fleet file as `quorum collect --fleet` loads it, the files it names stood in for by
    empty ones (they hold credentials that only the deployment has)."""
    from quorum.kafka_watch.fleet_file import load_fleet
    for entry in document.get("clusters") or []:
        for key in ("command_config", "node_metrics_config"):
            if isinstance(entry, dict) and entry.get(key):
                (tmp_path / Path(entry[key]).name).write_text("")
                entry[key] = Path(entry[key]).name
    (tmp_path / "fleet.yaml").write_text(yaml.safe_dump(document))
    return load_fleet(tmp_path / "fleet.yaml", 2000, 1000)


def test_the_known_configs_are_among_those_checked():
    # guards the discovery itself: a change in shape must not make the test above check nothing
    found = {(where, kind) for where, kind, _ in CONFIGS}
    assert ("deploy/job.local.yaml", "job") in found
    assert ("deploy/cluster/k8s/streaming-job.yaml ConfigMap quorum-health-job/job.yaml", "job") in found
    assert ("deploy/cluster/k8s/quorum-nodes.yaml ConfigMap quorum-node-config/node.yaml.template", "node") in found
    assert any(where.startswith("README.md yaml block") and kind == "node" for where, kind in found)
    assert any(where.startswith("docs/deployment.md yaml block") and kind == "job" for where, kind in found)
    assert ("deploy/cluster/k8s/collector-fleet.yaml ConfigMap quorum-collector-fleet/fleet.yaml", "fleet") in found
    assert any(where.startswith("docs/deployment.md yaml block") and kind == "fleet" for where, kind in found)


def test_a_broken_config_would_be_caught():
    from streaming.config import ConfigError
    with pytest.raises(ConfigError, match="config.checkpoint_location: unknown key"):
        JobConfig.from_dict({"source": {"topic": "quorum-events"}, "checkpoint_location": "/x"})
    assert kind_of({"source": {}, "checkpoint_location": "/x"}) == "job"
