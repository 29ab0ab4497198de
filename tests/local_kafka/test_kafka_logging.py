"""Each Kafka line logs as its distribution does: 4.x through log4j2, 3.x through reload4j (log4j
1's configuration). The manifest's profile of each version holds the matching SLF4J binding, and
the launcher writes and names the matching configuration."""
from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from quorum import jvm
from quorum.local_kafka import kafka_logging

NS = {"m": "http://maven.apache.org/POM/4.0.0"}
BINDINGS = {True: "log4j-slf4j-impl", False: "slf4j-reload4j"}


def profile_artifacts(profile: str) -> set[str]:
    root = ET.parse(jvm.MANIFEST).getroot()
    [found] = [p for p in root.iterfind("m:profiles/m:profile", NS) if p.findtext("m:id", "", NS) == profile]
    return {d.findtext("m:artifactId", "", NS) for d in found.iterfind("m:dependencies/m:dependency", NS)}


@pytest.mark.parametrize("version", sorted(jvm.kafka_versions()))
def test_each_kafka_profile_has_its_lines_binding_and_kafkas_tools(version):
    artifacts = profile_artifacts(jvm.kafka_profile(version))
    log4j2 = kafka_logging.uses_log4j2(version)
    assert BINDINGS[log4j2] in artifacts and BINDINGS[not log4j2] not in artifacts
    assert {"kafka_${scala.binary}", "kafka-tools"} <= artifacts


def test_the_default_version_is_the_kafka_profiles():
    assert jvm.kafka_profile() == jvm.KAFKA == jvm.kafka_profile(jvm.default_kafka_version())


@pytest.mark.parametrize("version, name, option", [
    ("4.4.0", "log4j2.properties", "-Dlog4j2.configurationFile="),
    ("4.3.2", "log4j2.properties", "-Dlog4j2.configurationFile="),
    ("4.2.2", "log4j2.properties", "-Dlog4j2.configurationFile="),
    ("4.1.2", "log4j2.properties", "-Dlog4j2.configurationFile="),
    ("4.0.2", "log4j2.properties", "-Dlog4j2.configurationFile="),
    ("3.9.1", "log4j.properties", "-Dlog4j.configuration=file:"),
    ("3.7.2", "log4j.properties", "-Dlog4j.configuration=file:"),
])
def test_the_log_configuration_is_the_one_the_version_reads(tmp_path, version, name, option):
    path = kafka_logging.write_config(tmp_path, version)
    assert path.name == name and "INFO" in path.read_text()
    assert kafka_logging.jvm_option(path, version) == f"{option}{path}"
