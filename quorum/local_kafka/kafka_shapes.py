"""The shapes of real Kafka cluster the project is proven against: a Kafka version, a topology
and a voter set, named by an id such as `4.4.0-dedicated-dynamic` or `3.9.1-combined-static`.

  topology   dedicated: controllers and brokers are separate processes;
             combined: every node is both (process.roles=broker,controller)
  voter set  dynamic: formatted with --initial-controllers (KIP-853, Kafka 3.9 and later);
             static: controller.quorum.voters, no directory ids in the voter set

QUORUM_KAFKA_MATRIX selects the shapes the real-Kafka tests run: unset (or `ci`) the CI subset,
`full` every shape, or a comma-separated list of ids. deploy/setup.sh fetches the Kafka
versions of the selection, plus those QUORUM_KAFKA_VERSIONS names (space- or comma-separated, or
`all`): `python -m quorum.local_kafka.kafka_shapes profiles` prints the manifest's Kafka profiles to fetch.
"""
from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass

from quorum import jvm

MATRIX_VARIABLE = "QUORUM_KAFKA_MATRIX"
VERSIONS_VARIABLE = "QUORUM_KAFKA_VERSIONS"
TOPOLOGIES = ("dedicated", "combined")
VOTER_SETS = ("dynamic", "static")
FIRST_DYNAMIC = (3, 9)  # KIP-853: StorageTool's --standalone and --initial-controllers


class ShapeError(ValueError):
    pass


@dataclass(frozen=True)
class Shape:
    version: str
    topology: str
    voter_set: str

    @property
    def id(self) -> str:
        return f"{self.version}-{self.topology}-{self.voter_set}"

    @property
    def combined(self) -> bool:
        return self.topology == "combined"

    @property
    def dynamic(self) -> bool:
        return self.voter_set == "dynamic"

    def cluster_options(self) -> dict[str, str]:
        """KafkaCluster's arguments for this shape."""
        return {"kafka_version": self.version, "topology": self.topology, "voter_set": self.voter_set}

    def __str__(self) -> str:
        return self.id


def pinned(line: str) -> str:
    """The manifest's version of a Kafka line ("3.9") or the version itself ("3.9.1")."""
    versions = jvm.kafka_versions()
    if line in versions:
        return line
    found = [v for v in versions if v.startswith(line + ".")]
    if len(found) != 1:
        raise ShapeError(f"no Kafka {line} pinned in {jvm.MANIFEST} (pinned: {', '.join(sorted(versions))})")
    return found[0]


def parse(text: str) -> Shape:
    """A shape from its id; the version may be a line (`3.9-combined-static`)."""
    m = re.fullmatch(r"(\d+\.\d+(?:\.\d+)?)-([a-z]+)-([a-z]+)", text.strip())
    if not m:
        raise ShapeError(f"{text!r} is not VERSION-TOPOLOGY-VOTERS (e.g. 4.4.0-dedicated-dynamic)")
    version, topology, voter_set = pinned(m.group(1)), m.group(2), m.group(3)
    if topology not in TOPOLOGIES:
        raise ShapeError(f"{text!r}: topology {topology!r} is not one of {', '.join(TOPOLOGIES)}")
    if voter_set not in VOTER_SETS:
        raise ShapeError(f"{text!r}: voter set {voter_set!r} is not one of {', '.join(VOTER_SETS)}")
    if voter_set == "dynamic" and tuple(int(x) for x in version.split(".")[:2]) < FIRST_DYNAMIC:
        raise ShapeError(f"{text!r}: Kafka {version} has static voter sets only (KIP-853 came in 3.9)")
    return Shape(version, topology, voter_set)


# Every shape proven; the lines are pinned to exact versions in deploy/jvm/pom.xml.
FULL_IDS = ("4.4-dedicated-dynamic", "4.4-combined-static", "4.4-combined-dynamic", "4.4-dedicated-static",
            "4.3-dedicated-dynamic", "4.3-combined-static",
            "4.2-dedicated-dynamic", "4.2-combined-static",
            "4.1-dedicated-dynamic", "4.1-combined-static",
            "4.0-dedicated-dynamic", "4.0-combined-static",
            "3.9-dedicated-dynamic", "3.9-combined-static",
            "3.7-combined-static", "3.7-dedicated-static")
# What CI runs: both topologies and both voter sets, on the newest 4.x line users run (Strimzi's
# default) and the oldest dynamic-capable line; the pinned default (4.4) runs in tests/stack and
# tests/kafka_interop.
CI_IDS = ("4.3-dedicated-dynamic", "3.9-combined-static")


def full() -> tuple[Shape, ...]:
    return tuple(parse(i) for i in FULL_IDS)


def ci() -> tuple[Shape, ...]:
    return tuple(parse(i) for i in CI_IDS)


def selected(value: str | None = None) -> tuple[Shape, ...]:
    """The shapes QUORUM_KAFKA_MATRIX (or `value`) selects."""
    value = (os.environ.get(MATRIX_VARIABLE, "") if value is None else value).strip()
    if value in ("", "ci"):
        return ci()
    if value == "full":
        return full()
    shapes = tuple(parse(i) for i in value.split(",") if i.strip())
    if not shapes:
        raise ShapeError(f"{MATRIX_VARIABLE}={value!r} names no shape")
    return shapes


def extra_versions(value: str | None = None) -> list[str]:
    """The versions QUORUM_KAFKA_VERSIONS (or `value`) names."""
    value = (os.environ.get(VERSIONS_VARIABLE, "") if value is None else value).strip()
    if value == "all":
        return sorted(jvm.kafka_versions())
    return [pinned(v) for v in re.split(r"[\s,]+", value) if v]


def profiles_to_fetch() -> list[str]:
    """The manifest's Kafka profiles to fetch: the pinned default's (the local stack and most
    tests run it), then those the selected matrix and QUORUM_KAFKA_VERSIONS need."""
    versions = {s.version for s in selected()} | set(extra_versions())
    extra = {jvm.kafka_profile(v) for v in versions} - {jvm.KAFKA}
    return [jvm.KAFKA, *sorted(extra)]


def main(argv: list[str]) -> int:
    commands = {"profiles": profiles_to_fetch, "ids": lambda: [s.id for s in selected()]}
    if len(argv) != 1 or argv[0] not in commands:
        print(f"usage: python -m quorum.local_kafka.kafka_shapes {'|'.join(commands)}", file=sys.stderr)
        return 2
    try:
        print(" ".join(commands[argv[0]]()))
    except ShapeError as e:
        print(f"quorum.local_kafka.kafka_shapes: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
