"""Apache Kafka's own command-line tools, run from the jars deploy/setup.sh fetched, as a
reference for the project's commands: `quorum describe` is compared with `kafka-metadata-quorum
describe`, row for row and column for column; values that move between the two calls (the high
watermark, log end offsets and lags move with Kafka's NoOps every 500 ms, timestamps with the
clock) within a stated tolerance.

Each tool runs from the jars of the cluster's own Kafka version, and prints as that version does
(the project's `quorum describe` prints as 4.4 does):
- 3.7 prints CurrentVoters and CurrentObservers as ids alone (`[1,2,3]`), and no DirectoryId
  column (DescribeQuorum v1 has no directory ids);
- 3.9 and 4.0 print an unknown directory id (a static voter's) as `"directoryId": null`, 4.1
  and later leave the key out."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from quorum import jvm
from quorum.events import UNKNOWN_DIRECTORY_ID
from quorum.local_kafka import kafka_logging

METADATA_QUORUM = "org.apache.kafka.tools.MetadataQuorumCommand"


def kafka_tool(main_class: str, *args: str, timeout_s: float = 60, version: str | None = None
               ) -> subprocess.CompletedProcess:
    """Run one of Kafka's tools from Kafka `version`'s jars (None: the pinned default's); its log
    goes nowhere."""
    return subprocess.run([jvm.java(), "-Xmx256m", *kafka_logging.silent_options(version),
                           "-cp", jvm.kafka_classpath(version), main_class, *args],
                          capture_output=True, text=True, timeout=timeout_s)


def metadata_quorum(bootstrap: str, *args: str, version: str | None = None, path: str = "--bootstrap-server") -> str:
    """`kafka-metadata-quorum --bootstrap-server BOOTSTRAP describe ARGS`'s output (`path`:
    --bootstrap-controller to ask the controllers)."""
    out = kafka_tool(METADATA_QUORUM, path, bootstrap, "describe", *args, version=version)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


QUORUM = [str(Path(sys.executable).parent / "quorum"), "describe"]
# between the two calls Kafka's leader appends a NoOp every 500 ms (metadata.max.idle.interval.ms);
# the two calls are a JVM start (~2 s here) apart
OFFSET_TOLERANCE = 20
TIME_TOLERANCE_MS = 10_000


def ours(bootstrap: str, *args: str, path: str = "--bootstrap-server") -> str:
    out = subprocess.run([*QUORUM, path, bootstrap, *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def status_fields(text: str) -> dict[str, str]:
    return {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in text.strip().splitlines())}


def table(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()]


def replicas(text: str) -> dict[int, dict]:
    """CurrentVoters or CurrentObservers as every Kafka line prints them, by id: what the tool
    says of each replica, an unknown directory id (null or left out) as UNKNOWN_DIRECTORY_ID.
    3.7's ids alone give empty entries: it says nothing more."""
    out = {}
    for r in json.loads(text):
        if isinstance(r, int):
            out[r] = {}
            continue
        out[r["id"]] = {"directoryId": r.get("directoryId") or UNKNOWN_DIRECTORY_ID,
                        **({"endpoints": r["endpoints"]} if "endpoints" in r else {})}
    return out


def assert_same_replicas(mine: str, theirs: str) -> None:
    """The same replicas, and for each what Kafka's tool says of it (3.7 says only ids)."""
    mine_by_id, theirs_by_id = replicas(mine), replicas(theirs)
    assert mine_by_id.keys() == theirs_by_id.keys(), (mine, theirs)
    for replica_id, said in theirs_by_id.items():
        assert {k: mine_by_id[replica_id].get(k) for k in said} == said, (replica_id, mine, theirs)


def assert_describe_status_matches(bootstrap: str, version: str | None = None, path: str = "--bootstrap-server"
                                   ) -> None:
    """`quorum describe --status` says what Kafka `version`'s `kafka-metadata-quorum describe
    --status` says (the same text with 4.4's tool), both asking through `path`."""
    theirs = status_fields(metadata_quorum(bootstrap, "--status", version=version, path=path))
    mine = status_fields(ours(bootstrap, "--status", path=path))
    print("kafka-metadata-quorum:", theirs, "\nquorum describe:", mine)
    assert mine.keys() == theirs.keys()
    for key in ("ClusterId", "LeaderId", "LeaderEpoch"):
        assert mine[key] == theirs[key], key
    for key in ("CurrentVoters", "CurrentObservers"):
        assert_same_replicas(mine[key], theirs[key])
        if (version or jvm.default_kafka_version()) == jvm.default_kafka_version():
            assert mine[key] == theirs[key], key
    assert 0 <= int(mine["HighWatermark"]) - int(theirs["HighWatermark"]) <= OFFSET_TOLERANCE
    # followers' lag moves between the calls (with followers: a single node has none)
    assert abs(int(mine["MaxFollowerLag"]) - int(theirs["MaxFollowerLag"])) <= OFFSET_TOLERANCE
    assert abs(int(mine["MaxFollowerLagTimeMs"]) - int(theirs["MaxFollowerLagTimeMs"])) <= TIME_TOLERANCE_MS


def assert_describe_replication_matches(bootstrap: str, version: str | None = None) -> None:
    """`quorum describe --replication` prints what Kafka `version`'s tool prints, column for
    column (3.7's has no DirectoryId column: the others, and ours says the ids are unknown)."""
    before_ms = int(time.time() * 1000)
    theirs = table(metadata_quorum(bootstrap, "--replication", version=version))
    mine = table(ours(bootstrap, "--replication"))
    print("kafka-metadata-quorum:", theirs, "\nquorum describe:", mine)
    header = theirs[0]
    missing = [c for c in mine[0] if c not in header]
    assert [c for c in mine[0] if c in header] == header and missing in ([], ["DirectoryId"]), (mine[0], header)
    assert len(mine) == len(theirs)
    for row_mine, row_theirs in zip(mine[1:], theirs[1:]):
        mine_row, theirs_row = dict(zip(mine[0], row_mine)), dict(zip(header, row_theirs))
        for column in ("NodeId", "DirectoryId", "Status"):
            assert mine_row[column] == theirs_row.get(column, UNKNOWN_DIRECTORY_ID), column
        assert abs(int(mine_row["Lag"]) - int(theirs_row["Lag"])) <= OFFSET_TOLERANCE
        assert 0 <= int(mine_row["LogEndOffset"]) - int(theirs_row["LogEndOffset"]) <= OFFSET_TOLERANCE
        for column in ("LastFetchTimestamp", "LastCaughtUpTimestamp"):
            assert abs(int(mine_row[column]) - int(theirs_row[column])) <= TIME_TOLERANCE_MS, column
            assert int(theirs_row[column]) <= before_ms + TIME_TOLERANCE_MS
