"""Cluster mode: the spark-submit script builds the right command for YARN, Kubernetes and
standalone masters, always with Spark's Kafka connector at the cluster's Spark version, and
checks the config with the job's own loader first; the Kubernetes manifests agree with each
other, with the image, with the nodes' configuration loader and the CLI; the PrometheusRule is
exactly the promtool-tested rules file."""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from deploy.cluster import prometheus_rule
from prometheus_tools import alerting_rule_count, assert_tool_succeeds

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "deploy" / "cluster"
K8S = CLUSTER / "k8s"
SUBMIT = CLUSTER / "spark-submit.sh"


def submit(*args: str, **env: str) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PYTHON": sys.executable, **env}
    return subprocess.run(["bash", str(SUBMIT), *args], capture_output=True, text=True, env=full_env, timeout=60)


def dry_run(master: str, config: str, *extra: str, **env: str) -> list[str]:
    result = submit("--master", master, "--config", config, "--dry-run", *extra, **env)
    assert result.returncode == 0, result.stderr
    return shlex.split(result.stdout)


def job_file(tmp_path: Path) -> str:
    path = tmp_path / "job.yaml"
    path.write_text("source: {topic: quorum-events}\n")
    return str(path)


def option(command: list[str], name: str) -> list[str]:
    return [command[i + 1] for i, arg in enumerate(command) if arg == name]


def confs(command: list[str]) -> dict[str, str]:
    return dict(value.split("=", 1) for value in option(command, "--conf"))


def manifests(name: str) -> list[dict]:
    return [doc for doc in yaml.safe_load_all((K8S / name).read_text()) if doc]


def by_kind(docs: list[dict], kind: str) -> dict:
    (doc,) = [d for d in docs if d["kind"] == kind]
    return doc


# --- spark-submit --------------------------------------------------------------------------------

def test_script_is_valid_bash_and_its_help_names_the_three_masters():
    subprocess.run(["bash", "-n", str(SUBMIT)], check=True)
    help_text = submit("--help").stdout
    for master in ("yarn", "k8s://https://", "spark://"):
        assert master in help_text


def test_the_connector_matches_the_spark_version(tmp_path):
    import pyspark
    command = dry_run("yarn", job_file(tmp_path))
    assert option(command, "--packages") == [f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"]
    command = dry_run("yarn", job_file(tmp_path), SPARK_VERSION="4.1.0")
    assert option(command, "--packages") == ["org.apache.spark:spark-sql-kafka-0-10_2.13:4.1.0"]


@pytest.mark.parametrize("master", ["yarn", "spark://master:7077", "k8s://https://10.0.0.1:6443"])
def test_every_master_gets_the_connector(tmp_path, master):
    # on Kubernetes --config is a path inside the driver's pod, so the script cannot read it
    config = "/etc/quorum-health/job.yaml" if master.startswith("k8s") else job_file(tmp_path)
    command = dry_run(master, config, IMAGE="r/q:1")
    assert option(command, "--packages") == [f"org.apache.spark:spark-sql-kafka-0-10_2.13:{spark_version()}"]
    if master.startswith("k8s"):   # Ivy's cache must be writable in the driver's container
        assert confs(command)["spark.jars.ivy"] == "/tmp/.ivy2"


def spark_version() -> str:
    import pyspark
    return pyspark.__version__


def test_a_bad_job_config_is_refused_before_submitting(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("job: {checkpoint_locaton: /x}\n")
    result = submit("--master", "spark://master:7077", "--config", str(bad), "--dry-run")
    assert result.returncode == 2
    assert "bad job configuration" in result.stderr and "job.checkpoint_locaton: unknown key" in result.stderr


def test_yarn_runs_the_driver_in_the_cluster_with_the_config_shipped(tmp_path):
    config = tmp_path / "job.yaml"
    config.write_text("source: {topic: quorum-events}\n")
    command = dry_run("yarn", str(config))
    assert option(command, "--deploy-mode") == ["cluster"]
    assert option(command, "--files") == [str(config)]
    assert command[-4:] == [str(ROOT / "streaming" / "cli.py"), "run", "--config", "job.yaml"]
    assert confs(command)["spark.yarn.maxAppAttempts"] == "4"


def test_kubernetes_uses_the_image_and_the_project_inside_it():
    command = dry_run("k8s://https://10.0.0.1:6443", "/etc/quorum-health/job.yaml", "--", "--conf", "spark.executor.instances=3",
                      IMAGE="registry.example/quorum-health:0.1.0")
    assert option(command, "--deploy-mode") == ["cluster"]
    settings = confs(command)
    assert settings["spark.kubernetes.container.image"] == "registry.example/quorum-health:0.1.0"
    assert settings["spark.executor.instances"] == "3"
    dockerfile = (CLUSTER / "Dockerfile").read_text()
    assert "WORKDIR /opt/quorum-health" in dockerfile
    assert command[-4:] == ["local:///opt/quorum-health/streaming/cli.py", "run", "--config", "/etc/quorum-health/job.yaml"]
    service_account = settings["spark.kubernetes.authenticate.driver.serviceAccountName"]
    assert service_account == by_kind(manifests("streaming-job.yaml"), "ServiceAccount")["metadata"]["name"]


def test_kubernetes_without_an_image_is_refused():
    result = submit("--master", "k8s://https://h:6443", "--config", "/x.yaml", "--dry-run")
    assert result.returncode == 2 and "set IMAGE" in result.stderr


def test_standalone_runs_the_python_driver_in_client_mode_only(tmp_path):
    command = dry_run("spark://master:7077", job_file(tmp_path))
    assert option(command, "--deploy-mode") == ["client"]
    result = submit("--master", "spark://master:7077", "--config", job_file(tmp_path), "--dry-run",
                    DEPLOY_MODE="cluster")
    assert result.returncode == 2 and "client deploy mode only" in result.stderr


@pytest.mark.parametrize("args, message", [
    (["--config", "x.yaml"], "--master is required"),
    (["--master", "yarn"], "--config is required"),
    (["--master", "mesos://h:5050", "--config", "x.yaml"], "unsupported master 'mesos://h:5050'"),
    (["--master", "yarn", "--config", "/no/such/job.yaml"], "no such file"),
    (["--master", "yarn", "--config", "x.yaml", "--bogus"], "unknown argument '--bogus'"),
])
def test_bad_arguments_are_refused_with_a_clear_message(args, message):
    result = submit(*args, "--dry-run")
    assert result.returncode == 2 and message in result.stderr


def test_submitting_ships_an_importable_zip_of_the_packages(tmp_path):
    # spark-submit itself replaced by echo: this checks what the script hands it, not Spark
    result = submit("--master", "spark://master:7077", "--config", job_file(tmp_path),
                    SPARK_SUBMIT="echo", DIST_DIR=str(tmp_path))
    assert result.returncode == 0, result.stderr
    code_zip = tmp_path / "quorum_health_py.zip"
    assert option(shlex.split(result.stdout), "--py-files") == [str(code_zip)]
    names = zipfile.ZipFile(code_zip).namelist()
    assert "quorum/events.py" in names and "streaming/__init__.py" in names
    assert not [n for n in names if "__pycache__" in n]
    # an executor imports the packages from the zip alone
    probe = subprocess.run([sys.executable, "-I", "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                            "import quorum.events, streaming; print(quorum.events.__file__)", str(code_zip)],
                           capture_output=True, text=True, cwd=tmp_path)
    assert probe.returncode == 0 and str(code_zip) in probe.stdout, probe.stderr


# --- Kubernetes manifests ------------------------------------------------------------------------

def test_every_manifest_is_namespaced_and_listed_in_the_kustomization():
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    files = sorted(p.name for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(kustomization["resources"]) == files
    for name in files:
        for doc in manifests(name):
            assert doc["apiVersion"] and doc["metadata"]["name"], name
            if doc["kind"] != "Namespace":
                assert doc["metadata"]["namespace"] == "quorum-health", (name, doc["kind"])


def test_spark_application_runs_the_job_with_the_connector_and_its_config():
    docs = manifests("streaming-job.yaml")
    app = by_kind(docs, "SparkApplication")["spec"]
    assert app["deps"]["packages"] == [f"org.apache.spark:spark-sql-kafka-0-10_2.13:{app['sparkVersion']}"]
    assert f"ARG SPARK_VERSION={app['sparkVersion']}" in (CLUSTER / "Dockerfile").read_text()
    assert app["mainApplicationFile"] == "local:///opt/quorum-health/streaming/cli.py"
    assert app["arguments"][:2] == ["run", "--config"]
    config_path = Path(app["arguments"][2])
    volumes = {v["name"]: v for v in app["volumes"]}
    mounts = {m["name"]: m["mountPath"] for m in app["driver"]["volumeMounts"]}
    config_volume = next(name for name, path in mounts.items() if Path(path) == config_path.parent)
    config_map = by_kind(docs, "ConfigMap")
    assert volumes[config_volume]["configMap"]["name"] == config_map["metadata"]["name"]
    job = yaml.safe_load(config_map["data"][config_path.name])
    from streaming.config import JobConfig
    assert JobConfig.from_dict(job).source.topic == "quorum-events"
    from streaming.sinks.config import SinkConfig
    assert SinkConfig.from_dict(job["sink"]).prometheus.mode == "pushgateway"
    # the checkpoint is on the shared volume, mounted in the driver and every executor alike
    executor_mounts = {m["name"]: m["mountPath"] for m in app["executor"]["volumeMounts"]}
    assert mounts["checkpoint"] == executor_mounts["checkpoint"]
    assert job["job"]["checkpoint_location"].startswith(mounts["checkpoint"] + "/")
    assert job["dead_letters"]["path"].startswith(mounts["checkpoint"] + "/")
    claim = by_kind(docs, "PersistentVolumeClaim")
    assert volumes["checkpoint"]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    binding = by_kind(docs, "RoleBinding")
    assert binding["subjects"][0]["name"] == app["driver"]["serviceAccount"]
    assert app["restartPolicy"]["type"] == "Always"


def test_prometheus_rule_is_the_rules_file():
    assert (K8S / "prometheus-rule.yaml").read_text() == prometheus_rule.render(), \
        "run python deploy/cluster/prometheus_rule.py"
    (rule,) = manifests("prometheus-rule.yaml")
    rules_file = yaml.safe_load((ROOT / "alerts" / "quorum-health.rules.yml").read_text())
    assert rule["kind"] == "PrometheusRule" and rule["spec"]["groups"] == rules_file["groups"]


def test_prometheus_rule_spec_passes_promtool(tmp_path):
    (rule,) = manifests("prometheus-rule.yaml")
    extracted = tmp_path / "rules.yml"
    extracted.write_text(yaml.safe_dump(rule["spec"]))
    count = alerting_rule_count(ROOT / "alerts" / "quorum-health.rules.yml")
    assert f"SUCCESS: {count} rules found" in assert_tool_succeeds("promtool", "check", "rules", str(extracted))


def render_node_config(tmp_path: Path, hostname: str) -> dict:
    """Run the StatefulSet's init container script in a real shell, as the pod named `hostname`."""
    docs = manifests("quorum-nodes.yaml")
    template = tmp_path / "node.yaml.template"
    template.write_text(by_kind(docs, "ConfigMap")["data"]["node.yaml.template"])
    (init,) = by_kind(docs, "StatefulSet")["spec"]["template"]["spec"]["initContainers"]
    output = tmp_path / f"{hostname}.yaml"
    env = {"PATH": os.environ["PATH"], "HOSTNAME": hostname, "TEMPLATE": str(template), "OUTPUT": str(output)}
    subprocess.run(init["command"], env=env, check=True, timeout=10)
    return yaml.safe_load(output.read_text())


def test_each_node_pod_gets_a_valid_config_with_its_own_id_and_address(tmp_path):
    from quorum.node.config import from_mapping
    docs = manifests("quorum-nodes.yaml")
    stateful_set = by_kind(docs, "StatefulSet")
    service = by_kind(docs, "Service")
    assert stateful_set["spec"]["serviceName"] == service["metadata"]["name"]
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    name, replicas = stateful_set["metadata"]["name"], stateful_set["spec"]["replicas"]
    configs = [from_mapping(render_node_config(tmp_path, f"{name}-{i}"), source=f"pod {name}-{i}")
               for i in range(replicas)]
    assert [c.node_id for c in configs] == list(range(1, replicas + 1))
    assert all(c.is_voter for c in configs)  # from_mapping also checked listener == own voter entry
    domain = f"{service['metadata']['name']}.quorum-health.svc.cluster.local"
    assert {str(e) for e in configs[0].voters.values()} == {f"{name}-{i}.{domain}:9093" for i in range(replicas)}
    (container,) = stateful_set["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["quorum", "node", "--config", "/etc/quorum-node/node.yaml"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounts["/etc/quorum-node"] == "config" and mounts[str(configs[0].data_dir)] == "data"


def test_node_and_collector_commands_parse_with_the_quorum_cli():
    from quorum.cli import build_parser
    (node,) = by_kind(manifests("quorum-nodes.yaml"), "StatefulSet")["spec"]["template"]["spec"]["containers"]
    (collector,) = by_kind(manifests("collector.yaml"), "Deployment")["spec"]["template"]["spec"]["containers"]
    for command in (node["command"], collector["command"]):
        assert command[0] == "quorum"
        build_parser().parse_args(command[1:])


def test_collector_polls_one_cluster_with_one_replica():
    deployment = by_kind(manifests("collector.yaml"), "Deployment")
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"]["type"] == "Recreate"
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    command = container["command"]
    assert command[:2] == ["quorum", "collect"]
    assert option(command, "--bootstrap-server") and int(option(command, "--interval-ms")[0]) > 0
    assert option(command, "--events-bootstrap-server") and option(command, "--events-topic") == ["quorum-events"]


def test_the_fleet_collectors_replicas_each_take_their_ordinal_as_their_shard_of_the_replica_count():
    from quorum.cli import build_parser
    stateful_set = by_kind(manifests("collector-fleet.yaml"), "StatefulSet")
    replicas = stateful_set["spec"]["replicas"]
    (container,) = stateful_set["spec"]["template"]["spec"]["containers"]
    (env,) = [e for e in container["env"] if e["name"] == "SHARD"]
    assert env["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.labels['apps.kubernetes.io/pod-index']"
    assert option(container["command"], "--shard") == [f"$(SHARD)/{replicas}"]
    for ordinal in range(replicas):
        command = [part.replace("$(SHARD)", str(ordinal)) for part in container["command"]]
        args = build_parser().parse_args(command[1:])
        assert args.shard == (ordinal, replicas)
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert str(Path(option(container["command"], "--fleet")[0]).parent) in mounts
