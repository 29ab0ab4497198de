"""How each process of the local stack is configured, started and awaited. All listen on free
loopback ports; all files live under the stack's run directory."""
from __future__ import annotations

import json
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "deploy"))

from prometheus_config import render_prometheus_config  # noqa: E402

from quorum.local_kafka.loopback_ports import free_port  # noqa: E402

CLUSTER_ID = "local-quorum"
EVENTS_TOPIC = "quorum-events"
HEALTH_TOPIC = "quorum-health"
BINARIES = {"prometheus": "/usr/bin/prometheus", "pushgateway": "/usr/bin/prometheus-pushgateway",
            "alertmanager": "/usr/bin/prometheus-alertmanager"}


class StartError(RuntimeError):
    pass


def await_condition(what: str, check, timeout_s: float, interval_s: float = 0.2, alive=lambda: None):
    """Poll `check()` until it returns something truthy; `alive()` returns a reason to give up."""
    deadline = time.monotonic() + timeout_s
    last_error = None
    while time.monotonic() < deadline:
        problem = alive()
        if problem:
            raise StartError(f"{what}: {problem}")
        try:
            result = check()
            if result:
                return result
        except Exception as e:  # noqa: BLE001 - any failure here means "not yet"
            last_error = e
        time.sleep(interval_s)
    raise StartError(f"{what} not ready after {timeout_s:.0f} s" + (f" ({last_error})" if last_error else ""))


def http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=2) as r:
        return r.status == 200


def http_json(url: str):
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def pushed_clusters(pushgateway: str) -> set[str]:
    """The clusters whose health is on the Pushgateway (the `cluster` label of `quorum_status`)."""
    groups = http_json(f"http://{pushgateway}/api/v1/metrics")["data"]
    return {m["labels"].get("cluster") for g in groups for m in g.get("quorum_status", {}).get("metrics", [])}


# --- the quorum -------------------------------------------------------------------------------

@dataclass(frozen=True)
class NodeSpec:
    node_id: int
    address: str
    config_path: Path
    voter: bool


def write_node_configs(run_dir: Path, voters: int, observers: int, bootstrap: str,
                       events_command_config: str | None = None) -> list[NodeSpec]:
    """Each node's YAML; `events_command_config`: the events producer's Kafka client properties file."""
    addresses = {i: f"127.0.0.1:{free_port()}" for i in range(1, voters + observers + 1)}
    voter_list = ",".join(f"{i}@{addresses[i]}" for i in range(1, voters + 1))
    specs = []
    for node_id, address in addresses.items():
        path = run_dir / "nodes" / f"node-{node_id}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump({
            "node.id": node_id, "cluster.id": CLUSTER_ID, "controller.quorum.voters": voter_list,
            "listener": address, "data.dir": str(run_dir / "nodes" / f"data-{node_id}"),
            "events.bootstrap.servers": bootstrap, "events.topic": EVENTS_TOPIC,
            **({"events.command.config": events_command_config} if events_command_config else {}),
        }, sort_keys=False))
        specs.append(NodeSpec(node_id, address, path, node_id <= voters))
    return specs


def quorum_leader(bootstrap: str) -> tuple[int, int] | None:
    """(leader id, epoch) from DescribeQuorum through kafka-python's admin client, or None."""
    from quorum.kafka_watch.describe_tool import fetch_quorum
    from quorum.kafka_watch.quorum_info import quorum_info
    _cluster, answer = fetch_quorum(bootstrap, {}, 3000)
    info = quorum_info(answer)
    return (info.leader_id, info.leader_epoch) if info.leader_id >= 0 else None


# --- Prometheus, Pushgateway, Alertmanager ------------------------------------------------------

def pushgateway_argv(address: str, run_dir: Path) -> list[str]:
    # Debian's build persists to /var/lib/prometheus/pushgateway.data by default, shared by every
    # Pushgateway on the machine: this stack's groups go to a file of its own
    return [BINARIES["pushgateway"], f"--web.listen-address={address}",
            f"--persistence.file={run_dir / 'pushgateway.data'}"]


def alertmanager_argv(address: str, run_dir: Path, webhook_url: str) -> list[str]:
    """The example configuration from alerts/, with both receivers pointed at the launcher's
    console receiver so that notifications show in the terminal."""
    config = yaml.safe_load((ROOT / "alerts" / "alertmanager.example.yml").read_text())
    for receiver in config.get("receivers", []):
        for hook in receiver.get("webhook_configs", []):
            hook["url"] = webhook_url
    route = config.setdefault("route", {})
    route["group_wait"] = "2s"  # locally, show notifications promptly
    for sub in route.get("routes", []):
        sub.pop("group_wait", None)
    path = run_dir / "alertmanager.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return [BINARIES["alertmanager"], f"--config.file={path}", f"--storage.path={run_dir / 'alertmanager-data'}",
            f"--web.listen-address={address}", "--cluster.listen-address="]


def prometheus_argv(address: str, run_dir: Path, pushgateway: str, alertmanager: str,
                    exporter: str | None = None) -> list[str]:
    path = run_dir / "prometheus.yml"
    path.write_text(render_prometheus_config(pushgateway, exporter, alertmanager,
                                             ROOT / "alerts" / "quorum-health.rules.yml", "1s"))
    return [BINARIES["prometheus"], f"--config.file={path}", f"--storage.tsdb.path={run_dir / 'prometheus-data'}",
            f"--web.listen-address={address}", "--web.enable-lifecycle"]


def check_binaries() -> None:
    missing = [p for p in BINARIES.values() if not Path(p).exists()]
    if missing:
        raise StartError(f"missing {', '.join(missing)}: install the Debian packages prometheus "
                         f"prometheus-pushgateway prometheus-alertmanager (deploy/setup.sh does)")
