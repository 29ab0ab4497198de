"""One Spark version: pyproject's exact pyspark pin. Spark's Kafka connector in the JVM manifest,
the image's default Spark, the spark-operator's sparkVersion and its connector, and every versioned
example in the docs are that version; the image tags are the project's version; the installed
pyspark is the pinned one."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "deploy" / "cluster"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
(PYSPARK,) = [Requirement(r) for r in PROJECT["dependencies"] if Requirement(r).name == "pyspark"]
(FLOOR,) = [Version(s.version) for s in PYSPARK.specifier if s.operator == "=="]
IMAGE = re.compile(r"\b(?:REGISTRY|registry[\w./-]*)/quorum-health:([\w.-]+)")


def manifest_documents() -> list[tuple[str, dict]]:
    return [(p.name, d) for p in sorted((CLUSTER / "k8s").glob("*.yaml"))
            for d in yaml.safe_load_all(p.read_text()) if d]


def test_the_floor_has_the_row_based_transform_with_state():
    # GroupedData.transformWithState (rows) is new in PySpark 4.1.0 (SPARK-51814)
    assert FLOOR >= Version("4.1.0")
    from pyspark.sql.group import GroupedData
    assert hasattr(GroupedData, "transformWithState")


def test_the_jvm_manifest_fetches_the_connector_of_the_pinned_spark():
    pom = (ROOT / "deploy" / "jvm" / "pom.xml").read_text()
    assert re.findall(r"<spark\.version>([^<]+)</spark\.version>", pom) == [str(FLOOR)]
    assert "<artifactId>spark-sql-kafka-0-10_${scala.binary}</artifactId>" in pom


def test_the_installed_pyspark_satisfies_the_requirement():
    import pyspark
    assert Version(pyspark.__version__) in PYSPARK.specifier


def test_the_image_builds_the_floor():
    dockerfile = (CLUSTER / "Dockerfile").read_text()
    assert re.findall(r"^ARG SPARK_VERSION=(\S+)$", dockerfile, re.M) == [str(FLOOR)]
    assert "FROM apache/spark:${SPARK_VERSION}-" in dockerfile
    assert 'pyspark==${SPARK_VERSION}' in dockerfile


def test_the_manifests_run_the_floor_and_the_projects_image():
    spark_versions, images = [], []
    for name, document in manifest_documents():
        text = yaml.safe_dump(document)
        spark_versions += [(name, v) for v in re.findall(r"sparkVersion: '?([\d.]+)", text)]
        spark_versions += [(name, v) for v in re.findall(r"spark-sql-kafka-0-10_2\.13:([\d.]+)", text)]
        images += [(name, tag) for tag in IMAGE.findall(text)]
    assert spark_versions and all(v == str(FLOOR) for _, v in spark_versions), spark_versions
    assert images and all(tag == PROJECT["version"] for _, tag in images), images


def test_the_docs_name_the_floor():
    for path in [ROOT / "README.md", ROOT / "deploy" / "cluster" / "Dockerfile", *ROOT.joinpath("docs").glob("*.md")]:
        text = path.read_text()
        for version in re.findall(r"SPARK_VERSION=([\d.]+)", text):
            assert version == str(FLOOR), (path.name, version)
        for tag in IMAGE.findall(text):
            assert tag == PROJECT["version"], (path.name, tag)
