"""Where the project's JVM parts are: the jars deploy/setup.sh fetches from Maven Central
(deploy/jvm/pom.xml pins them) and the `java` that runs them.

The jars sit in `<repository>/.jvm/<profile>/` (`kafka`: the broker and Kafka's tools at the
pinned version; `kafka-3.9` and the like: an older Kafka line; `spark-kafka`: Spark's Kafka
connector); QUORUM_JVM_DIR names another directory with the same layout.
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
MANIFEST = REPOSITORY / "deploy" / "jvm" / "pom.xml"
KAFKA = "kafka"
SPARK_KAFKA = "spark-kafka"
JMX_EXPORTER = "jmx-exporter"


class JvmPartsMissing(RuntimeError):
    """A JVM part the caller needs was never fetched."""


@functools.cache
def kafka_versions() -> dict[str, str]:
    """Kafka version -> the manifest's profile that pins it (`kafka` for the default one): the
    version of each Kafka profile's kafka_<scala> dependency, read from the manifest so that the
    pins live in one place."""
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    root = ET.parse(MANIFEST).getroot()
    properties = {e.tag.split("}", 1)[1]: (e.text or "").strip() for e in root.find("m:properties", ns)}

    def resolve(text: str) -> str:
        return re.sub(r"\$\{([^}]+)\}", lambda m: properties[m.group(1)], text.strip())
    found = {}
    for profile in root.iterfind("m:profiles/m:profile", ns):
        for dep in profile.iterfind("m:dependencies/m:dependency", ns):
            if dep.findtext("m:groupId", "", ns) == "org.apache.kafka" and \
                    resolve(dep.findtext("m:artifactId", "", ns)).startswith("kafka_"):
                found[resolve(dep.findtext("m:version", "", ns))] = profile.findtext("m:id", "", ns)
    return found


def default_kafka_version() -> str:
    """The Kafka version the project runs unless told otherwise: the `kafka` profile's."""
    return next(v for v, profile in kafka_versions().items() if profile == KAFKA)


def kafka_profile(version: str | None = None) -> str:
    """The manifest's profile that holds Kafka `version` (None: the default version)."""
    version = version or default_kafka_version()
    try:
        return kafka_versions()[version]
    except KeyError:
        raise JvmPartsMissing(f"Kafka {version} is not pinned in {MANIFEST} (pinned: "
                              f"{', '.join(sorted(kafka_versions()))})") from None


def kafka_major(version: str | None = None) -> int:
    return int((version or default_kafka_version()).split(".", 1)[0])


def kafka_classpath(version: str | None = None) -> str:
    """Kafka `version`'s broker and tools, or an error that says how to fetch them."""
    version = version or default_kafka_version()
    profile = kafka_profile(version)
    try:
        return classpath(profile)
    except JvmPartsMissing:
        how = "deploy/setup.sh" if profile == KAFKA else f"QUORUM_KAFKA_VERSIONS={version} deploy/setup.sh"
        raise JvmPartsMissing(f"no jars in {jvm_dir() / profile}: Kafka {version} was never fetched "
                              f"({how} fetches the '{profile}' profile of {MANIFEST} from Maven Central)") from None


def jvm_dir() -> Path:
    return Path(os.environ.get("QUORUM_JVM_DIR") or REPOSITORY / ".jvm")


def jars(profile: str) -> list[Path]:
    """The jars of one profile of the manifest, or an error saying how to fetch them."""
    directory = jvm_dir() / profile
    found = sorted(directory.glob("*.jar"))
    if not found:
        raise JvmPartsMissing(f"no jars in {directory}: run deploy/setup.sh, which fetches the "
                              f"'{profile}' profile of {MANIFEST} from Maven Central")
    return found


def classpath(profile: str) -> str:
    return os.pathsep.join(str(jar) for jar in jars(profile))


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    candidate = Path(home) / "bin" / "java" if home else None
    if candidate is not None and candidate.is_file():
        return str(candidate)
    found = shutil.which("java")
    if found is None:
        raise JvmPartsMissing("java is not on PATH (Java 17 or newer is needed)")
    return found
