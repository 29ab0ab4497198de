"""Where the project's JVM parts are: the jars deploy/setup.sh fetches from Maven Central
(deploy/jvm/pom.xml pins them) and the `java` that runs them.

The jars sit in `<repository>/.jvm/<profile>/` (`kafka`: the broker and Kafka's tools;
`spark-kafka`: Spark's Kafka connector); QUORUM_JVM_DIR names another directory with the
same layout.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
MANIFEST = REPOSITORY / "deploy" / "jvm" / "pom.xml"
KAFKA = "kafka"
SPARK_KAFKA = "spark-kafka"
JMX_EXPORTER = "jmx-exporter"


class JvmPartsMissing(RuntimeError):
    """A JVM part the caller needs was never fetched."""


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
