"""Kafka's own log, set up as each Kafka line expects: 4.x logs through log4j2 (a
log4j2.properties named by -Dlog4j2.configurationFile), 3.x through reload4j, which keeps log4j
1's API and configuration (a log4j.properties named by -Dlog4j.configuration=file:...). Either
way INFO and above go to standard output, which the launcher writes to the node's log file.

deploy/jvm/pom.xml puts the matching SLF4J binding in each Kafka profile.
"""
from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

from quorum import jvm

LOG4J2_PROPERTIES = """\
# Kafka's log: INFO and above, to standard output (the launcher writes it to a file).
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.authorizer.name = kafka.authorizer.logger
logger.authorizer.level = WARN
"""

LOG4J_PROPERTIES = """\
# Kafka's log: INFO and above, to standard output (the launcher writes it to a file).
log4j.rootLogger=INFO, out
log4j.appender.out=org.apache.log4j.ConsoleAppender
log4j.appender.out.layout=org.apache.log4j.PatternLayout
log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.kafka.authorizer.logger=WARN
"""


def uses_log4j2(version: str | None = None) -> bool:
    return jvm.kafka_major(version) >= 4


def config_path(directory: Path, version: str | None = None) -> Path:
    """Where write_config puts Kafka `version`'s log configuration in `directory`."""
    return directory / ("log4j2.properties" if uses_log4j2(version) else "log4j.properties")


def write_config(directory: Path, version: str | None = None) -> Path:
    """The log configuration Kafka `version` reads, written into `directory`; its path."""
    path = config_path(directory, version)
    path.write_text(LOG4J2_PROPERTIES if uses_log4j2(version) else LOG4J_PROPERTIES)
    return path


def jvm_option(config: Path, version: str | None = None) -> str:
    """The JVM option that makes Kafka `version` read `config` (from write_config)."""
    if uses_log4j2(version):
        return f"-Dlog4j2.configurationFile={config}"
    return f"-Dlog4j.configuration=file:{config}"


@functools.cache
def _silent_log4j_config() -> Path:
    # log4j 1 has no switch for "off": without a configuration it warns on stderr instead
    directory = tempfile.mkdtemp(prefix="kafka-log4j-")
    atexit.register(shutil.rmtree, directory, True)
    path = Path(directory) / "log4j.properties"
    path.write_text("log4j.rootLogger=OFF\n")
    return path


def silent_options(version: str | None = None) -> list[str]:
    """JVM options that turn Kafka's log off, for a tool whose standard output is its answer."""
    if uses_log4j2(version):
        return ["-Dlog4j2.level=OFF"]
    return [jvm_option(_silent_log4j_config(), version)]
